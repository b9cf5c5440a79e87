// Package jsonfast reads and writes, without reflection, JSON as
// encoding/json writes it, for the few documents Tide encodes or
// decodes on every job (a submission, a sync, a launch plan):
// encoding/json's reflection was a tenth of the controller's and the
// supervisor's CPU for short jobs. It is the runtime of the codecs
// internal/wiregen generates from struct definitions, and of the few
// readers still written by hand.
//
// A Decoder only knows the common shapes; any surprise makes its
// methods report false, and the caller then decodes the whole document
// with encoding/json (Decode), whose result and error messages are the
// reference. The writers (AppendString, AppendTime, AppendFloat, the
// map key orders) produce json.Marshal's bytes and errors. Callers test
// both equivalences.
package jsonfast

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"time"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// Mode is how encoding/json reads a document, for Decode's fallback.
type Mode int

const (
	// Stream is a json.Decoder's first value: trailing data is left.
	Stream Mode = iota
	// StreamStrict is Stream with DisallowUnknownFields.
	StreamStrict
	// Whole is json.Unmarshal: one value and nothing after it.
	Whole
)

// Decode reads data into *dst as encoding/json in mode m does: by hand
// when read takes the document (and, for Whole, nothing follows it),
// otherwise with encoding/json from the start, *dst zeroed first, for
// its exact result and error.
func Decode[T any](data []byte, dst *T, m Mode, read func(d *Decoder, out *T) bool) error {
	d := New(data)
	var out T
	if read(d, &out) && (m != Whole || d.End()) {
		*dst = out
		return nil
	}
	return Fallback(data, dst, m)
}

// Fallback decodes data into *dst, zeroed first, with encoding/json in
// mode m: what Decode does when the reader gives up. (The generated
// decoders call their reader directly, which keeps the decoder and the
// value off the heap, and this when it gives up.)
func Fallback[T any](data []byte, dst *T, m Mode) error {
	var zero T
	*dst = zero
	if m == Whole {
		return json.Unmarshal(data, dst)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if m == StreamStrict {
		dec.DisallowUnknownFields()
	}
	return dec.Decode(dst)
}

// New returns a Decoder over b.
func New(b []byte) *Decoder { return &Decoder{b: b} }

// Decoder reads the JSON encoding/json's encoder writes; each
// method reports false where it meets anything else, and the caller
// then gives up.
type Decoder struct {
	b []byte
	i int
}

func (d *Decoder) ws() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// next skips white space and consumes c if it comes next.
func (d *Decoder) next(c byte) bool {
	d.ws()
	if d.i < len(d.b) && d.b[d.i] == c {
		d.i++
		return true
	}
	return false
}

// Object reads an object, calling field for each key (its bytes are
// only valid during the call) with the decoder before the value; field
// reads the value, or reports false for a key it does not know.
func (d *Decoder) Object(field func(key []byte) bool) bool {
	if !d.next('{') {
		return false
	}
	if d.next('}') {
		return true
	}
	for {
		d.ws()
		key, ok := d.plainString()
		if !ok || !d.next(':') || !field(key) {
			return false
		}
		if d.next(',') {
			continue
		}
		return d.next('}')
	}
}

// plainString reads a string without escapes that is valid UTF-8 and
// returns its bytes (aliasing the input).
func (d *Decoder) plainString() ([]byte, bool) {
	if d.i >= len(d.b) || d.b[d.i] != '"' {
		return nil, false
	}
	start := d.i + 1
	for j := start; j < len(d.b); j++ {
		c := d.b[j]
		switch {
		case c == '"':
			s := d.b[start:j]
			if !utf8.Valid(s) {
				return nil, false
			}
			d.i = j + 1
			return s, true
		case c == '\\' || c < 0x20:
			return nil, false
		}
	}
	return nil, false
}

// String reads a string value, unescaping as encoding/json does (a lone
// surrogate becomes U+FFFD); one with invalid UTF-8 is left to
// encoding/json, which replaces what is invalid.
func (d *Decoder) String(dst *string) bool {
	d.ws()
	if s, ok := d.plainString(); ok {
		*dst = string(s)
		return true
	}
	if d.i >= len(d.b) || d.b[d.i] != '"' {
		return false
	}
	out := make([]byte, 0, 64)
	j := d.i + 1
	for j < len(d.b) {
		c := d.b[j]
		switch {
		case c == '"':
			if !utf8.Valid(out) {
				return d.strByJSON(dst, j+1)
			}
			*dst, d.i = string(out), j+1
			return true
		case c < 0x20:
			return false
		case c != '\\':
			out = append(out, c)
			j++
			continue
		}
		if j+1 >= len(d.b) {
			return false
		}
		switch e := d.b[j+1]; e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r := hex4(d.b[j+2:])
			if r < 0 {
				return false
			}
			j += 6
			if utf16.IsSurrogate(r) {
				if j+1 < len(d.b) && d.b[j] == '\\' && d.b[j+1] == 'u' {
					if r2 := hex4(d.b[j+2:]); r2 >= 0 {
						if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
							out = utf8.AppendRune(out, dec)
							j += 6
							continue
						}
					}
				}
				r = utf8.RuneError
			}
			out = utf8.AppendRune(out, r)
			continue
		default:
			return false
		}
		j += 2
	}
	return false
}

// strByJSON decodes the string from d.i to end with encoding/json.
func (d *Decoder) strByJSON(dst *string, end int) bool {
	var s string
	if json.Unmarshal(d.b[d.i:end], &s) != nil {
		return false
	}
	*dst, d.i = s, end
	return true
}

// hex4 is the value of four hex digits at the start of b, or -1.
func hex4(b []byte) rune {
	if len(b) < 4 {
		return -1
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

// Strings reads an array of strings ([] gives an empty, non-nil slice,
// as encoding/json does).
func (d *Decoder) Strings(dst *[]string) bool {
	out := []string{}
	if !d.Array(func() bool {
		var v string
		ok := d.String(&v)
		out = append(out, v)
		return ok
	}) {
		return false
	}
	*dst = out
	return true
}

// Array reads an array, calling elem to read each element (it reads
// nothing for []; a caller that must tell [] from an absent key, as
// encoding/json's empty non-nil slice does, makes its slice first).
func (d *Decoder) Array(elem func() bool) bool {
	if !d.next('[') {
		return false
	}
	if d.next(']') {
		return true
	}
	for {
		if !elem() {
			return false
		}
		if d.next(',') {
			continue
		}
		return d.next(']')
	}
}

// number returns an integer's digits (with its sign), refusing
// fractions, exponents and leading zeros.
func (d *Decoder) number() ([]byte, bool) {
	d.ws()
	start := d.i
	j := start
	if j < len(d.b) && d.b[j] == '-' {
		j++
	}
	digits := j
	for j < len(d.b) && d.b[j] >= '0' && d.b[j] <= '9' {
		j++
	}
	if j == digits || (d.b[digits] == '0' && j-digits > 1) {
		return nil, false
	}
	if j < len(d.b) {
		switch d.b[j] {
		case '.', 'e', 'E':
			return nil, false
		}
	}
	d.i = j
	return d.b[start:j], true
}

// Int reads an integer that fits an int.
func (d *Decoder) Int(dst *int) bool {
	v, ok := d.signed(strconv.IntSize)
	*dst = int(v)
	return ok
}

// Int64 reads an integer that fits an int64.
func (d *Decoder) Int64(dst *int64) bool {
	v, ok := d.signed(64)
	*dst = v
	return ok
}

// Uint32 reads an integer that fits a uint32.
func (d *Decoder) Uint32(dst *uint32) bool {
	v, ok := d.unsigned(32)
	*dst = uint32(v)
	return ok
}

// Uint64 reads an integer that fits a uint64.
func (d *Decoder) Uint64(dst *uint64) bool {
	v, ok := d.unsigned(64)
	*dst = v
	return ok
}

// signed and unsigned read an integer of the given size (0 with false
// otherwise; the caller then gives up, so what it stored is dropped).
func (d *Decoder) signed(bits int) (int64, bool) {
	n, ok := d.number()
	if !ok {
		return 0, false
	}
	neg := n[0] == '-'
	if neg {
		n = n[1:]
	}
	u, ok := parseDigits(n)
	limit := uint64(1) << (bits - 1) // -limit fits, limit does not
	if !ok || u > limit || u == limit && !neg {
		return 0, false
	}
	if neg {
		return -int64(u), true
	}
	return int64(u), true
}

func (d *Decoder) unsigned(bits int) (uint64, bool) {
	n, ok := d.number()
	if !ok || n[0] == '-' { // encoding/json refuses even -0 for unsigned
		return 0, false
	}
	u, ok := parseDigits(n)
	if !ok || bits < 64 && u >= 1<<bits {
		return 0, false
	}
	return u, true
}

// parseDigits is the value of a run of decimal digits, false when it
// overflows 64 bits. (strconv would want a string, and its error the
// input copied.)
func parseDigits(n []byte) (uint64, bool) {
	var u uint64
	for _, c := range n {
		x := uint64(c - '0')
		if u > (math.MaxUint64-x)/10 {
			return 0, false
		}
		u = u*10 + x
	}
	return u, true
}

// Bool reads true or false.
func (d *Decoder) Bool(dst *bool) bool {
	d.ws()
	switch {
	case bytes.HasPrefix(d.b[d.i:], []byte("true")):
		*dst, d.i = true, d.i+4
	case bytes.HasPrefix(d.b[d.i:], []byte("false")):
		*dst, d.i = false, d.i+5
	default:
		return false
	}
	return true
}

// Value hands the next value (an object, array, string or literal) to
// encoding/json, with unknown fields refused when strict (as they are in
// the whole document being read). A null is refused: encoding/json
// leaves the destination alone there, which only the caller's fallback
// gets right.
func (d *Decoder) Value(dst any, strict bool) bool {
	d.ws()
	end, ok := d.valueEnd(d.i, 0)
	if !ok {
		return false
	}
	if bytes.Equal(d.b[d.i:end], []byte("null")) {
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(d.b[d.i:end]))
	if strict {
		dec.DisallowUnknownFields()
	}
	if dec.Decode(dst) != nil {
		return false
	}
	d.i = end
	return true
}

// Uint32s reads an array of integers that fit a uint32.
func (d *Decoder) Uint32s(dst *[]uint32) bool {
	out := []uint32{}
	if !d.Array(func() bool {
		var v uint32
		ok := d.Uint32(&v)
		out = append(out, v)
		return ok
	}) {
		return false
	}
	*dst = out
	return true
}

// End reports whether only white space is left (json.Unmarshal refuses
// anything after the value; a json.Decoder does not look).
func (d *Decoder) End() bool {
	d.ws()
	return d.i == len(d.b)
}

// valueEnd finds where the value at i ends, without validating it
// (encoding/json does); depth bounds nesting.
func (d *Decoder) valueEnd(i, depth int) (int, bool) {
	if i >= len(d.b) || depth > 32 {
		return 0, false
	}
	switch d.b[i] {
	case '"':
		for j := i + 1; j < len(d.b); j++ {
			switch d.b[j] {
			case '\\':
				j++
			case '"':
				return j + 1, true
			}
		}
		return 0, false
	case '{', '[':
		for j := i + 1; j < len(d.b); {
			switch d.b[j] {
			case '}', ']':
				return j + 1, true
			case '"', '{', '[':
				end, ok := d.valueEnd(j, depth+1)
				if !ok {
					return 0, false
				}
				j = end
			default:
				j++
			}
		}
		return 0, false
	default:
		j := i
		for j < len(d.b) {
			switch d.b[j] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return j, j > i
			}
			j++
		}
		return j, j > i
	}
}

// Ints reads an array of integers that fit an int.
func (d *Decoder) Ints(dst *[]int) bool {
	out := []int{}
	if !d.Array(func() bool {
		var v int
		ok := d.Int(&v)
		out = append(out, v)
		return ok
	}) {
		return false
	}
	*dst = out
	return true
}

// Float64 reads a number as encoding/json reads one into a float64
// (strconv.ParseFloat of its text), refusing one out of range, where
// encoding/json reports an error.
func (d *Decoder) Float64(dst *float64) bool {
	d.ws()
	j := d.i
	if j < len(d.b) && d.b[j] == '-' {
		j++
	}
	switch {
	case j < len(d.b) && d.b[j] == '0':
		j++
	case j < len(d.b) && d.b[j] >= '1' && d.b[j] <= '9':
		j = d.digits(j)
	default:
		return false
	}
	if j < len(d.b) && d.b[j] == '.' {
		k := d.digits(j + 1)
		if k == j+1 {
			return false
		}
		j = k
	}
	if j < len(d.b) && (d.b[j] == 'e' || d.b[j] == 'E') {
		j++
		if j < len(d.b) && (d.b[j] == '+' || d.b[j] == '-') {
			j++
		}
		k := d.digits(j)
		if k == j {
			return false
		}
		j = k
	}
	v, err := strconv.ParseFloat(string(d.b[d.i:j]), 64)
	if err != nil {
		return false
	}
	*dst, d.i = v, j
	return true
}

// digits returns the index after the decimal digits from j.
func (d *Decoder) digits(j int) int {
	for j < len(d.b) && d.b[j] >= '0' && d.b[j] <= '9' {
		j++
	}
	return j
}

// Time reads a time as encoding/json does, which hands the string, quotes
// and escapes included, to time.Time.UnmarshalJSON: a string with
// escapes (which that does not unescape) or a time it refuses is left to
// the caller's fallback, for encoding/json's error.
func (d *Decoder) Time(dst *time.Time) bool {
	d.ws()
	start := d.i
	if _, ok := d.plainString(); !ok {
		return false
	}
	if dst.UnmarshalJSON(d.b[start:d.i]) != nil {
		d.i = start
		return false
	}
	return true
}

// Null reads a null if one comes next and reports whether it did; a
// caller that knows what encoding/json makes of a null there (nil, for
// a slice) uses it.
func (d *Decoder) Null() bool {
	d.ws()
	if bytes.HasPrefix(d.b[d.i:], []byte("null")) {
		d.i += 4
		return true
	}
	return false
}

// Slice reads an array into a fresh slice (non-nil, as encoding/json
// makes [] into), elem reading each element into its zero value.
func Slice[S ~[]E, E any](d *Decoder, dst *S, elem func(*E) bool) bool {
	out := S{}
	if !d.Array(func() bool {
		var zero E
		out = append(out, zero)
		return elem(&out[len(out)-1])
	}) {
		return false
	}
	*dst = out
	return true
}

// The Read functions read a value into a defined type over a string,
// bool or number (a JobState, a uint8), as the methods above do for the
// predeclared types.

// ReadString reads a string.
func ReadString[T ~string](d *Decoder, dst *T) bool {
	var s string
	if !d.String(&s) {
		return false
	}
	*dst = T(s)
	return true
}

// ReadBool reads true or false.
func ReadBool[T ~bool](d *Decoder, dst *T) bool {
	var v bool
	if !d.Bool(&v) {
		return false
	}
	*dst = T(v)
	return true
}

// ReadInt reads an integer that fits T.
func ReadInt[T Signed](d *Decoder, dst *T) bool {
	v, ok := d.signed(int(unsafe.Sizeof(*dst)) * 8)
	if !ok {
		return false
	}
	*dst = T(v)
	return true
}

// ReadUint reads an integer that fits T.
func ReadUint[T Unsigned](d *Decoder, dst *T) bool {
	v, ok := d.unsigned(int(unsafe.Sizeof(*dst)) * 8)
	if !ok {
		return false
	}
	*dst = T(v)
	return true
}

// ReadFloat reads a number.
func ReadFloat[T ~float64](d *Decoder, dst *T) bool {
	var v float64
	if !d.Float64(&v) {
		return false
	}
	*dst = T(v)
	return true
}
