package jsonfast

import (
	"encoding/json"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestPrimitives(t *testing.T) {
	cases := []struct {
		in   string
		read func(d *Decoder) (any, bool)
		want any // nil: the read must fail
	}{
		{` "a\"b\u00e9\ud83d\ude00" `, func(d *Decoder) (any, bool) { var s string; ok := d.String(&s); return s, ok }, "a\"bé😀"},
		{`"\ud800x"`, func(d *Decoder) (any, bool) { var s string; ok := d.String(&s); return s, ok }, "\ufffdx"},
		{`"\x"`, func(d *Decoder) (any, bool) { var s string; ok := d.String(&s); return s, ok }, nil},
		{"\"a\tb\"", func(d *Decoder) (any, bool) { var s string; ok := d.String(&s); return s, ok }, nil},
		{"\"\xff\"", func(d *Decoder) (any, bool) { var s string; ok := d.String(&s); return s, ok }, "\ufffd"},
		{`[]`, func(d *Decoder) (any, bool) { var s []string; ok := d.Strings(&s); return s, ok }, []string{}},
		{`[ "a" , "b" ]`, func(d *Decoder) (any, bool) { var s []string; ok := d.Strings(&s); return s, ok }, []string{"a", "b"}},
		{`["a",]`, func(d *Decoder) (any, bool) { var s []string; ok := d.Strings(&s); return s, ok }, nil},
		{`-12`, func(d *Decoder) (any, bool) { var n int64; ok := d.Int64(&n); return n, ok }, int64(-12)},
		{`012`, func(d *Decoder) (any, bool) { var n int64; ok := d.Int64(&n); return n, ok }, nil},
		{`1e2`, func(d *Decoder) (any, bool) { var n int64; ok := d.Int64(&n); return n, ok }, nil},
		{`4294967296`, func(d *Decoder) (any, bool) { var n uint32; ok := d.Uint32(&n); return n, ok }, nil},
		{`4294967295`, func(d *Decoder) (any, bool) { var n uint32; ok := d.Uint32(&n); return n, ok }, uint32(4294967295)},
		{`-9223372036854775808`, func(d *Decoder) (any, bool) { var n int64; ok := d.Int64(&n); return n, ok }, int64(-9223372036854775808)},
		{`9223372036854775807`, func(d *Decoder) (any, bool) { var n int64; ok := d.Int64(&n); return n, ok }, int64(9223372036854775807)},
		{`9223372036854775808`, func(d *Decoder) (any, bool) { var n int64; ok := d.Int64(&n); return n, ok }, nil},
		{`-9223372036854775809`, func(d *Decoder) (any, bool) { var n int64; ok := d.Int64(&n); return n, ok }, nil},
		{`-0`, func(d *Decoder) (any, bool) { var n int64; ok := d.Int64(&n); return n, ok }, int64(0)},
		{`-0`, func(d *Decoder) (any, bool) { var n uint64; ok := d.Uint64(&n); return n, ok }, nil},
		{`18446744073709551615`, func(d *Decoder) (any, bool) { var n uint64; ok := d.Uint64(&n); return n, ok }, uint64(18446744073709551615)},
		{`18446744073709551616`, func(d *Decoder) (any, bool) { var n uint64; ok := d.Uint64(&n); return n, ok }, nil},
		{`99999999999999999999999`, func(d *Decoder) (any, bool) { var n uint64; ok := d.Uint64(&n); return n, ok }, nil},
		{`[1,4294967295]`, func(d *Decoder) (any, bool) { var n []uint32; ok := d.Uint32s(&n); return n, ok }, []uint32{1, 4294967295}},
		{`true`, func(d *Decoder) (any, bool) { var b bool; ok := d.Bool(&b); return b, ok }, true},
		{`nul`, func(d *Decoder) (any, bool) { var b bool; ok := d.Bool(&b); return b, ok }, nil},
		{`null`, func(d *Decoder) (any, bool) { var v map[string]int; ok := d.Value(&v, false); return v, ok }, nil},
		{`{"a":[1,"}"]}`, func(d *Decoder) (any, bool) { var v map[string]any; ok := d.Value(&v, false); return v, ok },
			map[string]any{"a": []any{1.0, "}"}}},
		{`{"x":1}`, func(d *Decoder) (any, bool) { var v struct{ Y int }; ok := d.Value(&v, true); return v, ok }, nil},
	}
	for _, c := range cases {
		got, ok := c.read(New([]byte(c.in)))
		if c.want == nil {
			if ok {
				t.Errorf("%q: read %v, want a refusal", c.in, got)
			}
			continue
		}
		if !ok || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%q: got %#v (%v), want %#v", c.in, got, ok, c.want)
		}
	}
}

func TestObjectAndEnd(t *testing.T) {
	d := New([]byte(` { "a" : 1 , "b" : "x" } `))
	var a int
	var b string
	if !d.Object(func(k []byte) bool {
		switch string(k) {
		case "a":
			return d.Int(&a)
		case "b":
			return d.String(&b)
		}
		return false
	}) || a != 1 || b != "x" || !d.End() {
		t.Fatalf("object: a=%d b=%q end=%v", a, b, d.End())
	}
	if d := New([]byte(`{"a":1} x`)); !d.Object(func([]byte) bool { var n int; return d.Int(&n) }) || d.End() {
		t.Error("trailing data not seen")
	}
	if d := New([]byte(`{"a\u0062":1}`)); d.Object(func([]byte) bool { var n int; return d.Int(&n) }) {
		t.Error("an escaped key was read by hand")
	}
}

// TestWritersMatchEncodingJSON holds the writers to json.Marshal's
// bytes and errors on the values where their rules switch.
func TestWritersMatchEncodingJSON(t *testing.T) {
	check := func(v any, got []byte, err error) {
		t.Helper()
		want, wantErr := json.Marshal(v)
		if (err != nil) != (wantErr != nil) || err != nil && err.Error() != wantErr.Error() {
			t.Errorf("%#v: error %v, json.Marshal %v", v, err, wantErr)
			return
		}
		if err == nil && string(got) != string(want) {
			t.Errorf("%#v: wrote %s, json.Marshal %s", v, got, want)
		}
	}
	for _, s := range []string{"", "plain", `"\`, "<a&b>", "\x00\x1f\x7f\t\n\r\b\f", "\u2028\u2029", "é😀", "\xff\xc3", "\xed\xa0\x80"} {
		check(s, AppendString(nil, s), nil)
	}
	for _, f := range []float64{0, math.Copysign(0, -1), 1, -2.5, 1e-6, 9.99e-7, 1e-7, 1e20, 1e21, 1.5e300, 5e-324,
		math.MaxFloat64, math.NaN(), math.Inf(1), math.Inf(-1)} {
		got, err := AppendFloat(nil, f)
		check(f, got, err)
	}
	for _, tm := range []time.Time{{}, time.Date(2026, 1, 2, 3, 4, 5, 600, time.FixedZone("", -5400)),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("", 24*3600))} {
		got, err := AppendTime(nil, tm)
		check(tm, got, err)
		got, err = AppendTimePtr(nil, &tm)
		check(&tm, got, err)
	}
	ints := map[int]bool{9: true, 10: true, -1: true, -10: true, 100: true, math.MinInt: true}
	var keys []string
	for _, k := range IntKeys(ints) {
		keys = append(keys, strconv.Itoa(k))
	}
	if got, want := strings.Join(keys, ","), "-1,-10,-9223372036854775808,10,100,9"; got != want {
		t.Errorf("IntKeys order %s, want %s", got, want)
	}
	if got := StringKeys(map[string]int{"b": 1, "a": 2, "B": 3}); !reflect.DeepEqual(got, []string{"B", "a", "b"}) {
		t.Errorf("StringKeys order %q", got)
	}
	if got := UintKeys(map[uint8]bool{9: true, 10: true}); !reflect.DeepEqual(got, []uint8{10, 9}) {
		t.Errorf("UintKeys order %v", got)
	}
}

// TestGenericReaders: the Read functions take what fits the defined
// type and refuse what does not.
func TestGenericReaders(t *testing.T) {
	type word string
	type small int8
	type level uint16
	var w word
	if !ReadString(New([]byte(`"a\u00e9"`)), &w) || w != "aé" {
		t.Errorf("ReadString: %q", w)
	}
	var s small
	if !ReadInt(New([]byte(`-128`)), &s) || s != -128 || ReadInt(New([]byte(`128`)), &s) {
		t.Errorf("ReadInt: %d", s)
	}
	var l level
	if !ReadUint(New([]byte(`65535`)), &l) || l != 65535 || ReadUint(New([]byte(`65536`)), &l) || ReadUint(New([]byte(`-1`)), &l) {
		t.Errorf("ReadUint: %d", l)
	}
	var xs []small
	d := New([]byte(`[1, -2]`))
	if !Slice(d, &xs, func(e *small) bool { return ReadInt(d, e) }) || !reflect.DeepEqual(xs, []small{1, -2}) {
		t.Errorf("Slice: %v", xs)
	}
	var empty []word
	if !Slice(New([]byte(`[]`)), &empty, func(*word) bool { return false }) || empty == nil {
		t.Errorf("Slice of []: %#v, want empty and non-nil", empty)
	}
}
