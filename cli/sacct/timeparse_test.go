package sacct

import (
	"testing"
	"time"
)

func TestParseTime(t *testing.T) {
	// Sunday 2026-11-29 19:31:17 in a zone one hour east of UTC.
	loc := time.FixedZone("CET", 3600)
	now := time.Date(2026, 11, 29, 19, 31, 17, 0, loc)
	at := func(y int, mo time.Month, d, h, mi, s int) time.Time { return time.Date(y, mo, d, h, mi, s, 0, loc) }
	tests := []struct {
		name    string
		in      string
		want    time.Time
		wantErr bool
	}{
		{name: "ISO date", in: "2026-11-28", want: at(2026, 11, 28, 0, 0, 0)},
		{name: "ISO date and minutes", in: "2026-11-28T10:30", want: at(2026, 11, 28, 10, 30, 0)},
		{name: "ISO date and seconds", in: "2026-11-28T10:30:15", want: at(2026, 11, 28, 10, 30, 15)},
		{name: "MMDD", in: "1128", want: at(2026, 11, 28, 0, 0, 0)},
		{name: "MMDD ahead goes to last year", in: "1231", want: at(2025, 12, 31, 0, 0, 0)},
		{name: "MMDDYY", in: "112825", want: at(2025, 11, 28, 0, 0, 0)},
		{name: "MM/DD", in: "11/28", want: at(2026, 11, 28, 0, 0, 0)},
		{name: "MM/DD/YY", in: "11/28/25", want: at(2025, 11, 28, 0, 0, 0)},
		{name: "MM/DD/YYYY", in: "1/2/2024", want: at(2024, 1, 2, 0, 0, 0)},
		{name: "MM/DD-HH:MM", in: "11/28-10:00", want: at(2026, 11, 28, 10, 0, 0)},
		{name: "MM/DD/YY-HH:MM:SS", in: "11/28/26-10:00:30", want: at(2026, 11, 28, 10, 0, 30)},
		{name: "MM.DD.YY", in: "11.28.26", want: at(2026, 11, 28, 0, 0, 0)},
		{name: "time of day passed today", in: "10:00", want: at(2026, 11, 29, 10, 0, 0)},
		{name: "time of day still ahead is yesterday", in: "20:00", want: at(2026, 11, 28, 20, 0, 0)},
		{name: "time with seconds", in: "19:31:17", want: now},
		{name: "pm", in: "8:00pm", want: at(2026, 11, 28, 20, 0, 0)},
		{name: "am", in: "12:15AM", want: at(2026, 11, 29, 0, 15, 0)},
		{name: "now", in: "now", want: now},
		{name: "now minus hours", in: "now-1hour", want: now.Add(-time.Hour)},
		{name: "now plus seconds by default", in: "now+30", want: now.Add(30 * time.Second)},
		{name: "now minus days", in: "NOW-2days", want: now.Add(-48 * time.Hour)},
		{name: "now minus weeks", in: "now-1weeks", want: now.Add(-7 * 24 * time.Hour)},
		{name: "now minus minutes", in: "now-90minutes", want: now.Add(-90 * time.Minute)},
		{name: "today", in: "today", want: at(2026, 11, 29, 0, 0, 0)},
		{name: "midnight", in: "midnight", want: at(2026, 11, 29, 0, 0, 0)},
		{name: "yesterday", in: "Yesterday", want: at(2026, 11, 28, 0, 0, 0)},
		{name: "tomorrow", in: "tomorrow", want: at(2026, 11, 30, 0, 0, 0)},
		{name: "noon", in: "noon", want: at(2026, 11, 29, 12, 0, 0)},
		{name: "teatime", in: "teatime", want: at(2026, 11, 29, 16, 0, 0)},
		{name: "empty", in: "", wantErr: true},
		{name: "garbage", in: "soon", wantErr: true},
		{name: "month 13", in: "2026-13-01", wantErr: true},
		{name: "February 30th", in: "2026-02-30", wantErr: true},
		{name: "hour 25", in: "25:00", wantErr: true},
		{name: "pm hour 13", in: "13:00pm", wantErr: true},
		{name: "now times", in: "now*3", wantErr: true},
		{name: "now unknown unit", in: "now-3parsecs", wantErr: true},
		{name: "now without count", in: "now-", wantErr: true},
		{name: "MM/DD month 13", in: "13/01", wantErr: true},
		{name: "five digits", in: "11281", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseTime(tt.in, now, loc)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("ParseTime(%q) = %v, want an error", tt.in, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseTime(%q): %v", tt.in, err)
			}
			if !got.Equal(tt.want) {
				t.Errorf("ParseTime(%q) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}
