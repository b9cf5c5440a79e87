package sample

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tide-hpc/tide/internal/jsonfast"
	"github.com/tide-hpc/tide/internal/wiregen"
)

func TestGeneratedCodeIsCurrent(t *testing.T) {
	if err := wiregen.CheckDirective("."); err != nil {
		t.Fatal(err)
	}
}

// filler sets every exported field of a value to pseudo-random values,
// the zero value about once in zeroOdds (never with 0), and with bad
// odds a value json.Marshal refuses (NaN, a year RFC 3339 cannot
// spell).
type filler struct {
	rng      *rand.Rand
	zeroOdds int
	bad      bool
}

var pieces = []string{
	"a", "job-42", "<script>", "a&b", `"q"`, `back\slash`, "\x7f", "\u2028", "\u2029", "é", "日本語", "😀",
	"\x80", "\xff", "\xed\xa0\x80", "\x00", "\n", "\t", "\x1f",
}

var floats = []float64{0.5, -2.25, 0.1 + 0.2, 1e-6, 9.99e-7, 1e-7, 1.5e-100, 1e20, 1e21, 1.5e300,
	5e-324, math.MaxFloat64, -math.MaxFloat64, 100, 1.0 / 3, math.Copysign(0, -1)}

func (f *filler) fill(v reflect.Value) {
	if f.zeroOdds > 0 && f.rng.IntN(f.zeroOdds) == 0 {
		v.SetZero()
		return
	}
	switch v.Kind() {
	case reflect.String:
		var sb strings.Builder
		for range 1 + f.rng.IntN(4) {
			sb.WriteString(pieces[f.rng.IntN(len(pieces))])
		}
		v.SetString(sb.String())
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		bits := v.Type().Bits()
		lo, hi := int64(-1)<<(bits-1), int64(uint64(1)<<(bits-1)-1)
		v.SetInt([]int64{1, -1, 42, lo, hi, int64(f.rng.Uint64())>>(64-bits) | 1}[f.rng.IntN(6)])
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		hi := uint64(math.MaxUint64) >> (64 - v.Type().Bits())
		v.SetUint([]uint64{1, 10, hi, f.rng.Uint64()>>(64-v.Type().Bits()) | 1}[f.rng.IntN(4)])
	case reflect.Float64:
		x := floats[f.rng.IntN(len(floats))]
		if f.bad && f.rng.IntN(20) == 0 {
			x = []float64{math.NaN(), math.Inf(1), math.Inf(-1)}[f.rng.IntN(3)]
		}
		v.SetFloat(x)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		f.fill(v.Elem())
	case reflect.Slice:
		n := f.rng.IntN(4) // 0: an empty slice, not nil
		v.Set(reflect.MakeSlice(v.Type(), n, n))
		for i := range n {
			f.fill(v.Index(i))
		}
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		for range f.rng.IntN(4) {
			k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
			f.fill(k)
			f.fill(e)
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(f.time()))
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				f.fill(v.Field(i))
			}
		}
	default:
		panic("no filler for " + v.Type().String())
	}
}

func (f *filler) time() time.Time {
	year := []int{1, 1970, 2026, 9999, f.rng.IntN(10000)}[f.rng.IntN(5)]
	if f.bad && f.rng.IntN(20) == 0 {
		year = []int{-1, 10000}[f.rng.IntN(2)]
	}
	zones := []*time.Location{time.UTC, time.FixedZone("CET", 3600), time.FixedZone("", -8*3600),
		time.FixedZone("odd", -(3*3600 + 20*60 + 15))}
	return time.Date(year, time.Month(1+f.rng.IntN(12)), 1+f.rng.IntN(28), f.rng.IntN(24), f.rng.IntN(60),
		f.rng.IntN(60), []int{0, 1, 500_000_000, f.rng.IntN(1e9)}[f.rng.IntN(4)], zones[f.rng.IntN(len(zones))])
}

// TestAllMatchesEncodingJSON holds the generated codec of a struct with
// every kind and option to encoding/json: the same bytes or the same
// error, and, on what it wrote, the reader taking it by hand and reading
// what encoding/json reads.
func TestAllMatchesEncodingJSON(t *testing.T) {
	for _, zeroOdds := range []int{0, 2, 5} {
		for seed := range uint64(1500) {
			name := fmt.Sprintf("seed %d, zero odds %d", seed, zeroOdds)
			f := filler{rng: rand.New(rand.NewPCG(seed, uint64(zeroOdds))), zeroOdds: zeroOdds, bad: seed%3 == 0}
			var v All
			f.fill(reflect.ValueOf(&v).Elem())
			want, wantErr := json.Marshal(&v)
			prefix := []byte("prefix:")
			got, err := v.AppendJSON(prefix)
			if (err != nil) != (wantErr != nil) || err != nil && err.Error() != wantErr.Error() {
				t.Fatalf("%s: AppendJSON error %v, json.Marshal %v", name, err, wantErr)
			}
			if err != nil {
				if string(got) != string(prefix) {
					t.Fatalf("%s: AppendJSON returned %q on error, want the prefix alone", name, got)
				}
				continue
			}
			if got := got[len(prefix):]; !bytes.Equal(got, want) {
				t.Fatalf("%s: AppendJSON differs from json.Marshal\n got: %s\nwant: %s", name, got, want)
			}
			d := jsonfast.New(want)
			var byHand All
			if !readJSONAll(d, &byHand) || !d.End() {
				t.Fatalf("%s: the reader refused what the encoder wrote:\n%s", name, want)
			}
			checkDecode(t, name, want, decodeJSONAll, unmarshal)
		}
	}
}

func unmarshal[T any](data []byte, v *T) error { return json.Unmarshal(data, v) }

func strict(data []byte, v *Strict) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

func stream(data []byte, v *Empty) error { return json.NewDecoder(bytes.NewReader(data)).Decode(v) }

// checkDecode fails unless decode and ref agree on data: the same value
// (partly decoded ones included) and the same error, or none.
func checkDecode[T any](t *testing.T, name string, data []byte, decode, ref func([]byte, *T) error) {
	t.Helper()
	var got, want T
	err := decode(data, &got)
	wantErr := ref(data, &want)
	if (err != nil) != (wantErr != nil) || err != nil && err.Error() != wantErr.Error() {
		t.Fatalf("%s: error %v, encoding/json %v\ninput: %q", name, err, wantErr, data)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: decoded\n%+v\nencoding/json\n%+v\ninput: %q", name, got, want, data)
	}
}

// oddAll are inputs the encoder never writes: the reader must read them
// as encoding/json does or leave them to it.
var oddAll = []string{
	`{}`, `null`, ``, `[]`, `{"Plain":"a","Plain":"b"}`, `{"plain":"a"}`, `{"id":1}`, `{"Embedded":{"id":1,"note":"n"}}`,
	`{"Embedded":{"id":1},"Embedded":{"note":"n"}}`, `{"Embedded":null}`, `{"name":null}`, `{"-":5}`, `{"Dash":5}`,
	`{"Ignored":1}`, `{"int8":127}`, `{"int8":128}`, `{"int8":-129}`, `{"small":-32768}`, `{"small":32768}`,
	`{"int32":1.5}`, `{"uint16":65536}`, `{"uint16":-1}`, `{"level":255}`, `{"level":256}`, `{"uint":18446744073709551615}`,
	`{"float":1e400}`, `{"float":-0}`, `{"ratio":1E2}`, `{"ratio":"1"}`, `{"flag":true,"flag":false}`, `{"flag":null}`,
	`{"when":"2026-01-01T00:00:00Z"}`, `{"when":null}`, `{"when":"bad"}`, `{"when_omit":"2026-01-01T00:00:00.5+01:00"}`,
	`{"ptr_int":1}`, `{"ptr_int":null}`, `{"ptr_int":1,"ptr_int":null}`, `{"ptr_int":null,"ptr_int":2}`, `{"ptr_int":"x"}`,
	`{"ptr_name":"n"}`, `{"ptr_time":"2026-01-01T00:00:00Z"}`, `{"ptr_time":null}`,
	`{"ptr_inner":{"a":1},"ptr_inner":{"b":"x"}}`, `{"ptr_inner":{"a":1},"ptr_inner":null,"ptr_inner":{"b":"x"}}`,
	`{"ptr_ptr":{"a":1}}`, `{"ptr_ptr":null}`, `{"inner":{"a":1},"inner":{"b":"x"}}`, `{"inner":null}`, `{"inner":{"c":1}}`,
	`{"strings":[]}`, `{"strings":null}`, `{"strings":["a"],"strings":["b","c"]}`, `{"strings":["a",null]}`, `{"strings":[1]}`,
	`{"names":["a\u00e9"]}`, `{"smalls":[1,-1,32767]}`, `{"smalls":[40000]}`, `{"uints":[4294967295]}`, `{"ints":[-1,2]}`,
	`{"inners":[{"a":1},{"b":"x"}]}`, `{"inners":[{"a":1}],"inners":[{"b":"x"}]}`, `{"inners":[],"inners":[{"a":1}]}`,
	`{"inners":null,"inners":[{"a":1}]}`, `{"inners":[null]}`, `{"inner_ptrs":[{"a":1},null]}`, `{"inner_ptrs":[null]}`,
	`{"nested":[[1,2],[],null]}`, `{"nested":[[1]],"nested":[[2]]}`, `{"floats":[1.5,-0.25e-3]}`, `{"times":["2026-01-01T00:00:00Z"]}`,
	`{"times":[null]}`, `{"both":["x"]}`, `{"by_name":{"a":1,"b":2}}`, `{"by_name":{"a":1},"by_name":{"b":2}}`,
	`{"by_name":null}`, `{"by_name":{"a":"x"}}`, `{"by_name_omit":{"k":{"a":1,"zz":2}}}`, `{"by_int":{"-5":"x","10":"y"}}`,
	`{"by_int":{"x":"y"}}`, `{"by_small":{"40000":true}}`, `{"by_uint":{"1":["a"],"2":null}}`, `{"extra":[1],"last":true}`,
	`{"extra":[1],"extra":[2,3]}`, `{"Plain":"a"} trailing`, `{"Plain":"a"}{}`, `{"Plain":"a",}`, `{"Plain" "a"}`,
	`{"Plain":"\ud800"}`, "{\"Plain\":\"\xff\"}", `{"Pl\u0061in":"a"}`, `{"inners":[{"a":1},]}`,
}

var oddStrict = []string{
	`{}`, `{"name":"a"}`, `{"name":"a","x":1}`, `{"inner":{"a":1,"c":2}}`, `{"map":{"k":{"a":1}}}`,
	`{"map":{"k":{"a":1,"zz":2}}}`, `{"map":{"k":{"a":1}},"map":{"j":{"b":"x"}}}`, `{"map":null}`, `{"Name":"a"}`,
}

var oddEmpty = []string{`{}`, `{"x":1}`, `null`, `{} {}`, `[]`, `{`}

func TestDecodeOddInput(t *testing.T) {
	for i, in := range oddAll {
		checkDecode(t, fmt.Sprintf("All case %d", i), []byte(in), decodeJSONAll, unmarshal)
	}
	for i, in := range oddStrict {
		checkDecode(t, fmt.Sprintf("Strict case %d", i), []byte(in), decodeJSONStrict, strict)
	}
	for i, in := range oddEmpty {
		checkDecode(t, fmt.Sprintf("Empty case %d", i), []byte(in), decodeJSONEmpty, stream)
	}
	var e Empty
	if got := e.AppendJSON(nil); string(got) != "{}" {
		t.Errorf("Empty.AppendJSON = %s", got)
	}
}

func FuzzDecodeAll(f *testing.F) {
	for _, in := range oddAll {
		f.Add([]byte(in))
	}
	fl := filler{rng: rand.New(rand.NewPCG(1, 2))}
	var v All
	fl.fill(reflect.ValueOf(&v).Elem())
	if data, err := v.AppendJSON(nil); err == nil {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkDecode(t, "fuzz", data, decodeJSONAll, unmarshal)
	})
}
