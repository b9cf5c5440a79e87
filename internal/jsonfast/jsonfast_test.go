package jsonfast

import (
	"reflect"
	"testing"
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
