package opts

import (
	"strings"
	"testing"
	"time"
)

// FuzzParseTimeSpec checks --begin and --deadline: "now+N" is never
// before now and "now-N" never after it (an offset that overflowed
// time.Duration wrapped to the other side), a time of day alone is
// within the next day, and no form panics.
func FuzzParseTimeSpec(f *testing.F) {
	for _, s := range []string{
		"now", "now+60", "now+2hours", "now+1hour", "now+10min", "now+1day", "NOW+2weeks", "now-30seconds", "today",
		"tomorrow", "midnight", "noon", "teatime", "fika", "elevenses", "16:00", "09:15:30", "4:00PM", "11:00 am",
		"2026-04-01", "2026-04-01T12:34", "2026-04-01T12:34:56", "040126", "0401", "0101", "04/01/26", "04/01/2027",
		"04.01.26-08:00", "04/01-08:30:15", "16:00 04/01/26", "04/01/26 16:00", "2026-02-30", "13/01", "25:00",
		"13:00pm", "now+1fortnight", "nowish", "next tuesday", "", "10:00 11:00", "now+999999999weeks",
		"now-999999999weeks", "now+999999999days", "now-999999999days", "now+9999999999", "now+ 5 hours", "now+-5", "2026-t1-01", "9999-12-31T23:59:59",
		"0000-01-01", "0229", "02/29/2100", "0:0am", "12:00am", "1:1", "\x00", "\xff", "now+1\x00",
	} {
		f.Add(s)
	}
	now := time.Date(2026, 3, 10, 14, 30, 0, 0, time.FixedZone("X", 3600))
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseTimeSpec(s, now)
		if err != nil {
			return
		}
		w := strings.ToLower(strings.TrimSpace(s))
		switch {
		case w == "now":
			if !got.Equal(now) {
				t.Fatalf("ParseTimeSpec(%q) = %v, want now", s, got)
			}
		case strings.HasPrefix(w, "now+"):
			if got.Before(now) {
				t.Fatalf("ParseTimeSpec(%q) = %v, before now %v", s, got, now)
			}
		case strings.HasPrefix(w, "now-"):
			if got.After(now) {
				t.Fatalf("ParseTimeSpec(%q) = %v, after now %v", s, got, now)
			}
		case !strings.ContainsAny(w, "/.-") && !isDigits(w) && !strings.Contains(w, " ") && w != "today":
			// A time of day or a named one: the next such time.
			if !got.After(now) || got.Sub(now) > 25*time.Hour {
				t.Fatalf("ParseTimeSpec(%q) = %v, not within a day after %v", s, got, now)
			}
		}
		if got.Year() < 0 || got.Year() > 10000 {
			t.Fatalf("ParseTimeSpec(%q) = %v", s, got)
		}
	})
}
