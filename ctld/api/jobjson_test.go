package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

// checkJobJSON fails t unless AppendJSON writes exactly what
// json.Marshal does, after a prefix that it must leave alone, and fails
// where json.Marshal fails, with the same error.
func checkJobJSON(t *testing.T, name string, j *Job) {
	t.Helper()
	want, wantErr := json.Marshal(j)
	prefix := []byte("prefix:")
	got, err := j.AppendJSON(prefix)
	if wantErr != nil {
		var me *json.MarshalerError
		if err == nil || err.Error() != wantErr.Error() || !errors.As(err, &me) {
			t.Fatalf("%s: AppendJSON error %v, json.Marshal error %v", name, err, wantErr)
		}
		if string(got) != string(prefix) {
			t.Fatalf("%s: AppendJSON returned %q on error, want the prefix alone", name, got)
		}
		return
	}
	if err != nil {
		t.Fatalf("%s: AppendJSON error %v, json.Marshal none", name, err)
	}
	if !bytes.HasPrefix(got, prefix) {
		t.Fatalf("%s: AppendJSON lost the prefix: %q", name, got)
	}
	if got := got[len(prefix):]; !bytes.Equal(got, want) {
		t.Fatalf("%s: AppendJSON differs from json.Marshal at byte %d\n got: %s\nwant: %s",
			name, firstDiff(got, want), got, want)
	}
}

func TestJobJSONMatchesEncodingJSON(t *testing.T) {
	zoneZero := time.Time{}.In(time.FixedZone("X", -3600))
	fixed := []struct {
		name string
		j    *Job
	}{
		{"nil", nil},
		{"zero", &Job{}},
		{"pending", typicalJob()},
		{"running", func() *Job {
			j := typicalJob()
			j.State, j.Reason = StateRunning, ReasonNone
			j.StartTime = j.SubmitTime.Add(1500 * time.Millisecond)
			j.Alloc = []NodeAlloc{{Node: "gpu01", CPUs: 8, MemoryMB: 64000, GPUs: []int{0, 1}, Tasks: 1, NUMA: []int{0}}}
			j.Launched = true
			return j
		}()},
		{"zero pointers", &Job{CancelledBy: new(uint32),
			JobSpec: JobSpec{Requeue: new(bool), Signal: &SignalSpec{}},
			Share:   Share{Preempting: &Preempting{}}}},
		{"empty slices", &Job{Alloc: []NodeAlloc{}, ArrayPending: TaskSet{},
			JobSpec: JobSpec{ScriptArgs: []string{}, NodeList: []string{}, ContainerMounts: []ContainerMount{}},
			Share:   Share{PrevNodes: []string{}}}},
		{"zero elements", &Job{Alloc: []NodeAlloc{{GPUs: []int{}, NUMA: []int{0}}}, ArrayPending: TaskSet{{}},
			Share: Share{PrevNodes: []string{""}}}},
		{"zero times in a zone", &Job{SubmitTime: zoneZero, EligibleTime: zoneZero, StartTime: zoneZero,
			EndTime: zoneZero, LastSchedEval: zoneZero,
			JobSpec: JobSpec{BeginTime: zoneZero},
			Share: Share{Starving: zoneZero, LastCheckpoint: zoneZero, ExpectedStart: zoneZero,
				Preempting: &Preempting{Since: zoneZero, Deadline: zoneZero}}}},
		{"times with monotonic clock", &Job{SubmitTime: time.Now(), EndTime: time.Now(),
			Share: Share{ExpectedStart: time.Now()}}},
		{"escapes", &Job{User: "<script>&\u2028\u2029", Group: "\xff\xfe", State: "\"\\\n\t\x00\x7f",
			Reason: "日本語😀", ReasonDetail: "\xed\xa0\x80", Placement: "a\u00a0b", HoldKind: "\x1f",
			JobSpec: JobSpec{Name: "<>&", WorkDir: "\r\b\f"},
			Share:   Share{PrevNodes: []string{"\xc3", "\u2028"}, Preempting: &Preempting{Mode: "&", Why: "<"}}}},
		{"extremes", &Job{ID: math.MaxUint64, UserID: math.MaxUint32, GroupID: math.MaxUint32,
			EffPriority: math.MaxUint32, Restarts: math.MinInt, Exit: ExitStatus{Code: math.MaxInt, Signal: -1},
			CancelledBy: ptrTo(uint32(math.MaxUint32)), ArrayJobID: math.MaxUint64, ArrayTaskID: math.MinInt,
			ArrayThrottle: -1, ArrayPending: TaskSet{{math.MinInt, math.MaxInt, -1}},
			JobSpec: JobSpec{Priority: math.MaxUint32, MemPerNodeMB: MemWholeNode},
			Share:   Share{Level: math.MinInt, Preemptions: math.MaxInt, Preempting: &Preempting{By: math.MaxUint64}}}},
	}
	for _, tc := range fixed {
		checkJobJSON(t, tc.name, tc.j)
	}

	// Every field non-zero, so that a field AppendJSON does not know
	// shows up in json.Marshal's output only; then fields zeroed at
	// random, for the omitempty and omitzero paths.
	for _, zeroOdds := range []int{0, 3} {
		for seed := range uint64(2000) {
			j := filledJob(t, seed, zeroOdds)
			checkJobJSON(t, fmt.Sprintf("seed %d, zero odds %d", seed, zeroOdds), j)
		}
	}
}

// TestJobJSONFlattening guards the premise of AppendJSON's layout: none
// of Job's JSON names shadows one of the embedded JobSpec's or Share's,
// so encoding/json writes every field of all three.
func TestJobJSONFlattening(t *testing.T) {
	j := filledJob(t, 1, 0)
	data, err := json.Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]json.RawMessage
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	want := 0
	for _, typ := range []reflect.Type{reflect.TypeFor[Job](), reflect.TypeFor[JobSpec](), reflect.TypeFor[Share]()} {
		for i := range typ.NumField() {
			if f := typ.Field(i); f.IsExported() && !f.Anonymous && f.Tag.Get("json") != "-" {
				want++
			}
		}
	}
	if len(got) != want {
		t.Fatalf("a filled Job encodes %d fields, its types declare %d: a JSON name is shadowed, "+
			"and AppendJSON must leave out what encoding/json drops", len(got), want)
	}
}

// TestJobJSONTimeErrors checks that AppendJSON fails where json.Marshal
// does, whichever of the job's times RFC 3339 cannot spell.
func TestJobJSONTimeErrors(t *testing.T) {
	bad := []time.Time{
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-1, 12, 31, 23, 59, 59, 0, time.UTC),
		time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("", 24*3600)),
	}
	set := map[string]func(*Job, time.Time){
		"BeginTime":           func(j *Job, t time.Time) { j.BeginTime = t },
		"SubmitTime":          func(j *Job, t time.Time) { j.SubmitTime = t },
		"EligibleTime":        func(j *Job, t time.Time) { j.EligibleTime = t },
		"StartTime":           func(j *Job, t time.Time) { j.StartTime = t },
		"EndTime":             func(j *Job, t time.Time) { j.EndTime = t },
		"LastSchedEval":       func(j *Job, t time.Time) { j.LastSchedEval = t },
		"Starving":            func(j *Job, t time.Time) { j.Starving = t },
		"Preempting.Since":    func(j *Job, t time.Time) { j.Preempting.Since = t },
		"Preempting.Deadline": func(j *Job, t time.Time) { j.Preempting.Deadline = t },
		"LastCheckpoint":      func(j *Job, t time.Time) { j.LastCheckpoint = t },
		"ExpectedStart":       func(j *Job, t time.Time) { j.ExpectedStart = t },
	}
	for field, setTime := range set {
		for i, tm := range bad {
			j := filledJob(t, uint64(i), 0)
			setTime(j, tm)
			if _, err := json.Marshal(j); err == nil {
				t.Fatalf("%s = %v: json.Marshal did not fail; the test's premise is wrong", field, tm)
			}
			checkJobJSON(t, fmt.Sprintf("%s = %v", field, tm), j)
		}
	}
}

// FuzzJobJSON fills a job from the seed, then puts the fuzzed string
// and time into fields of each kind of place AppendJSON writes them
// (the spec, the job, a nested struct, a slice), out-of-range times
// included.
func FuzzJobJSON(f *testing.F) {
	f.Add(uint64(0), uint8(0), "", int64(0), int64(0), int32(0))
	f.Add(uint64(1), uint8(3), "<a&b>\u2028\xff", int64(1767225600), int64(123456789), int32(3600))
	f.Add(uint64(2), uint8(2), "\"\\\x00\x1f\x7f", int64(253402300800), int64(0), int32(0))
	f.Add(uint64(3), uint8(5), "\xed\xa0\x80日本", int64(-62135596801), int64(999999999), int32(-86400))
	f.Fuzz(func(t *testing.T, seed uint64, zeroOdds uint8, s string, sec, nsec int64, offset int32) {
		j := filledJob(t, seed, int(zeroOdds%8))
		tm := time.Unix(sec, nsec).In(time.FixedZone("", int(offset)))
		j.Name, j.User, j.State = s, s, JobState(s)
		j.Placement, j.Cluster = s, s
		j.PrevNodes = append(j.PrevNodes, s)
		if len(j.Alloc) > 0 {
			j.Alloc[0].Node = s
		}
		if j.Preempting != nil {
			j.Preempting.Why, j.Preempting.Deadline = s, tm
		}
		switch seed % 4 {
		case 0:
			j.SubmitTime = tm
		case 1:
			j.EndTime = tm
		case 2:
			j.BeginTime = tm
		case 3:
			j.ExpectedStart = tm
		}
		checkJobJSON(t, "fuzz", j)
	})
}

// filledJob is a job with every field set by the submit tests' filler
// (see TestSubmitJSONMatchesEncodingJSON), about one in zeroOdds left
// zero.
func filledJob(t *testing.T, seed uint64, zeroOdds int) *Job {
	t.Helper()
	f := filler{t: t, rng: rand.New(rand.NewPCG(seed, uint64(zeroOdds))), zeroOdds: zeroOdds}
	var j Job
	f.fill(reflect.ValueOf(&j).Elem(), "Job")
	return &j
}

func ptrTo[T any](v T) *T { return &v }

// typicalJob is a job as the controller stores it at submit: the
// spool's script and environment already left out.
func typicalJob() *Job {
	spec := typicalSubmit().Spec
	spec.Script, spec.Environment = "", nil
	return &Job{
		ID:      1_234_567,
		JobSpec: spec,
		UserID:  1000, GroupID: 1000, User: "alice", Group: "alice",
		State: StatePending, Reason: ReasonPriority,
		SubmitTime: time.Date(2026, 3, 14, 9, 26, 53, 589793238, time.UTC),
		Cluster:    "tide",
		Share:      Share{Level: 5},
	}
}

func BenchmarkJobJSON(b *testing.B) {
	j := typicalJob()
	j.State, j.Reason = StateCompleted, ReasonNone
	j.StartTime = j.SubmitTime.Add(1500 * time.Millisecond)
	j.EndTime = j.StartTime.Add(time.Hour)
	j.Alloc = []NodeAlloc{{Node: "gpu01", CPUs: 8, MemoryMB: 64000, GPUs: []int{0, 1}, Tasks: 1, NUMA: []int{0}}}
	b.Run("AppendJSON", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := j.AppendJSON(nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(j); err != nil {
				b.Fatal(err)
			}
		}
	})
}
