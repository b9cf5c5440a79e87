package api

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/internal/jsonfast"
	"github.com/tide-hpc/tide/internal/wiregen"
)

// TestGeneratedCodeIsCurrent regenerates wirejson_gen.go from the
// structs as they are and fails if the committed file differs: a field
// added to JobSpec (or any type the codecs reach) without go generate
// would otherwise travel only through the encoding/json fallback.
func TestGeneratedCodeIsCurrent(t *testing.T) {
	if err := wiregen.CheckDirective("."); err != nil {
		t.Fatal(err)
	}
}

// sameTime compares times as JSON carries them: the instant and the
// zone offset (the zone's name and the monotonic reading do not
// travel).
var sameTime = cmp.Comparer(func(a, b time.Time) bool {
	_, oa := a.Zone()
	_, ob := b.Zone()
	return a.Equal(b) && oa == ob
})

// validPieces are the filler's string pieces that are valid UTF-8
// (invalid bytes come back as U+FFFD).
var validPieces = func() []string {
	var out []string
	for _, p := range fillerPieces {
		if utf8.ValidString(p) {
			out = append(out, p)
		}
	}
	return out
}()

// wholeMinuteZones are the filler's zones whose offsets RFC 3339 can
// spell (it drops seconds).
var wholeMinuteZones = func() []*time.Location {
	var out []*time.Location
	for _, z := range fillerZones {
		if _, off := time.Date(2026, 1, 1, 0, 0, 0, 0, z).Zone(); off%60 == 0 {
			out = append(out, z)
		}
	}
	return out
}()

// roundTrip checks one value of a generated type: the generated encoder
// (appendJSON, nil for a type without one) writes json.Marshal's bytes;
// the generated reader takes them by hand, to their end; the decoder
// and encoding/json (ref) read them back into the value written.
func roundTrip[T any](t *testing.T, name string, v *T, appendJSON func([]byte) ([]byte, error),
	read func(*jsonfast.Decoder, *T) bool, decode, ref func([]byte, *T) error) {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		return // a time RFC 3339 cannot spell: the encoders' own tests cover it
	}
	if appendJSON != nil {
		got, err := appendJSON(nil)
		if err != nil || string(got) != string(data) {
			t.Fatalf("%s: AppendJSON wrote %s (%v), json.Marshal %s", name, got, err, data)
		}
	}
	d := jsonfast.New(data)
	var byHand T
	if !read(d, &byHand) || !d.End() {
		t.Fatalf("%s: the generated reader refused what the encoder wrote:\n%s", name, data)
	}
	var got, want T
	if err := decode(data, &got); err != nil {
		t.Fatalf("%s: decode: %v\n%s", name, err, data)
	}
	if err := ref(data, &want); err != nil {
		t.Fatalf("%s: encoding/json: %v\n%s", name, err, data)
	}
	for _, c := range []struct {
		what string
		v    *T
	}{{"encoding/json", &want}, {"the decoder", &got}, {"the reader", &byHand}} {
		if diff := cmp.Diff(v, c.v, sameTime); diff != "" {
			t.Fatalf("%s: %s read back another value (-written +read):\n%s\n%s", name, c.what, diff, data)
		}
	}
}

func unmarshal[T any](data []byte, v *T) error { return json.Unmarshal(data, v) }

// TestWireRoundTrip: random values of every generated type, every field
// set and then about a third left zero, travel through the generated
// codecs and encoding/json alike and come back as they were written.
// Their strings are valid UTF-8 and their zones whole minutes, which
// JSON carries unchanged.
func TestWireRoundTrip(t *testing.T) {
	for _, zeroOdds := range []int{0, 3} {
		for seed := range uint64(500) {
			name := fmt.Sprintf("seed %d, zero odds %d", seed, zeroOdds)
			f := filler{t: t, rng: rand.New(rand.NewPCG(seed, uint64(zeroOdds)+23)), zeroOdds: zeroOdds,
				pieces: validPieces, zones: wholeMinuteZones}

			var sub SubmitRequest
			f.fill(reflect.ValueOf(&sub).Elem(), "SubmitRequest")
			roundTrip(t, "SubmitRequest, "+name, &sub, sub.AppendJSON, readJSONSubmitRequest, DecodeSubmitRequest, referenceDecodeInto)

			var resp SubmitResponse
			f.fill(reflect.ValueOf(&resp).Elem(), "SubmitResponse")
			roundTrip(t, "SubmitResponse, "+name, &resp, nil, readJSONSubmitResponse,
				func(data []byte, r *SubmitResponse) error { return r.DecodeJSON(data) }, unmarshal)

			var req NodeSyncRequest
			fillSync(&f, reflect.ValueOf(&req).Elem())
			roundTrip(t, "NodeSyncRequest, "+name, &req, req.AppendJSON, readJSONNodeSyncRequest, DecodeNodeSyncRequest, referenceSyncRequest)

			var sync NodeSyncResponse
			fillSync(&f, reflect.ValueOf(&sync).Elem())
			roundTrip(t, "NodeSyncResponse, "+name, &sync, sync.AppendJSON, readJSONNodeSyncResponse, DecodeNodeSyncResponse, referenceSyncResponse)

			var u NodeUsage
			f.fill(reflect.ValueOf(&u).Elem(), "NodeUsage")
			roundTrip(t, "NodeUsage, "+name, &u, func(b []byte) ([]byte, error) { return u.AppendJSON(b), nil },
				readJSONNodeUsage, func(data []byte, u *NodeUsage) error {
					return jsonfast.Decode(data, u, jsonfast.Whole, readJSONNodeUsage)
				}, unmarshal)

			// A job has an encoder only (the store writes it, nothing
			// decodes it by hand): its bytes must still read back.
			var j Job
			f.fill(reflect.ValueOf(&j).Elem(), "Job")
			data, err := j.AppendJSON(nil)
			want, wantErr := json.Marshal(&j)
			if (err != nil) != (wantErr != nil) || string(data) != string(want) {
				t.Fatalf("Job, %s: AppendJSON wrote %s (%v), json.Marshal %s (%v)", name, data, err, want, wantErr)
			}
			if err != nil {
				continue
			}
			var back Job
			if err := json.Unmarshal(data, &back); err != nil {
				t.Fatalf("Job, %s: %v", name, err)
			}
			if diff := cmp.Diff(&j, &back, sameTime); diff != "" {
				t.Fatalf("Job, %s: read back another value (-written +read):\n%s", name, diff)
			}
		}
	}
}

func referenceDecodeInto(data []byte, r *SubmitRequest) error {
	v, err := referenceDecode(data)
	*r = v
	return err
}
