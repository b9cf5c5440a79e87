package api

import (
	"fmt"
	"strconv"
	"strings"
)

// Time limits travel as whole seconds. Slurm counts minutes, but its M:S
// form can name seconds and Tide honours them (a 0:05 limit ends a job
// after five seconds).
const (
	// NoValue means "not given": the partition default applies.
	NoValue int64 = 0
	// Infinite is UNLIMITED / infinite.
	Infinite int64 = -1
	// MaxTimeLimit is the longest finite time limit, 100 years in
	// seconds. Slurm counts limits in 32-bit minutes (about 8,000
	// years); Tide stops well short of that so that a start time plus
	// any limit stays within time.Duration's 292 years and every
	// deadline on the controller and the nodes is exact. Longer is
	// UNLIMITED.
	MaxTimeLimit int64 = 100 * 365 * 86400
)

// ErrTimeLimit is Slurm's message for a time limit it cannot take.
const ErrTimeLimit = "Requested time limit is invalid (missing or exceeds some limit)"

// CheckTimeLimit reports whether secs is a time limit a job may carry:
// NoValue (the partition's default applies), Infinite, or 1 second to
// MaxTimeLimit. Anything else reaching the API (a negative number
// other than Infinite, an overflowed sum) is refused, never read as
// "no limit".
func CheckTimeLimit(secs int64) error {
	if secs == NoValue || secs == Infinite || secs > 0 && secs <= MaxTimeLimit {
		return nil
	}
	if secs > MaxTimeLimit {
		return Invalid("%s: %d seconds is more than the maximum %s (use UNLIMITED)", ErrTimeLimit, secs, FormatTimeLimit(MaxTimeLimit))
	}
	return Invalid("%s: %d seconds is neither positive nor UNLIMITED (-1)", ErrTimeLimit, secs)
}

// ParseTimeLimit parses every Slurm time format: M, M:S, H:M:S, D-H,
// D-H:M, D-H:M:S, and UNLIMITED / INFINITE / -1. It returns seconds or
// Infinite.
func ParseTimeLimit(s string) (int64, error) {
	t := strings.TrimSpace(s)
	switch strings.ToLower(t) {
	case "":
		return 0, Invalid("empty time limit")
	case "unlimited", "infinite", "-1":
		return Infinite, nil
	}
	days := int64(0)
	rest := t
	if d, r, ok := strings.Cut(t, "-"); ok {
		n, err := atoiField(d)
		if err != nil {
			return 0, Invalid("invalid time specification %q", s)
		}
		days, rest = n, r
	}
	fields := strings.Split(rest, ":")
	nums := make([]int64, len(fields))
	for i, f := range fields {
		n, err := atoiField(f)
		if err != nil {
			return 0, Invalid("invalid time specification %q", s)
		}
		nums[i] = n
	}
	var secs int64
	switch {
	case t != rest: // D-H, D-H:M, D-H:M:S
		if len(nums) > 3 {
			return 0, Invalid("invalid time specification %q", s)
		}
		secs = days * 86400
		mult := []int64{3600, 60, 1}
		for i, n := range nums {
			secs += n * mult[i]
		}
	case len(nums) == 1: // M
		secs = nums[0] * 60
	case len(nums) == 2: // M:S
		secs = nums[0]*60 + nums[1]
	case len(nums) == 3: // H:M:S
		secs = nums[0]*3600 + nums[1]*60 + nums[2]
	default:
		return 0, Invalid("invalid time specification %q", s)
	}
	if secs == 0 && days == 0 {
		// Slurm reads a zero limit as "no limit" only for the partition
		// config; for a job it is rejected the same way.
		return 0, Invalid("invalid time limit %q: must be positive", s)
	}
	if secs > MaxTimeLimit {
		return 0, Invalid("invalid time limit %q: more than the maximum %s (use UNLIMITED for no limit)", s, FormatTimeLimit(MaxTimeLimit))
	}
	return secs, nil
}

func atoiField(s string) (int64, error) {
	if s == "" || len(s) > 9 {
		return 0, fmt.Errorf("bad number %q", s)
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("bad number %q", s)
		}
	}
	return strconv.ParseInt(s, 10, 64)
}

// FormatTimeLimit prints a limit the way squeue and scontrol do:
// UNLIMITED, [D-]HH:MM:SS style via FormatElapsed, or N/A when unset.
func FormatTimeLimit(secs int64) string {
	switch {
	case secs == Infinite:
		return "UNLIMITED"
	case secs <= 0:
		return "N/A"
	}
	return FormatElapsed(secs)
}

// FormatElapsed prints a duration as squeue's TIME column does:
// M:SS under an hour, H:MM:SS under a day, D-HH:MM:SS beyond.
func FormatElapsed(secs int64) string {
	if secs < 0 {
		secs = 0
	}
	d, h, m, s := secs/86400, secs/3600%24, secs/60%60, secs%60
	switch {
	case d > 0:
		return fmt.Sprintf("%d-%02d:%02d:%02d", d, h, m, s)
	case h > 0:
		return fmt.Sprintf("%d:%02d:%02d", h, m, s)
	default:
		return fmt.Sprintf("%d:%02d", m, s)
	}
}

// FormatElapsedLong prints HH:MM:SS (D-HH:MM:SS beyond a day), as sacct's
// Elapsed column and scontrol's RunTime do.
func FormatElapsedLong(secs int64) string {
	if secs < 0 {
		secs = 0
	}
	d, h, m, s := secs/86400, secs/3600%24, secs/60%60, secs%60
	if d > 0 {
		return fmt.Sprintf("%d-%02d:%02d:%02d", d, h, m, s)
	}
	return fmt.Sprintf("%02d:%02d:%02d", h, m, s)
}
