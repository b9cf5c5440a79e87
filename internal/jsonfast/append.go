package jsonfast

import (
	"cmp"
	"encoding/json"
	"math"
	"reflect"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"
)

// The writers below produce what encoding/json's default encoder
// (json.Marshal) writes for one value; the encoders internal/wiregen
// generates are made of them.

const hexDigits = "0123456789abcdef"

// escapeASCII marks the ASCII bytes that encoding/json escapes: control
// bytes, quote, backslash and the HTML-sensitive < > &.
var escapeASCII = [utf8.RuneSelf]bool{
	0x00: true, 0x01: true, 0x02: true, 0x03: true, 0x04: true, 0x05: true, 0x06: true, 0x07: true,
	0x08: true, 0x09: true, 0x0a: true, 0x0b: true, 0x0c: true, 0x0d: true, 0x0e: true, 0x0f: true,
	0x10: true, 0x11: true, 0x12: true, 0x13: true, 0x14: true, 0x15: true, 0x16: true, 0x17: true,
	0x18: true, 0x19: true, 0x1a: true, 0x1b: true, 0x1c: true, 0x1d: true, 0x1e: true, 0x1f: true,
	'"': true, '\\': true, '<': true, '>': true, '&': true,
}

// AppendString quotes s as encoding/json does by default: \" \\ \b \f
// \n \r \t in short form, other control bytes and the HTML-sensitive
// < > & as \u00XX, U+2028 and U+2029 as \u202X (they end lines in
// JavaScript), and each byte of invalid UTF-8 as \ufffd. DEL and all
// other valid UTF-8 pass through. (Built with GOEXPERIMENT=jsonv2,
// json.Marshal writes invalid UTF-8 as a raw U+FFFD instead; the
// generated codecs' tests compare with the default encoding/json.)
func AppendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if !escapeASCII[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// AppendTime writes t as time.Time.MarshalJSON does. RFC 3339 needs no
// escaping, so AppendText's output only needs quotes. It fails where
// json.Marshal does (a year outside [0,9999], a zone offset of a day or
// more), returning b as it was and the *json.MarshalerError json.Marshal
// returns.
func AppendTime(b []byte, t time.Time) ([]byte, error) {
	out, err := t.AppendText(append(b, '"'))
	if err != nil {
		_, err = t.MarshalJSON() // its wording, which json.Marshal wraps
		return b, &json.MarshalerError{Type: reflect.TypeFor[time.Time](), Err: err}
	}
	return append(out, '"'), nil
}

// AppendTimePtr is AppendTime for a time reached through a pointer,
// whose error json.Marshal reports for type *time.Time.
func AppendTimePtr(b []byte, t *time.Time) ([]byte, error) {
	out, err := AppendTime(b, *t)
	if me, ok := err.(*json.MarshalerError); ok {
		me.Type = reflect.TypeFor[*time.Time]()
	}
	return out, err
}

// AppendFloat writes a float64 as encoding/json does: the shortest
// decimal that reads back as f, in exponent form only below 1e-6 or from
// 1e21 up, with an exponent of one digit not padded to two. NaN and the
// infinities fail with the *json.UnsupportedValueError json.Marshal
// returns, b as it was.
func AppendFloat(b []byte, f float64) ([]byte, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return b, &json.UnsupportedValueError{Value: reflect.ValueOf(f), Str: strconv.FormatFloat(f, 'g', -1, 64)}
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, nil
}

// Signed and Unsigned are the integer types of map keys.
type (
	Signed interface {
		~int | ~int8 | ~int16 | ~int32 | ~int64
	}
	Unsigned interface {
		~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~uintptr
	}
)

// StringKeys returns m's keys in the order encoding/json writes them.
func StringKeys[M ~map[K]V, K ~string, V any](m M) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// IntKeys returns m's keys in the order encoding/json writes them: by
// their decimal strings, so 10 comes before 9.
func IntKeys[M ~map[K]V, K Signed, V any](m M) []K {
	return keysByText(m, func(k K) string { return strconv.FormatInt(int64(k), 10) })
}

// UintKeys is IntKeys for unsigned keys.
func UintKeys[M ~map[K]V, K Unsigned, V any](m M) []K {
	return keysByText(m, func(k K) string { return strconv.FormatUint(uint64(k), 10) })
}

func keysByText[M ~map[K]V, K comparable, V any](m M, text func(K) string) []K {
	type entry struct {
		key  K
		text string
	}
	es := make([]entry, 0, len(m))
	for k := range m {
		es = append(es, entry{k, text(k)})
	}
	slices.SortFunc(es, func(x, y entry) int { return cmp.Compare(x.text, y.text) })
	keys := make([]K, len(es))
	for i, e := range es {
		keys[i] = e.key
	}
	return keys
}
