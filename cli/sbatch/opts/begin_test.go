package opts

import (
	"testing"
	"time"
)

func TestParseTimeSpec(t *testing.T) {
	loc := time.FixedZone("T", 3600)
	now := time.Date(2026, 3, 10, 14, 30, 0, 0, loc) // a Tuesday afternoon
	at := func(y int, m time.Month, d, h, mi, s int) time.Time { return time.Date(y, m, d, h, mi, s, 0, loc) }
	tests := []struct {
		name string
		in   string
		want time.Time
		bad  bool
	}{
		{name: "now", in: "now", want: now},
		{name: "now plus seconds by default", in: "now+60", want: now.Add(time.Minute)},
		{name: "now plus hours", in: "now+2hours", want: now.Add(2 * time.Hour)},
		{name: "now plus one hour", in: "now+1hour", want: now.Add(time.Hour)},
		{name: "now plus minutes abbreviated", in: "now+10min", want: now.Add(10 * time.Minute)},
		{name: "now plus days", in: "now+1day", want: now.Add(24 * time.Hour)},
		{name: "now plus weeks", in: "NOW+2weeks", want: now.Add(14 * 24 * time.Hour)},
		{name: "now minus", in: "now-30seconds", want: now.Add(-30 * time.Second)},
		{name: "today", in: "today", want: at(2026, 3, 10, 0, 0, 0)},
		{name: "tomorrow", in: "tomorrow", want: at(2026, 3, 11, 0, 0, 0)},
		{name: "midnight is the next one", in: "midnight", want: at(2026, 3, 11, 0, 0, 0)},
		{name: "noon already passed", in: "noon", want: at(2026, 3, 11, 12, 0, 0)},
		{name: "teatime still ahead", in: "teatime", want: at(2026, 3, 10, 16, 0, 0)},
		{name: "fika", in: "fika", want: at(2026, 3, 10, 15, 0, 0)},
		{name: "elevenses tomorrow", in: "elevenses", want: at(2026, 3, 11, 11, 0, 0)},
		{name: "clock later today", in: "16:00", want: at(2026, 3, 10, 16, 0, 0)},
		{name: "clock already passed", in: "09:15:30", want: at(2026, 3, 11, 9, 15, 30)},
		{name: "clock with pm", in: "4:00PM", want: at(2026, 3, 10, 16, 0, 0)},
		{name: "clock with spaced am", in: "11:00 am", want: at(2026, 3, 11, 11, 0, 0)},
		{name: "iso date", in: "2026-04-01", want: at(2026, 4, 1, 0, 0, 0)},
		{name: "iso date and time", in: "2026-04-01T12:34", want: at(2026, 4, 1, 12, 34, 0)},
		{name: "iso date and seconds", in: "2026-04-01T12:34:56", want: at(2026, 4, 1, 12, 34, 56)},
		{name: "MMDDYY", in: "040126", want: at(2026, 4, 1, 0, 0, 0)},
		{name: "MMDD this year", in: "0401", want: at(2026, 4, 1, 0, 0, 0)},
		{name: "MMDD passed means next year", in: "0101", want: at(2027, 1, 1, 0, 0, 0)},
		{name: "MM/DD/YY", in: "04/01/26", want: at(2026, 4, 1, 0, 0, 0)},
		{name: "MM/DD/YYYY", in: "04/01/2027", want: at(2027, 4, 1, 0, 0, 0)},
		{name: "MM.DD.YY with time", in: "04.01.26-08:00", want: at(2026, 4, 1, 8, 0, 0)},
		{name: "MM/DD with time", in: "04/01-08:30:15", want: at(2026, 4, 1, 8, 30, 15)},
		{name: "time then date", in: "16:00 04/01/26", want: at(2026, 4, 1, 16, 0, 0)},
		{name: "date then time", in: "04/01/26 16:00", want: at(2026, 4, 1, 16, 0, 0)},
		{name: "no such day", in: "2026-02-30", bad: true},
		{name: "bad month", in: "13/01", bad: true},
		{name: "bad hour", in: "25:00", bad: true},
		{name: "bad pm hour", in: "13:00pm", bad: true},
		{name: "unit typo", in: "now+1fortnight", bad: true},
		{name: "now with junk", in: "nowish", bad: true},
		{name: "words", in: "next tuesday", bad: true},
		{name: "empty", in: "", bad: true},
		{name: "two clocks", in: "10:00 11:00", bad: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseTimeSpec(tt.in, now)
			if tt.bad {
				if err == nil {
					t.Errorf("ParseTimeSpec(%q) = %v, want an error", tt.in, got)
				}
				return
			}
			if err != nil || !got.Equal(tt.want) {
				t.Errorf("ParseTimeSpec(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
			}
		})
	}
}
