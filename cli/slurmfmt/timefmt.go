package slurmfmt

import (
	"strconv"
	"strings"
	"time"
)

// TimeFormat is how time stamps print, chosen as Slurm's commands choose
// it from SLURM_TIME_FORMAT: "standard" (or unset, or invalid) is
// 2006-01-02T15:04:05; "relative" is short and relative to today
// ("12:26:38" today, "Ystday 20:13", "Tomorr 03:22", "Sat 02:17" within
// the coming week, "18 Jun 13:14" within a year, "19 Jan 2003" beyond);
// anything else containing a '%' and shorter than 32 bytes is a
// strftime(3) format ("%a %T" prints "Mon 12:34:56"). The zero
// TimeFormat is standard.
type TimeFormat struct {
	strftime string
	relative bool
	// today is the local date relative formats count from, as YYYYddd
	// (Slurm compares year*1000 + day of year).
	today int
}

// maxTimeFormat is the length of Slurm's format buffer: longer formats
// are refused (and the standard one used).
const maxTimeFormat = 32

// ParseTimeFormat returns the TimeFormat of a SLURM_TIME_FORMAT value;
// now (in loc, time.Local when nil) is the day relative formats count
// from.
func ParseTimeFormat(v string, now time.Time, loc *time.Location) TimeFormat {
	if loc == nil {
		loc = time.Local
	}
	switch {
	case v == "" || v == "standard":
		return TimeFormat{}
	case v == "relative":
		return TimeFormat{relative: true, today: dayNumber(now.In(loc))}
	case !strings.Contains(v, "%") || len(v) >= maxTimeFormat:
		return TimeFormat{}
	}
	return TimeFormat{strftime: v}
}

// dayNumber is Slurm's 1000*year + day-of-year (0-based).
func dayNumber(t time.Time) int { return 1000*t.Year() + t.YearDay() - 1 }

// Standard reports whether f prints Slurm's default format.
func (f TimeFormat) Standard() bool { return f.strftime == "" && !f.relative }

// Append appends t in loc in format f.
func (f TimeFormat) Append(dst []byte, t time.Time, loc *time.Location) []byte {
	if loc == nil {
		loc = time.Local
	}
	t = t.In(loc)
	switch {
	case f.relative:
		return appendStrftime(dst, relativeLayout(dayNumber(t)-f.today), t)
	case f.strftime != "":
		return appendStrftime(dst, f.strftime, t)
	}
	return t.AppendFormat(dst, TimestampLayout)
}

// AppendTimestamp is AppendTimestamp in format f: "N/A" for a zero t.
func (f TimeFormat) AppendTimestamp(dst []byte, t time.Time, loc *time.Location) []byte {
	if t.IsZero() {
		return append(dst, "N/A"...)
	}
	return f.Append(dst, t, loc)
}

// Format is Append as a string.
func (f TimeFormat) Format(t time.Time, loc *time.Location) string {
	return string(f.Append(nil, t, loc))
}

// relativeLayout is the strftime layout of a date distance days from
// today, as Slurm's relative format picks it.
func relativeLayout(days int) string {
	switch {
	case days == -1:
		return "Ystday %H:%M"
	case days == 0:
		return "%H:%M:%S"
	case days == 1:
		return "Tomorr %H:%M"
	case days < -365 || days > 365:
		return "%-d %b %Y"
	case days < -1 || days > 6:
		return "%-d %b %H:%M"
	}
	return "%a %H:%M"
}

// appendStrftime appends t formatted by the C-locale strftime layout,
// with glibc's padding flags ('-' none, '_' spaces, '0' zeros). An
// unknown conversion is copied as written.
func appendStrftime(dst []byte, layout string, t time.Time) []byte {
	for i := 0; i < len(layout); i++ {
		c := layout[i]
		if c != '%' || i+1 == len(layout) {
			dst = append(dst, c)
			continue
		}
		start := i
		i++
		pad := byte(0) // the conversion's own
		if strings.IndexByte("-_0", layout[i]) >= 0 && i+1 < len(layout) {
			pad = layout[i]
			i++
		}
		num := func(n, width int, def byte) {
			p := def
			switch pad {
			case '_':
				p = ' '
			case '-', '0':
				p = pad
			}
			s := strconv.Itoa(n)
			if p != '-' {
				for k := len(s); k < width; k++ {
					dst = append(dst, p)
				}
			}
			dst = append(dst, s...)
		}
		switch layout[i] {
		case 'a':
			dst = append(dst, t.Weekday().String()[:3]...)
		case 'A':
			dst = append(dst, t.Weekday().String()...)
		case 'b', 'h':
			dst = append(dst, t.Month().String()[:3]...)
		case 'B':
			dst = append(dst, t.Month().String()...)
		case 'c':
			dst = appendStrftime(dst, "%a %b %e %H:%M:%S %Y", t)
		case 'C':
			num(t.Year()/100, 2, '0')
		case 'd':
			num(t.Day(), 2, '0')
		case 'D', 'x':
			dst = appendStrftime(dst, "%m/%d/%y", t)
		case 'e':
			num(t.Day(), 2, ' ')
		case 'F':
			dst = appendStrftime(dst, "%Y-%m-%d", t)
		case 'g':
			y, _ := t.ISOWeek()
			num(y%100, 2, '0')
		case 'G':
			y, _ := t.ISOWeek()
			num(y, 0, '0')
		case 'H':
			num(t.Hour(), 2, '0')
		case 'I':
			num(hour12(t), 2, '0')
		case 'j':
			num(t.YearDay(), 3, '0')
		case 'k':
			num(t.Hour(), 2, ' ')
		case 'l':
			num(hour12(t), 2, ' ')
		case 'm':
			num(int(t.Month()), 2, '0')
		case 'M':
			num(t.Minute(), 2, '0')
		case 'n':
			dst = append(dst, '\n')
		case 'p':
			dst = append(dst, ampm(t)...)
		case 'P':
			dst = append(dst, strings.ToLower(ampm(t))...)
		case 'r':
			dst = appendStrftime(dst, "%I:%M:%S %p", t)
		case 'R':
			dst = appendStrftime(dst, "%H:%M", t)
		case 's':
			dst = strconv.AppendInt(dst, t.Unix(), 10)
		case 'S':
			num(t.Second(), 2, '0')
		case 't':
			dst = append(dst, '\t')
		case 'T', 'X':
			dst = appendStrftime(dst, "%H:%M:%S", t)
		case 'u':
			num((int(t.Weekday())+6)%7+1, 1, '0')
		case 'U':
			num((t.YearDay()+6-int(t.Weekday()))/7, 2, '0')
		case 'V':
			_, w := t.ISOWeek()
			num(w, 2, '0')
		case 'w':
			num(int(t.Weekday()), 1, '0')
		case 'W':
			num((t.YearDay()+6-(int(t.Weekday())+6)%7)/7, 2, '0')
		case 'y':
			num(t.Year()%100, 2, '0')
		case 'Y':
			num(t.Year(), 0, '0')
		case 'z':
			dst = t.AppendFormat(dst, "-0700")
		case 'Z':
			dst = t.AppendFormat(dst, "MST")
		case '%':
			dst = append(dst, '%')
		default:
			dst = append(dst, layout[start:i+1]...)
		}
	}
	return dst
}

func hour12(t time.Time) int {
	if h := t.Hour() % 12; h != 0 {
		return h
	}
	return 12
}

func ampm(t time.Time) string {
	if t.Hour() < 12 {
		return "AM"
	}
	return "PM"
}
