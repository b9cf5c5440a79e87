package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
)

// referenceDecode is what the controller did before DecodeSubmitRequest.
func referenceDecode(data []byte) (SubmitRequest, error) {
	var r SubmitRequest
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	err := dec.Decode(&r)
	return r, err
}

// sameRequest compares two decoded requests field by field; the begin
// times (whose zones are fresh pointers in each) by instant and offset.
func sameRequest(a, b SubmitRequest) bool {
	ta, tb := a.Spec.BeginTime, b.Spec.BeginTime
	if !ta.Equal(tb) {
		return false
	}
	if _, oa := ta.Zone(); true {
		if _, ob := tb.Zone(); oa != ob {
			return false
		}
	}
	a.Spec.BeginTime, b.Spec.BeginTime = ta.UTC(), tb.UTC()
	return reflect.DeepEqual(a, b)
}

// checkDecode fails t unless DecodeSubmitRequest and the reference agree
// on data: the same request, or both an error.
func checkDecode(t *testing.T, name string, data []byte) {
	t.Helper()
	want, wantErr := referenceDecode(data)
	var got SubmitRequest
	err := DecodeSubmitRequest(data, &got)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("%s: error %v, reference error %v\ninput: %q", name, err, wantErr, data)
	}
	if err != nil {
		if err.Error() != wantErr.Error() {
			t.Fatalf("%s: error %q, reference %q", name, err, wantErr)
		}
		return
	}
	if !sameRequest(got, want) {
		t.Fatalf("%s: decoded\n%+v\nreference\n%+v\ninput: %q", name, got, want, data)
	}
}

func TestDecodeSubmitRequestMatchesEncodingJSON(t *testing.T) {
	for _, zeroOdds := range []int{0, 3} {
		for seed := range uint64(2000) {
			f := filler{t: t, rng: rand.New(rand.NewPCG(seed, uint64(zeroOdds)+7)), zeroOdds: zeroOdds}
			var r SubmitRequest
			f.fill(reflect.ValueOf(&r).Elem(), "SubmitRequest")
			data, err := r.AppendJSON(nil)
			if err != nil {
				continue // a time RFC 3339 cannot spell: AppendJSON's own test covers it
			}
			checkDecode(t, fmt.Sprintf("seed %d, zero odds %d", seed, zeroOdds), data)
		}
	}
	typical, err := typicalSubmit().AppendJSON(nil)
	if err != nil {
		t.Fatal(err)
	}
	checkDecode(t, "typical", typical)
}

// submitEdgeCases are inputs the fast path must hand to encoding/json
// or read exactly as it does.
var submitEdgeCases = []string{
	``, ` `, `null`, `{}`, `[]`, `"x"`, `{"spec":{}}`, ` { "spec" : { "name" : "a" } , "test_only" : true } `,
	`{"spec":null}`, `{"spec":{"name":null}}`, `{"spec":{"nodes":null}}`, `{"spec":{"signal":null}}`,
	`{"Spec":{"Name":"a"}}`, `{"spec":{"NAME":"a","name":"b"}}`, `{"spec":{"unknown":1}}`, `{"other":1}`,
	`{"spec":{"nodes":1e3}}`, `{"spec":{"nodes":1.0}}`, `{"spec":{"nodes":01}}`, `{"spec":{"nodes":-0}}`,
	`{"spec":{"nodes":9223372036854775807}}`, `{"spec":{"nodes":9223372036854775808}}`,
	`{"spec":{"priority":4294967295}}`, `{"spec":{"priority":4294967296}}`, `{"spec":{"priority":-1}}`,
	`{"spec":{"nodes":"1"}}`, `{"spec":{"hold":1}}`, `{"spec":{"hold":tru}}`, `{"spec":{"hold":truex}}`,
	`{"spec":{"name":"a\"b\\c\u00e9\ud83d\ude00\ud800"}}`, `{"spec":{"name":"<&>"}}`, "{\"spec\":{\"name\":\"\xff\xfe\"}}",
	"{\"spec\":{\"name\":\"tab\there\"}}", `{"spec":{"name":"\x"}}`, `{"spec":{"environment":[]}}`,
	`{"spec":{"environment":["A=1","B=\n2"],"environment":["C"]}}`, `{"spec":{"environment":["A",]}}`,
	`{"spec":{"environment":[1]}}`, `{"spec":{"script_args":["a","b"]}}`,
	`{"spec":{"signal":{"signal":10,"seconds":60}}}`, `{"spec":{"signal":{"signal":10,"seconds":60},"signal":{"signal":12}}}`,
	`{"spec":{"signal":{"signal":10,"extra":1}}}`, `{"spec":{"signal":{"Signal":10}}}`,
	`{"spec":{"requeue":false}}`, `{"spec":{"requeue":true,"requeue":false}}`,
	`{"spec":{"begin_time":"2026-11-30T12:00:00+01:00"}}`, `{"spec":{"begin_time":"yesterday"}}`,
	`{"spec":{"begin_time":"0001-01-01T00:00:00Z"}}`,
	`{"spec":{"container_mounts":[{"source":"/a","destination":"/b","read_only":true}]}}`,
	`{"spec":{"container_mounts":[{"source":"/a","destination":"/b","read_only":true}],"container_mounts":[{"source":"/c","destination":"/d"}]}}`,
	`{"spec":{"container_mounts":[{"source":"/a","bad":1}]}}`, `{"spec":{"container_mounts":[{"source":"/a]"}]}}`,
	`{"spec":{"name":"a"}} trailing`, `{"spec":{"name":"a"}}{"spec":{}}`, "\ufeff{}", `{"spec":{"name":"a"`,
	`{"spec":{"name":"a"},}`, `{"spec":{"name":"a",}}`, `{"spec" {"name":"a"}}`, `{"test_only":true,"test_only":false}`,
	`{"spec":{"array":"0-9%2","dependency":"afterok:1","mail_type":"END","open_mode":"append","gpu_type":"a100"}}`,
}

func TestDecodeSubmitRequestEdgeCases(t *testing.T) {
	for i, in := range submitEdgeCases {
		checkDecode(t, fmt.Sprintf("case %d", i), []byte(in))
	}
}

func FuzzDecodeSubmitRequest(f *testing.F) {
	for _, in := range submitEdgeCases {
		f.Add([]byte(in))
	}
	if typical, err := typicalSubmit().AppendJSON(nil); err == nil {
		f.Add(typical)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkDecode(t, "fuzz", data)
	})
}

func BenchmarkDecodeSubmitRequest(b *testing.B) {
	data, err := typicalSubmit().AppendJSON(nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("fast", func(b *testing.B) {
		for b.Loop() {
			var r SubmitRequest
			if err := DecodeSubmitRequest(data, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		for b.Loop() {
			if _, err := referenceDecode(data); err != nil {
				b.Fatal(err)
			}
		}
	})
}
