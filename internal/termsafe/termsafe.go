package termsafe

import "unicode/utf8"

const hexDigits = "0123456789abcdef"

// IsSafe reports whether s prints as it is: Escape(s) == s.
func IsSafe(s string) bool { return isSafe(s) }

// IsSafeBytes is IsSafe for a byte slice.
func IsSafeBytes(s []byte) bool { return isSafe(s) }

// Escape returns s with everything that could act on a terminal
// escaped (see the package comment). It returns s itself, without
// allocating, when there is nothing to escape.
func Escape(s string) string {
	if isSafe(s) {
		return s
	}
	return string(appendEscaped(make([]byte, 0, len(s)+16), s))
}

// Append appends s to dst, escaped as Escape does, and returns the
// extended slice.
func Append(dst []byte, s string) []byte { return appendEscaped(dst, s) }

// AppendBytes is Append for a byte slice. s must not overlap the part
// of dst that Append writes (dst[len(dst):cap(dst)]).
func AppendBytes(dst, s []byte) []byte { return appendEscaped(dst, s) }

// isSafe reports whether s needs no escaping. Tables call it on every
// cell, so it checks eight bytes at a time for printable ASCII first
// (see plain8), and decodes only what is not.
func isSafe[S ~string | ~[]byte](s S) bool {
	i := 0
	for ; i+8 <= len(s); i += 8 {
		b := s[i : i+8]
		w := uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
			uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
		if !plain8(w) {
			break
		}
	}
	for i < len(s) {
		c := s[i]
		if c-0x20 < 0x5f { // 0x20 <= c < 0x7f
			i++
			continue
		}
		if c < 0x80 {
			return false // C0 or DEL
		}
		r, n := decode(s[i:])
		if n == 1 || escapedRune(r) {
			return false // invalid UTF-8, C1 or bidi
		}
		i += n
	}
	return true
}

// plain8 reports whether all eight bytes of w are printable ASCII
// (0x20-0x7e): none is below 0x20 and none above 0x7e, tested with the
// "hasless" and "hasmore" word tricks (exact as a yes/no answer).
func plain8(w uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	less := (w - 0x20*ones) & ^w & highs
	more := ((w + 1*ones) | w) & highs
	return less|more == 0
}

func appendEscaped[S ~string | ~[]byte](dst []byte, s S) []byte {
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c < 0x7f {
			// Copy the run of plain ASCII at once.
			j := i + 1
			for j < len(s) && s[j] >= 0x20 && s[j] < 0x7f {
				j++
			}
			dst = append(dst, s[i:j]...)
			i = j
			continue
		}
		if c < 0x80 {
			dst = appendControl(dst, c)
			i++
			continue
		}
		r, n := decode(s[i:])
		switch {
		case n == 1:
			// An invalid byte (RuneError decoded from more bytes is a
			// real U+FFFD and prints as it is).
			dst = appendHex(dst, c)
		case escapedRune(r):
			dst = appendU(dst, r)
		default:
			dst = append(dst, s[i:i+n]...)
		}
		i += n
	}
	return dst
}

// decode decodes the first rune of s, string or bytes alike; n is 1 for
// an invalid byte.
func decode[S ~string | ~[]byte](s S) (r rune, n int) {
	var buf [utf8.UTFMax]byte
	return utf8.DecodeRune(buf[:copy(buf[:], s)])
}

// escapedRune reports whether a valid non-ASCII rune must be escaped:
// a C1 control (an ESC sequence in one code point, such as U+009B CSI)
// or a bidi embedding, override or isolate.
func escapedRune(r rune) bool {
	return r >= 0x80 && r <= 0x9f ||
		r >= 0x202a && r <= 0x202e ||
		r >= 0x2066 && r <= 0x2069
}

// appendControl appends a C0 control or DEL: the common layout controls
// by name, the others in hex.
func appendControl(dst []byte, c byte) []byte {
	switch c {
	case '\n':
		return append(dst, `\n`...)
	case '\r':
		return append(dst, `\r`...)
	case '\t':
		return append(dst, `\t`...)
	}
	return appendHex(dst, c)
}

func appendHex(dst []byte, c byte) []byte {
	return append(dst, '\\', 'x', hexDigits[c>>4], hexDigits[c&0xf])
}

// appendU appends \uXXXX for a rune of the Basic Multilingual Plane.
func appendU(dst []byte, r rune) []byte {
	return append(dst, '\\', 'u',
		hexDigits[r>>12&0xf], hexDigits[r>>8&0xf], hexDigits[r>>4&0xf], hexDigits[r&0xf])
}

// EscapeJSON makes encoded JSON safe to print: it rewrites DEL, the C1
// controls and the bidi overrides and isolates, which encoding/json
// leaves raw inside strings, as \u escapes. The document decodes to
// exactly the same values. b must be valid UTF-8, as encoding/json's
// output is; EscapeJSON returns b itself when there is nothing to
// rewrite.
func EscapeJSON(b []byte) []byte {
	var out []byte
	last := 0 // b[last:i] is not yet copied to out
	for i := 0; i < len(b); {
		c := b[i]
		if c != 0x7f && c != 0xc2 && c != 0xe2 {
			i++
			continue
		}
		r, n := rune(c), 1
		if c != 0x7f {
			r, n = utf8.DecodeRune(b[i:])
			if !escapedRune(r) {
				i += n
				continue
			}
		}
		if out == nil {
			out = make([]byte, 0, len(b)+32)
		}
		out = appendU(append(out, b[last:i]...), r)
		i += n
		last = i
	}
	if out == nil {
		return b
	}
	return append(out, b[last:]...)
}
