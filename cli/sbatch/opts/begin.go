package opts

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"time"
)

var errBadTime = errors.New("bad time")

// namedTimes are parse_time's words for a time of day (and its hour);
// the next one after now is meant. A static table, not a map that every
// CLI command would build in its initialisation.
var namedTimes = [...]struct {
	name string
	hour int
}{{"midnight", 0}, {"elevenses", 11}, {"noon", 12}, {"fika", 15}, {"teatime", 16}}

// namedTime returns the hour of a namedTimes word.
func namedTime(t string) (int, bool) {
	for _, n := range namedTimes {
		if n.name == t {
			return n.hour, true
		}
	}
	return 0, false
}

// deltaUnits are the units of "now+N<unit>", as parse_time spells them.
var deltaUnits = []struct {
	name string
	secs int64
}{
	{"seconds", 1}, {"second", 1}, {"sec", 1},
	{"minutes", 60}, {"minute", 60}, {"min", 60},
	{"hours", 3600}, {"hour", 3600},
	{"days", 86400}, {"day", 86400},
	{"weeks", 604800}, {"week", 604800},
}

// ParseTimeSpec reads the absolute times --begin and --deadline take,
// in Slurm's parse_time formats, relative to now (whose location is the
// one the wall-clock forms are read in):
//
//	now[{+|-}N[seconds|minutes|hours|days|weeks]]   (default seconds)
//	today, tomorrow, midnight, noon, elevenses, fika, teatime
//	HH:MM[:SS][AM|PM]                                (today, or tomorrow if past)
//	YYYY-MM-DD[THH:MM[:SS]]
//	MMDD[YY][-HH:MM[:SS]], MM/DD[/YY][-HH:MM[:SS]], MM.DD[.YY][-HH:MM[:SS]]
//	HH:MM[:SS] followed by a date, or a date followed by HH:MM[:SS]
func ParseTimeSpec(s string, now time.Time) (time.Time, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	if t == "" {
		return time.Time{}, errBadTime
	}
	if strings.HasPrefix(t, "now") {
		return parseNow(t[3:], now)
	}
	day := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, now.Location())
	switch t {
	case "today":
		return day, nil
	case "tomorrow":
		return day.AddDate(0, 0, 1), nil
	}
	if h, ok := namedTime(t); ok {
		at := day.Add(time.Duration(h) * time.Hour)
		if !at.After(now) {
			at = at.AddDate(0, 0, 1)
		}
		return at, nil
	}
	t = strings.NewReplacer(" am", "am", " pm", "pm").Replace(t)
	words := strings.Fields(t)
	if len(words) > 2 {
		return time.Time{}, errBadTime
	}
	var (
		clock   = -1 // seconds after midnight
		date    time.Time
		hasDate bool
	)
	for _, w := range words {
		if strings.ContainsAny(w, "/.-") || isDigits(w) {
			d, c, err := parseDate(w, now)
			if err != nil || hasDate || (c >= 0 && clock >= 0) {
				return time.Time{}, errBadTime
			}
			if c >= 0 {
				clock = c
			}
			date, hasDate = d, true
			continue
		}
		c, err := parseClock(w)
		if err != nil || clock >= 0 {
			return time.Time{}, errBadTime
		}
		clock = c
	}
	if !hasDate {
		at := day.Add(time.Duration(clock) * time.Second)
		if !at.After(now) {
			at = at.AddDate(0, 0, 1)
		}
		return at, nil
	}
	return date.Add(time.Duration(max(clock, 0)) * time.Second), nil
}

// parseNow reads what follows "now".
func parseNow(rest string, now time.Time) (time.Time, error) {
	if rest == "" {
		return now, nil
	}
	sign := int64(1)
	switch rest[0] {
	case '+':
	case '-':
		sign = -1
	default:
		return time.Time{}, errBadTime
	}
	rest = strings.TrimSpace(rest[1:])
	i := 0
	for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
		i++
	}
	if i == 0 || i > 9 {
		return time.Time{}, errBadTime
	}
	n, _ := strconv.ParseInt(rest[:i], 10, 64)
	unit := strings.TrimSpace(rest[i:])
	mult := int64(1)
	if unit != "" {
		mult = 0
		for _, u := range deltaUnits {
			if unit == u.name {
				mult = u.secs
				break
			}
		}
		if mult == 0 {
			return time.Time{}, errBadTime
		}
	}
	// n*mult cannot overflow (n has at most 9 digits); in nanoseconds
	// it can, and a wrapped offset would put "now+N weeks" in the past.
	if n*mult > int64(math.MaxInt64/time.Second) {
		return time.Time{}, errBadTime
	}
	return now.Add(time.Duration(sign*n*mult) * time.Second), nil
}

// parseClock reads HH:MM[:SS][am|pm] into seconds after midnight.
func parseClock(w string) (int, error) {
	ampm := ""
	if strings.HasSuffix(w, "am") || strings.HasSuffix(w, "pm") {
		ampm, w = w[len(w)-2:], w[:len(w)-2]
	}
	f := strings.Split(w, ":")
	if len(f) < 2 || len(f) > 3 {
		return 0, errBadTime
	}
	var v [3]int
	for i, s := range f {
		if len(s) == 0 || len(s) > 2 || !isDigits(s) {
			return 0, errBadTime
		}
		v[i], _ = strconv.Atoi(s)
	}
	h, m, sec := v[0], v[1], v[2]
	if ampm != "" {
		if h < 1 || h > 12 {
			return 0, errBadTime
		}
		h %= 12
		if ampm == "pm" {
			h += 12
		}
	}
	if h > 23 || m > 59 || sec > 59 {
		return 0, errBadTime
	}
	return h*3600 + m*60 + sec, nil
}

// parseDate reads one of the date forms, with its optional time of day
// (clock is -1 when none was given).
func parseDate(w string, now time.Time) (date time.Time, clock int, err error) {
	clock = -1
	loc := now.Location()
	if len(w) >= 10 && w[4] == '-' && w[7] == '-' { // YYYY-MM-DD[THH:MM[:SS]]
		ds, ts, hasT := strings.Cut(w, "t")
		f := strings.Split(ds, "-")
		if len(f) != 3 || len(f[0]) != 4 || len(f[1]) != 2 || len(f[2]) != 2 {
			return time.Time{}, 0, errBadTime
		}
		y, m, d, ok := atoi3(f[0], f[1], f[2])
		if !ok {
			return time.Time{}, 0, errBadTime
		}
		if hasT {
			if clock, err = parseClock(ts); err != nil {
				return time.Time{}, 0, err
			}
		}
		date, ok = mkDate(y, m, d, loc)
		if !ok {
			return time.Time{}, 0, errBadTime
		}
		return date, clock, nil
	}
	ds, ts, hasTime := strings.Cut(w, "-")
	if hasTime {
		if clock, err = parseClock(ts); err != nil {
			return time.Time{}, 0, err
		}
	}
	var ms, dd, ys string
	switch {
	case strings.ContainsAny(ds, "/."):
		sep := "/"
		if strings.Contains(ds, ".") {
			sep = "."
		}
		f := strings.Split(ds, sep)
		if len(f) < 2 || len(f) > 3 {
			return time.Time{}, 0, errBadTime
		}
		ms, dd = f[0], f[1]
		if len(f) == 3 {
			ys = f[2]
		}
	case len(ds) == 4 || len(ds) == 6:
		ms, dd, ys = ds[:2], ds[2:4], ds[4:]
	default:
		return time.Time{}, 0, errBadTime
	}
	if len(ms) == 0 || len(ms) > 2 || len(dd) == 0 || len(dd) > 2 || (ys != "" && len(ys) != 2 && len(ys) != 4) {
		return time.Time{}, 0, errBadTime
	}
	yearGiven := ys != ""
	if !yearGiven {
		ys = strconv.Itoa(now.Year())
	}
	y, m, d, ok := atoi3(ys, ms, dd)
	if !ok {
		return time.Time{}, 0, errBadTime
	}
	if len(ys) == 2 {
		y += 2000
	}
	date, ok = mkDate(y, m, d, loc)
	if !ok {
		return time.Time{}, 0, errBadTime
	}
	today := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, loc)
	if !yearGiven && date.Before(today) {
		date, _ = mkDate(y+1, m, d, loc)
	}
	return date, clock, nil
}

func atoi3(a, b, c string) (int, int, int, bool) {
	if !isDigits(a) || !isDigits(b) || !isDigits(c) {
		return 0, 0, 0, false
	}
	x, _ := strconv.Atoi(a)
	y, _ := strconv.Atoi(b)
	z, _ := strconv.Atoi(c)
	return x, y, z, true
}

// mkDate builds a date, refusing ones time.Date would normalise (Feb 30).
func mkDate(y, m, d int, loc *time.Location) (time.Time, bool) {
	if m < 1 || m > 12 || d < 1 {
		return time.Time{}, false
	}
	t := time.Date(y, time.Month(m), d, 0, 0, 0, 0, loc)
	if t.Day() != d || int(t.Month()) != m {
		return time.Time{}, false
	}
	return t, true
}
