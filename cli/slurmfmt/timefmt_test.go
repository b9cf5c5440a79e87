package slurmfmt

import (
	"testing"
	"time"
)

func TestTimeFormat(t *testing.T) {
	loc := time.UTC
	// Wednesday 2026-03-11 14:30:05.
	now := time.Date(2026, 3, 11, 14, 30, 5, 0, loc)
	at := time.Date(2026, 3, 9, 7, 4, 3, 0, loc) // a Monday
	tests := []struct {
		name, env string
		t         time.Time
		want      string
	}{
		{name: "unset", env: "", t: at, want: "2026-03-09T07:04:03"},
		{name: "standard", env: "standard", t: at, want: "2026-03-09T07:04:03"},
		{name: "no percent is refused", env: "iso", t: at, want: "2026-03-09T07:04:03"},
		{name: "too long is refused", env: "%Y %Y %Y %Y %Y %Y %Y %Y %Y %Y %Y", t: at, want: "2026-03-09T07:04:03"},
		{name: "strftime", env: "%a %T", t: at, want: "Mon 07:04:03"},
		{name: "strftime dates", env: "%d/%m/%y %j", t: at, want: "09/03/26 068"},
		{name: "padding flags", env: "%-d %_H|%e|%k|%l%p", t: at, want: "9  7| 9| 7| 7AM"},
		{name: "C locale composites", env: "%c", t: at, want: "Mon Mar  9 07:04:03 2026"},
		{name: "F R s", env: "%F %R %s", t: at, want: "2026-03-09 07:04 " + "1773039843"},
		{name: "literal percent and unknown", env: "%%%Q", t: at, want: "%%Q"},
		{name: "relative today", env: "relative", t: now.Add(-time.Hour), want: "13:30:05"},
		{name: "relative yesterday", env: "relative", t: now.Add(-24 * time.Hour), want: "Ystday 14:30"},
		{name: "relative tomorrow", env: "relative", t: now.Add(24 * time.Hour), want: "Tomorr 14:30"},
		{name: "relative this week", env: "relative", t: now.Add(3 * 24 * time.Hour), want: "Sat 14:30"},
		{name: "relative earlier", env: "relative", t: at, want: "9 Mar 07:04"},
		{name: "relative next year", env: "relative", t: now.AddDate(1, 1, 0), want: "11 Apr 2027"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := ParseTimeFormat(tt.env, now, loc)
			if got := f.Format(tt.t, loc); got != tt.want {
				t.Errorf("SLURM_TIME_FORMAT=%q: %q, want %q", tt.env, got, tt.want)
			}
		})
	}
	var zero TimeFormat
	if got := string(zero.AppendTimestamp(nil, time.Time{}, loc)); got != "N/A" {
		t.Errorf("zero time %q, want N/A", got)
	}
	if !zero.Standard() || ParseTimeFormat("relative", now, loc).Standard() {
		t.Error("Standard() wrong")
	}
}
