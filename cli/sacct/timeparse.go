package sacct

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// ParseTime reads a time the way Slurm's parse_time does for sacct -S/-E
// (the "past" flavour: a date or time of day without the part that would
// place it in the future is taken in the past):
//
//	YYYY-MM-DD[THH:MM[:SS]]   MMDD[YY]   MM/DD[/YY][-HH:MM[:SS]]   MM.DD[.YY]
//	HH:MM[:SS][AM|PM]         now[{+|-}COUNT[seconds|minutes|hours|days|weeks]]
//	today  midnight  noon  elevenses  fika  teatime  yesterday  tomorrow
//
// now is the reference clock and loc the zone local times are read in.
func ParseTime(s string, now time.Time, loc *time.Location) (time.Time, error) {
	now = now.In(loc)
	in := strings.TrimSpace(s)
	w := strings.ToLower(in)
	bad := fmt.Errorf("invalid time specification: %s", s)
	if w == "" {
		return time.Time{}, bad
	}
	day := func(offset int) time.Time {
		y, m, d := now.Date()
		return time.Date(y, m, d+offset, 0, 0, 0, 0, loc)
	}
	// pastOf moves a time of day to yesterday when it is still ahead.
	pastOf := func(h, m, sec int) time.Time {
		t := day(0).Add(time.Duration(h)*time.Hour + time.Duration(m)*time.Minute + time.Duration(sec)*time.Second)
		if t.After(now) {
			t = t.AddDate(0, 0, -1)
		}
		return t
	}
	switch w {
	case "today", "midnight":
		return day(0), nil
	case "yesterday":
		return day(-1), nil
	case "tomorrow":
		return day(1), nil
	case "noon":
		return pastOf(12, 0, 0), nil
	case "elevenses":
		return pastOf(11, 0, 0), nil
	case "fika":
		return pastOf(15, 0, 0), nil
	case "teatime":
		return pastOf(16, 0, 0), nil
	}
	if strings.HasPrefix(w, "now") {
		t, ok := parseNow(w[3:], now)
		if !ok {
			return time.Time{}, bad
		}
		return t, nil
	}
	// YYYY-MM-DD[THH:MM[:SS]]
	if len(w) >= 10 && w[4] == '-' && w[7] == '-' {
		date, clock, _ := strings.Cut(w, "t")
		// A 't' may come early ("2026-t1-28"): the date is then too
		// short to hold its fields.
		if len(date) < 9 || !isDigits(date[0:4]) || !isDigits(date[5:7]) || !isDigits(date[8:]) {
			return time.Time{}, bad
		}
		y, _ := strconv.Atoi(date[0:4])
		mo, _ := strconv.Atoi(date[5:7])
		d, e3 := strconv.Atoi(date[8:])
		if e3 != nil {
			return time.Time{}, bad
		}
		h, mi, sec := 0, 0, 0
		if clock != "" {
			var ok bool
			if h, mi, sec, ok = parseClock(clock); !ok {
				return time.Time{}, bad
			}
		}
		return mkDate(y, mo, d, h, mi, sec, loc, bad)
	}
	// MM/DD[/YY][-HH:MM[:SS]] and MM.DD[.YY]
	if strings.Contains(w, "/") || (strings.Contains(w, ".") && !strings.Contains(w, ":")) {
		sep := "/"
		if strings.Contains(w, ".") {
			sep = "."
		}
		date, clock, _ := strings.Cut(w, "-")
		parts := strings.Split(date, sep)
		if len(parts) < 2 || len(parts) > 3 {
			return time.Time{}, bad
		}
		// Digits only: Atoi would take "+1" and "-5" too.
		mo, e1 := strconv.Atoi(parts[0])
		d, e2 := strconv.Atoi(parts[1])
		if e1 != nil || e2 != nil || !isDigits(parts[0]) || !isDigits(parts[1]) {
			return time.Time{}, bad
		}
		h, mi, sec := 0, 0, 0
		if clock != "" {
			var ok bool
			if h, mi, sec, ok = parseClock(clock); !ok {
				return time.Time{}, bad
			}
		}
		if len(parts) == 3 {
			y, err := strconv.Atoi(parts[2])
			if err != nil || !isDigits(parts[2]) {
				return time.Time{}, bad
			}
			return mkDate(fullYear(y), mo, d, h, mi, sec, loc, bad)
		}
		return pastYear(now, mo, d, h, mi, sec, loc, bad)
	}
	// MMDD[YY]
	if isDigits(w) && (len(w) == 4 || len(w) == 6) {
		mo, _ := strconv.Atoi(w[0:2])
		d, _ := strconv.Atoi(w[2:4])
		if len(w) == 6 {
			y, _ := strconv.Atoi(w[4:6])
			return mkDate(2000+y, mo, d, 0, 0, 0, loc, bad)
		}
		return pastYear(now, mo, d, 0, 0, 0, loc, bad)
	}
	// HH:MM[:SS][AM|PM]
	if strings.Contains(w, ":") {
		clock := strings.TrimSpace(w)
		pm, am := strings.HasSuffix(clock, "pm"), strings.HasSuffix(clock, "am")
		if pm || am {
			clock = strings.TrimSpace(clock[:len(clock)-2])
		}
		h, mi, sec, ok := parseClock(clock)
		if !ok {
			return time.Time{}, bad
		}
		if am || pm {
			if h < 1 || h > 12 {
				return time.Time{}, bad
			}
			h %= 12
			if pm {
				h += 12
			}
		}
		return pastOf(h, mi, sec), nil
	}
	return time.Time{}, bad
}

// parseNow reads the "{+|-}COUNT[unit]" tail of now±…; seconds are the
// default unit.
func parseNow(rest string, now time.Time) (time.Time, bool) {
	if rest == "" {
		return now, true
	}
	sign := time.Duration(1)
	switch rest[0] {
	case '+':
	case '-':
		sign = -1
	default:
		return time.Time{}, false
	}
	rest = rest[1:]
	i := 0
	for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
		i++
	}
	if i == 0 {
		return time.Time{}, false
	}
	n, err := strconv.Atoi(rest[:i])
	if err != nil {
		return time.Time{}, false
	}
	var unit time.Duration
	switch u := rest[i:]; u {
	case "", "s", "sec", "secs", "second", "seconds":
		unit = time.Second
	case "m", "min", "mins", "minute", "minutes":
		unit = time.Minute
	case "h", "hour", "hours":
		unit = time.Hour
	case "d", "day", "days":
		unit = 24 * time.Hour
	case "w", "week", "weeks":
		unit = 7 * 24 * time.Hour
	default:
		return time.Time{}, false
	}
	// A count whose offset overflows time.Duration would wrap around
	// and land on the other side of now.
	if n > int(math.MaxInt64/unit) {
		return time.Time{}, false
	}
	return now.Add(sign * time.Duration(n) * unit), true
}

// parseClock reads HH:MM[:SS].
func parseClock(s string) (h, m, sec int, ok bool) {
	parts := strings.Split(s, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return 0, 0, 0, false
	}
	nums := make([]int, 3)
	for i, p := range parts {
		if p == "" || len(p) > 2 || !isDigits(p) {
			return 0, 0, 0, false
		}
		nums[i], _ = strconv.Atoi(p)
	}
	if nums[0] > 23 || nums[1] > 59 || nums[2] > 59 {
		return 0, 0, 0, false
	}
	return nums[0], nums[1], nums[2], true
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func fullYear(y int) int {
	if y < 100 {
		return 2000 + y
	}
	return y
}

// mkDate builds a date and rejects ones time.Date would normalize
// (February 30th).
func mkDate(y, mo, d, h, mi, sec int, loc *time.Location, bad error) (time.Time, error) {
	if mo < 1 || mo > 12 || d < 1 || d > 31 {
		return time.Time{}, bad
	}
	t := time.Date(y, time.Month(mo), d, h, mi, sec, 0, loc)
	if t.Day() != d || int(t.Month()) != mo {
		return time.Time{}, bad
	}
	return t, nil
}

// pastYear places a month/day without a year in the past: this year, or
// last year when that date is still ahead.
func pastYear(now time.Time, mo, d, h, mi, sec int, loc *time.Location, bad error) (time.Time, error) {
	t, err := mkDate(now.Year(), mo, d, h, mi, sec, loc, bad)
	if err != nil {
		return t, err
	}
	if t.After(now) {
		return mkDate(now.Year()-1, mo, d, h, mi, sec, loc, bad)
	}
	return t, nil
}
