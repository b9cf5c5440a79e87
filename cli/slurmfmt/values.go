package slurmfmt

import (
	"strconv"
	"strings"
	"time"
)

// YearSeconds is the longest duration AppendSecs prints; Slurm prints
// INVALID beyond it (and for negative durations).
const YearSeconds = 365 * 24 * 3600

// TimestampLayout is Slurm's default time format ("2026-11-29T19:31:05").
const TimestampLayout = "2006-01-02T15:04:05"

// DateLayout is the C ctime() layout of the date line that squeue -l and
// sinfo -l print first ("Sun Nov 29 19:31:17 2026").
const DateLayout = "Mon Jan _2 15:04:05 2006"

// Null is what Slurm prints for an unset string field.
const Null = "(null)"

// AppendSecs appends a duration as squeue's TIME columns print it: M:SS
// under an hour, H:MM:SS under a day, D-HH:MM:SS beyond, and INVALID when
// negative or longer than a year.
func AppendSecs(dst []byte, secs int64) []byte {
	if secs < 0 || secs > YearSeconds {
		return append(dst, "INVALID"...)
	}
	return appendDHMS(dst, secs)
}

// AppendLimit appends a time limit in seconds the way sinfo prints one:
// "infinite" for api.Infinite or an unset (zero) limit, else AppendSecs'
// form without the one-year cap.
func AppendLimit(dst []byte, secs int64) []byte {
	if secs <= 0 {
		return append(dst, "infinite"...)
	}
	return appendDHMS(dst, secs)
}

// appendDHMS appends secs (non-negative) as D-HH:MM:SS, H:MM:SS or M:SS.
func appendDHMS(dst []byte, secs int64) []byte {
	d, h, m, s := secs/86400, secs/3600%24, secs/60%60, secs%60
	switch {
	case d > 0:
		dst = strconv.AppendInt(dst, d, 10)
		dst = append(dst, '-')
		dst = append2(dst, h)
		dst = append(dst, ':')
	case h > 0:
		dst = strconv.AppendInt(dst, h, 10)
		dst = append(dst, ':')
	default:
		dst = strconv.AppendInt(dst, m, 10)
		dst = append(dst, ':')
		return append2(dst, s)
	}
	dst = append2(dst, m)
	dst = append(dst, ':')
	return append2(dst, s)
}

func append2(dst []byte, n int64) []byte {
	return append(dst, byte('0'+n/10), byte('0'+n%10))
}

// AppendTimestamp appends t in loc as 2006-01-02T15:04:05, or "N/A" when
// t is zero (Slurm's _print_time).
func AppendTimestamp(dst []byte, t time.Time, loc *time.Location) []byte {
	if t.IsZero() {
		return append(dst, "N/A"...)
	}
	return t.In(loc).AppendFormat(dst, TimestampLayout)
}

// AppendMB appends a memory size given in MiB the way Slurm's TRES
// strings print it: whole tebi- or gibibytes with T or G, else M
// ("4000M", "32G").
func AppendMB(dst []byte, mb int64) []byte {
	switch {
	case mb > 0 && mb%(1024*1024) == 0:
		return append(strconv.AppendInt(dst, mb/(1024*1024), 10), 'T')
	case mb > 0 && mb%1024 == 0:
		return append(strconv.AppendInt(dst, mb/1024, 10), 'G')
	}
	return append(strconv.AppendInt(dst, mb, 10), 'M')
}

// AppendRanges appends sorted integers as Slurm prints GPU indices and
// CPU ids: runs collapse to "a-b", runs are joined by commas ("0-2,5").
// The input must be sorted ascending; duplicates are printed once.
func AppendRanges(dst []byte, xs []int) []byte {
	for i := 0; i < len(xs); {
		j := i
		for j+1 < len(xs) && (xs[j+1] == xs[j]+1 || xs[j+1] == xs[j]) {
			j++
		}
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendInt(dst, int64(xs[i]), 10)
		if xs[j] != xs[i] {
			dst = append(dst, '-')
			dst = strconv.AppendInt(dst, int64(xs[j]), 10)
		}
		i = j + 1
	}
	return dst
}

// OrNull returns s, or Null when s is empty.
func OrNull(s string) string {
	if s == "" {
		return Null
	}
	return s
}

// slurmOnlyStates are Slurm job states (names and short codes) that
// Tide never reports. Scripts pass them to -t ("squeue -t R,BF"); they are
// accepted and match nothing.
var slurmOnlyStates = []string{
	"BOOT_FAIL", "BF", "DEADLINE", "DL",
	"REQUEUED", "RQ", "REQUEUE_FED", "RF", "REQUEUE_HOLD", "RH", "RESIZING", "RS",
	"REVOKED", "RV", "SIGNALING", "SI", "SPECIAL_EXIT", "SE", "STAGE_OUT", "SO",
	"STOPPED", "ST", "CONFIGURING", "CF", "RESV_DEL_HOLD", "RD",
}

// SlurmOnlyJobState reports whether s names a Slurm job state that Tide
// never reports (case-insensitive).
func SlurmOnlyJobState(s string) bool {
	for _, x := range slurmOnlyStates {
		if strings.EqualFold(s, x) {
			return true
		}
	}
	return false
}
