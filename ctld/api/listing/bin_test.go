package listing

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/tide-hpc/tide/ctld/api"
)

// TestJobPlanCompiles fails when api.Job gains a field the codec cannot
// encode (a map, an interface, ...): give it a supported type or teach
// the codec the kind.
func TestJobPlanCompiles(t *testing.T) {
	p, err := compile(reflect.TypeFor[api.Job]())
	if err != nil {
		t.Fatal(err)
	}
	if len(p.fingerprint) != 16 {
		t.Errorf("fingerprint %q", p.fingerprint)
	}
	if got, want := MediaJobs(), mediaJobsBase+"; schema="+p.fingerprint; got != want {
		t.Errorf("MediaJobs() = %q, want %q", got, want)
	}
}

// fill sets every exported field reachable from v to a pseudo-random
// non-zero value: non-empty slices, non-nil pointers, times in odd zones
// with nanoseconds. It walks by reflection so that fields added to
// api.Job later are covered without touching the test.
func fill(t *testing.T, v reflect.Value, r *rand.Rand) {
	t.Helper()
	if v.Type() == reflect.TypeFor[time.Time]() {
		offsets := []int{0, 19800, -10800, 3725, -45}
		zone := time.FixedZone("Z", offsets[r.IntN(len(offsets))])
		v.Set(reflect.ValueOf(time.Unix(r.Int64N(8e9)-2e9, r.Int64N(1e9)).In(zone)))
		return
	}
	switch v.Kind() {
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		bits := v.Type().Bits()
		switch r.IntN(4) {
		case 0:
			v.SetInt(-1 << (bits - 1)) // the minimum
		case 1:
			v.SetInt(1<<(bits-1) - 1) // the maximum
		default:
			v.SetInt(r.Int64N(1<<(bits-1)-1) + 1)
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		bits := v.Type().Bits()
		if r.IntN(4) == 0 {
			v.SetUint(math.MaxUint64 >> (64 - bits))
		} else {
			v.SetUint(r.Uint64N(math.MaxUint64>>(64-bits)) + 1)
		}
	case reflect.Float32, reflect.Float64:
		v.SetFloat(r.NormFloat64()*1e6 + 0.5)
	case reflect.String:
		n := 1 + r.IntN(12)
		if r.IntN(8) == 0 {
			n = 200 // a length of two varint bytes
		}
		alphabet := []rune("abcxyz_-/é€0🙂")
		var b strings.Builder
		for range n {
			b.WriteRune(alphabet[r.IntN(len(alphabet))])
		}
		v.SetString(b.String())
	case reflect.Slice:
		n := 1 + r.IntN(3)
		if v.Type().Elem().Kind() == reflect.Int && r.IntN(4) == 0 {
			n = 150 // a count of two varint bytes
		}
		s := reflect.MakeSlice(v.Type(), n, n)
		for i := range n {
			fill(t, s.Index(i), r)
		}
		v.Set(s)
	case reflect.Array:
		for i := range v.Len() {
			fill(t, v.Index(i), r)
		}
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fill(t, p.Elem(), r)
		v.Set(p)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(t, v.Field(i), r)
			}
		}
	default:
		t.Fatalf("fill: unsupported kind %s (%s)", v.Kind(), v.Type())
	}
}

// takeTimes replaces every time.Time reachable from v by the zero Time
// and returns them, in walk order, as instant and zone offset, so that
// reflect.DeepEqual compares the rest and the times compare as the codec
// promises (same instant, same offset, zone names aside).
func takeTimes(v reflect.Value) []string {
	var out []string
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		if v.Type() == reflect.TypeFor[time.Time]() {
			tm := v.Interface().(time.Time)
			_, off := tm.Zone()
			out = append(out, fmt.Sprintf("%d.%09d%+d zero=%t", tm.Unix(), tm.Nanosecond(), off, tm.IsZero()))
			v.Set(reflect.ValueOf(time.Time{}))
			return
		}
		switch v.Kind() {
		case reflect.Slice, reflect.Array:
			for i := range v.Len() {
				walk(v.Index(i))
			}
		case reflect.Pointer:
			if !v.IsNil() {
				walk(v.Elem())
			}
		case reflect.Struct:
			for i := range v.NumField() {
				if v.Type().Field(i).IsExported() {
					walk(v.Field(i))
				}
			}
		}
	}
	walk(v)
	return out
}

func TestJobsRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var jobs []api.Job
	for range 6 {
		var j api.Job
		fill(t, reflect.ValueOf(&j).Elem(), r)
		jobs = append(jobs, j)
	}
	jobs = append(jobs, api.Job{})
	no := false
	jobs = append(jobs, api.Job{ID: 9, JobSpec: api.JobSpec{Requeue: &no}, SubmitTime: time.Now()})

	var buf bytes.Buffer
	if err := WriteJobs(&buf, jobs); err != nil {
		t.Fatal(err)
	}
	appended, err := AppendJobs([]byte("x"), jobs)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(appended[1:], buf.Bytes()) {
		t.Error("AppendJobs and WriteJobs differ")
	}
	got, err := ReadJobs(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if got[len(got)-1].Requeue == nil || *got[len(got)-1].Requeue {
		t.Errorf("Requeue = &false came back as %v", got[len(got)-1].Requeue)
	}
	if got[len(got)-2].SubmitTime != (time.Time{}) {
		t.Errorf("zero time came back as %#v", got[len(got)-2].SubmitTime)
	}
	wantTimes := takeTimes(reflect.ValueOf(jobs))
	gotTimes := takeTimes(reflect.ValueOf(got))
	if !reflect.DeepEqual(gotTimes, wantTimes) {
		t.Errorf("times:\n got %q\nwant %q", gotTimes, wantTimes)
	}
	if !reflect.DeepEqual(got, jobs) {
		for i := range jobs {
			if !reflect.DeepEqual(got[i], jobs[i]) {
				t.Errorf("job %d:\n got %+v\nwant %+v", i, got[i], jobs[i])
			}
		}
	}

	// Empty slices read back as nil, as they did with gob.
	buf.Reset()
	WriteJobs(&buf, []api.Job{{JobSpec: api.JobSpec{ScriptArgs: []string{}}}})
	if got, err := ReadJobs(&buf); err != nil || got[0].ScriptArgs != nil {
		t.Errorf("empty slice: %#v, %v", got, err)
	}
}

func TestTimes(t *testing.T) {
	for _, tm := range []time.Time{
		{},
		time.Now(), // with a monotonic reading
		time.Date(2026, 11, 29, 12, 0, 0, 1, time.UTC),
		time.Date(2026, 11, 29, 12, 0, 0, 999999999, time.FixedZone("IST", 19800)),
		time.Date(1901, 1, 1, 0, 0, 0, 5, time.FixedZone("", -3725)), // offset in seconds
		time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC),
		time.Time{}.In(time.FixedZone("X", 3600)),
	} {
		b, err := AppendJobs(nil, []api.Job{{SubmitTime: tm}})
		if err != nil {
			t.Fatalf("%v: %v", tm, err)
		}
		jobs, err := decodeJobs(b)
		if err != nil {
			t.Fatalf("%v: %v", tm, err)
		}
		got := jobs[0].SubmitTime
		_, gotOff := got.Zone()
		_, wantOff := tm.Zone()
		if !got.Equal(tm) || gotOff != wantOff || got.IsZero() != tm.IsZero() {
			t.Errorf("%v came back as %v", tm, got)
		}
	}
}

// sink exercises the kinds api.Job does not use today.
type sink struct {
	I8     int8
	I16    int16
	I32    int32
	U8     uint8
	U16    uint16
	U      uint
	P      uintptr
	F32    float32
	F64    float64
	A      [3]int16
	AS     [2]sinkElem
	SS     [][]string
	PS     *[]int
	PP     **int
	hidden string
	Inner  struct {
		X  bool
		In sinkElem
	}
	T *time.Time
}

type sinkElem struct {
	S string
	B []byte
}

// encodeValue and decodeValue run a plan on one value of any type.
func encodeValue(p *plan, ptr unsafe.Pointer) []byte {
	var e encoder
	e.value(p, ptr)
	return e.b
}

func decodeValue(p *plan, b []byte, ptr unsafe.Pointer) error {
	d := decoder{b: b}
	d.value(p, ptr)
	if d.err == nil && len(d.b) > 0 {
		return errors.New("bytes left over")
	}
	return d.err
}

func TestOtherKindsRoundTrip(t *testing.T) {
	p, err := compile(reflect.TypeFor[sink]())
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 20 {
		var in, out sink
		fill(t, reflect.ValueOf(&in).Elem(), r)
		in.hidden = "not sent"
		b := encodeValue(p, unsafe.Pointer(&in))
		if err := decodeValue(p, b, unsafe.Pointer(&out)); err != nil {
			t.Fatal(err)
		}
		in.hidden = ""
		if gt, wt := takeTimes(reflect.ValueOf(&out)), takeTimes(reflect.ValueOf(&in)); !reflect.DeepEqual(gt, wt) {
			t.Errorf("times %q, want %q", gt, wt)
		}
		if !reflect.DeepEqual(out, in) {
			t.Fatalf("got %+v\nwant %+v", out, in)
		}
	}
}

func TestOverflow(t *testing.T) {
	p, err := compile(reflect.TypeFor[struct{ A int8 }]())
	if err != nil {
		t.Fatal(err)
	}
	var v struct{ A int8 }
	if err := decodeValue(p, binary.AppendVarint(nil, 300), unsafe.Pointer(&v)); !errors.Is(err, errCorrupt) {
		t.Errorf("300 into int8: %v", err)
	}
}

func TestUnsupported(t *testing.T) {
	type rec struct {
		Next *rec
	}
	for _, typ := range []reflect.Type{
		reflect.TypeFor[struct{ M map[string]int }](),
		reflect.TypeFor[struct{ I any }](),
		reflect.TypeFor[struct{ C chan int }](),
		reflect.TypeFor[struct{ F func() }](),
		reflect.TypeFor[struct{ C complex128 }](),
		reflect.TypeFor[struct{ P unsafe.Pointer }](),
		reflect.TypeFor[struct{ E []struct{} }](),
		reflect.TypeFor[struct{ S []struct{ x int } }](),
		reflect.TypeFor[rec](),
		reflect.TypeFor[struct{ Deep struct{ In []map[int]int } }](),
	} {
		p, err := compile(typ)
		if err == nil {
			t.Errorf("%s compiled: %+v", typ, p)
			continue
		}
		t.Log(err)
	}
}

func TestFingerprint(t *testing.T) {
	type base struct {
		A int
		B string
	}
	type same struct {
		A int
		B string
		c bool // unexported: not sent
	}
	for _, tc := range []struct {
		name  string
		other reflect.Type
		equal bool
	}{
		{"same fields", reflect.TypeFor[same](), true},
		{"field added", reflect.TypeFor[struct {
			A int
			B string
			C bool
		}](), false},
		{"field renamed", reflect.TypeFor[struct {
			A  int
			B2 string
		}](), false},
		{"kind changed", reflect.TypeFor[struct {
			A uint
			B string
		}](), false},
		{"width changed", reflect.TypeFor[struct {
			A int32
			B string
		}](), false},
		{"fields swapped", reflect.TypeFor[struct {
			B string
			A int
		}](), false},
		{"slice", reflect.TypeFor[struct {
			A int
			B []string
		}](), false},
		{"nested", reflect.TypeFor[struct {
			A int
			B struct{ S string }
		}](), false},
	} {
		pa, err := compile(reflect.TypeFor[base]())
		if err != nil {
			t.Fatal(err)
		}
		pb, err := compile(tc.other)
		if err != nil {
			t.Fatal(err)
		}
		if (pa.fingerprint == pb.fingerprint) != tc.equal {
			t.Errorf("%s: fingerprints %s and %s, want equal=%t", tc.name, pa.fingerprint, pb.fingerprint, tc.equal)
		}
	}
}

func TestAcceptsJobs(t *testing.T) {
	m := MediaJobs()
	fp := strings.TrimPrefix(m, mediaJobsBase+"; schema=")
	for _, tc := range []struct {
		accept string
		want   bool
	}{
		{m, true},
		{"application/json, " + m, true},
		{"Application/X-Tide-Jobs;schema=" + fp + ";q=1", true},
		{mediaJobsBase + `; schema="` + fp + `"`, true},
		{"", false},
		{"application/json", false},
		{mediaJobsBase, false},
		{mediaJobsBase + "; schema=0123456789abcdef", false},
		{"application/x-tide-gob", false},
		{"text/plain; schema=" + fp, false},
	} {
		if got := AcceptsJobs(tc.accept); got != tc.want {
			t.Errorf("AcceptsJobs(%q) = %t, want %t", tc.accept, got, tc.want)
		}
	}
}

func sampleStream(t *testing.T) []byte {
	t.Helper()
	r := rand.New(rand.NewPCG(5, 6))
	jobs := make([]api.Job, 3)
	for i := range jobs {
		fill(t, reflect.ValueOf(&jobs[i]).Elem(), r)
	}
	jobs = append(jobs, api.Job{}, typicalJob(7))
	b, err := AppendJobs(nil, jobs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestCorruptInput(t *testing.T) {
	b := sampleStream(t)
	for n := range len(b) {
		if _, err := decodeJobs(b[:n]); err == nil {
			t.Fatalf("truncated to %d of %d bytes: no error", n, len(b))
		}
	}
	if _, err := decodeJobs(append(b[:len(b):len(b)], 0)); err == nil {
		t.Error("trailing byte: no error")
	}
	r := rand.New(rand.NewPCG(7, 8))
	for range 2000 {
		c := bytes.Clone(b)
		for range 1 + r.IntN(3) {
			c[r.IntN(len(c))] ^= byte(1 + r.IntN(255))
		}
		decodeJobs(c) // must not panic; an error or not
	}
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"gob", []byte("\x03\x04\x00\x02")},
		{"huge count", binary.AppendUvarint([]byte{streamVersion}, 1<<40)},
		{"varint overflow", append([]byte{streamVersion}, bytes.Repeat([]byte{0xff}, 11)...)},
	} {
		if _, err := decodeJobs(tc.b); !errors.Is(err, errCorrupt) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

// typicalJob is a pending job as squeue lists it: its spec, a few
// strings, times.
func typicalJob(i int) api.Job {
	submit := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Second)
	return api.Job{
		ID: uint64(1000 + i),
		JobSpec: api.JobSpec{
			Name: fmt.Sprintf("train-%d", i), Account: "ml", Partition: "gpu", QOS: "normal",
			WorkDir: "/home/alice/runs", SubmitDir: "/home/alice/runs", SubmitHost: "login01",
			Nodes: 1, Tasks: 4, CPUsPerTask: 8, MemPerNodeMB: 64000, GPUs: 4, GPUType: "h100",
			TimeLimit: 86400, Stdout: "slurm-%j.out",
		},
		UserID: 1000, GroupID: 1000, User: "alice", Group: "alice",
		State: api.StatePending, Reason: api.ReasonResources, ReasonDetail: "0/64 nodes available",
		EffPriority: 5, SubmitTime: submit, EligibleTime: submit, Cluster: "tide",
		Share: api.Share{Level: 5},
	}
}

func BenchmarkReadJobs(b *testing.B) {
	jobs := make([]api.Job, 10_000)
	for i := range jobs {
		jobs[i] = typicalJob(i)
	}
	body, err := AppendJobs(nil, jobs)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ReadJobs(bytes.NewReader(body)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkWriteJobs(b *testing.B) {
	jobs := make([]api.Job, 10_000)
	for i := range jobs {
		jobs[i] = typicalJob(i)
	}
	var buf bytes.Buffer
	b.ReportAllocs()
	for b.Loop() {
		buf.Reset()
		if err := WriteJobs(&buf, jobs); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(buf.Len()))
}

// BenchmarkCompile is what the first listing of a CLI run pays.
func BenchmarkCompile(b *testing.B) {
	for b.Loop() {
		if _, err := compile(reflect.TypeFor[api.Job]()); err != nil {
			b.Fatal(err)
		}
	}
}
