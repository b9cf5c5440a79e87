package api

import (
	"errors"
	"math"
	"testing"
)

// wantInvalid fails unless err is of class ErrInvalidArgument: what a
// parser of user input answers for any input it refuses.
func wantInvalid(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("%s: error %v is not ErrInvalidArgument", what, err)
	}
}

// FuzzParseTimeLimit checks that every limit ParseTimeLimit accepts is
// one a job may carry and survives FormatTimeLimit and a second parse,
// and that every refusal is ErrInvalidArgument.
func FuzzParseTimeLimit(f *testing.F) {
	for _, s := range []string{
		"5", "0:05", "1:00", "1:02:03", "2-3", "2-3:04", "2-3:04:05", "UNLIMITED", "infinite", "-1",
		"", "abc", "1:2:3:4", "1-2:3:4:5", "0", "-5", " 10 ", "0-0", "00:00:00", "1-", "-", "1--2",
		"999999999", "999999999-999999999:999999999:999999999", "1000000000", "36500-0", "36500-0:0:1",
		"52560000", "52560000:1", "9223372036854775807", "+5", "1:+5", "5\x00", "\xff", "1:-1",
		"1_000", "0x10", "1e3", "١", "UNLIMITED\x00",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		secs, err := ParseTimeLimit(s)
		if err != nil {
			wantInvalid(t, "ParseTimeLimit("+s+")", err)
			return
		}
		if secs != Infinite && (secs < 1 || secs > MaxTimeLimit) {
			t.Fatalf("ParseTimeLimit(%q) = %d, outside 1..MaxTimeLimit", s, secs)
		}
		if err := CheckTimeLimit(secs); err != nil {
			t.Fatalf("ParseTimeLimit(%q) = %d, which CheckTimeLimit refuses: %v", s, secs, err)
		}
		shown := FormatTimeLimit(secs)
		back, err := ParseTimeLimit(shown)
		if err != nil || back != secs {
			t.Fatalf("ParseTimeLimit(%q) = %d shown as %q, read back as %d, %v", s, secs, shown, back, err)
		}
	})
}

// FuzzFormatTimeLimit checks that every limit a job may carry prints as
// text ParseTimeLimit reads back exactly, and that the elapsed-time
// formats take any number.
func FuzzFormatTimeLimit(f *testing.F) {
	for _, n := range []int64{0, 1, 59, 60, 3599, 3600, 86399, 86400, 90061, MaxTimeLimit, MaxTimeLimit + 1,
		Infinite, -2, math.MaxInt64, math.MinInt64} {
		f.Add(n)
	}
	f.Fuzz(func(t *testing.T, secs int64) {
		shown := FormatTimeLimit(secs)
		_ = FormatElapsed(secs)
		_ = FormatElapsedLong(secs)
		if CheckTimeLimit(secs) != nil || secs == NoValue {
			return
		}
		back, err := ParseTimeLimit(shown)
		if err != nil || back != secs {
			t.Fatalf("FormatTimeLimit(%d) = %q, read back as %d, %v", secs, shown, back, err)
		}
	})
}
