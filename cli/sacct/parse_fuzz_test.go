package sacct

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/tide-hpc/tide/cli/slurmfmt"
)

// FuzzParseFormat checks sacct --format: widths within
// slurmfmt.MaxWidth either way (a width of MinInt made a negative pad
// and a panic, a large one a line of gigabytes), and a header that
// renders in every layout.
func FuzzParseFormat(f *testing.F) {
	for _, s := range []string{
		"jobid,jobname", "JobID%20,State%-10", "all", "ALL%5", "a", "job", "", ",", "jobid%", "jobid%x",
		"jobid%4096", "jobid%4097", "jobid%-4096", "jobid%-9223372036854775808", "jobid%9223372036854775807",
		"jobid%0", "bogus", "%5", "jobid%%5", "elapsed%-1,start%3,comment%1", "\xff", "jobid\x00",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, list string) {
		cols, err := parseFormat(list)
		if err != nil {
			return
		}
		for _, c := range cols {
			if c.width > slurmfmt.MaxWidth || c.width < -slurmfmt.MaxWidth {
				t.Fatalf("parseFormat(%q): width %d", list, c.width)
			}
		}
		for _, mode := range []layout{fixedWidth, parsableEnd, parsableNoEnd} {
			var b bytes.Buffer
			if err := writeTable(&b, cols, nil, mode, "|", true); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// FuzzParseTime checks sacct -S and -E: now±N lands on its side of now
// (an offset that overflowed time.Duration wrapped around), a time of
// day is the last such time, and no input panics (a 't' early in an
// ISO date sliced past the end of its date).
func FuzzParseTime(f *testing.F) {
	for _, s := range []string{
		"2026-11-28", "2026-11-28T10:30", "2026-11-28T10:30:15", "1128", "1231", "112825", "11/28", "11/28/25",
		"1/2/2024", "11/28-10:00", "11/28/26-10:00:30", "11.28.26", "10:00", "20:00", "19:31:17", "8:00pm", "12:15AM",
		"now", "now-1hour", "now+30", "NOW-2days", "now-1weeks", "now-90minutes", "today", "midnight", "Yesterday",
		"tomorrow", "noon", "teatime", "", "soon", "2026-13-01", "2026-02-30", "25:00", "13:00pm", "now*3",
		"now-3parsecs", "now-", "13/01", "11281", "2026-t1-28", "2026-1t-28", "2026-11-t8", "now+99999999999weeks", "now+999999999days",
		"now-999999999days",
		"now-9223372036854775807", "+1/+2", "1/2/-5", "1/2/+5", "11/28/999999999999", "2026-+1-+5", "\x00", "\xff",
	} {
		f.Add(s)
	}
	loc := time.FixedZone("CET", 3600)
	now := time.Date(2026, 11, 29, 19, 31, 17, 0, loc)
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseTime(s, now, loc)
		if err != nil {
			return
		}
		w := strings.ToLower(strings.TrimSpace(s))
		switch {
		case strings.HasPrefix(w, "now+"):
			if got.Before(now) {
				t.Fatalf("ParseTime(%q) = %v, before now", s, got)
			}
		case strings.HasPrefix(w, "now-"):
			if got.After(now) {
				t.Fatalf("ParseTime(%q) = %v, after now", s, got)
			}
		case strings.Contains(w, ":") && !strings.ContainsAny(w, "/.-"):
			if got.After(now) || now.Sub(got) > 25*time.Hour {
				t.Fatalf("ParseTime(%q) = %v, not the last such time of day before %v", s, got, now)
			}
		}
	})
}
