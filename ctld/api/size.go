package api

import (
	"math"
	"strconv"
	"strings"
)

// ParseMemMB parses a Slurm memory size (--mem, --mem-per-cpu, config
// memory): a number with an optional K, M, G or T suffix (default M),
// returned in megabytes (rounded up), at most MaxMemMB whatever the
// unit, so that FormatMemMB's spelling of any result parses back.
func ParseMemMB(s string) (int64, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, Invalid("empty memory size")
	}
	mult := 1.0
	switch t[len(t)-1] {
	case 'K', 'k':
		mult = 1.0 / 1024
	case 'M', 'm':
	case 'G', 'g':
		mult = 1024
	case 'T', 't':
		mult = 1024 * 1024
	default:
		if t[len(t)-1] < '0' || t[len(t)-1] > '9' {
			return 0, Invalid("invalid memory size %q", s)
		}
		t += "M"
	}
	num := t[:len(t)-1]
	if strings.HasSuffix(strings.ToLower(num), "i") { // tolerate GiB-style "Gi"
		return 0, Invalid("invalid memory size %q", s)
	}
	v, err := strconv.ParseFloat(num, 64)
	mb := v * mult
	// ParseFloat reads "nan" too, which passes every comparison.
	if err != nil || math.IsNaN(v) || v < 0 || mb > MaxMemMB {
		return 0, Invalid("invalid memory size %q", s)
	}
	n := int64(mb)
	if float64(n) < mb {
		n++
	}
	return n, nil
}

// FormatMemMB prints megabytes as Slurm's TRES strings do: 16000M, 1T,
// 512G when exact.
func FormatMemMB(mb int64) string {
	switch {
	case mb > 0 && mb%(1024*1024) == 0:
		return strconv.FormatInt(mb/(1024*1024), 10) + "T"
	case mb > 0 && mb%1024 == 0:
		return strconv.FormatInt(mb/1024, 10) + "G"
	}
	return strconv.FormatInt(mb, 10) + "M"
}
