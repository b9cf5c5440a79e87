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

	"github.com/tide-hpc/tide/gres"
	"github.com/tide-hpc/tide/internal/jsonfast"
)

// The references are what the controller and the node daemon's client
// did before the generated readers.

func referenceSyncRequest(data []byte, r *NodeSyncRequest) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	return dec.Decode(r)
}

func referenceSyncResponse(data []byte, r *NodeSyncResponse) error {
	return json.NewDecoder(bytes.NewReader(data)).Decode(r)
}

// checkSyncDecode fails t unless decode and ref agree on data: the same
// error (or none) and the same value, partly decoded ones included.
func checkSyncDecode[T any](t *testing.T, name string, data []byte, decode, ref func([]byte, *T) error) {
	t.Helper()
	var got, want T
	err := decode(data, &got)
	wantErr := ref(data, &want)
	if (err != nil) != (wantErr != nil) || err != nil && err.Error() != wantErr.Error() {
		t.Fatalf("%s: error %v, reference error %v\ninput: %q", name, err, wantErr, data)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: decoded\n%+v\nreference\n%+v\ninput: %q", name, got, want, data)
	}
}

func checkSyncRequestDecode(t *testing.T, name string, data []byte) {
	t.Helper()
	checkSyncDecode(t, name, data, DecodeNodeSyncRequest, referenceSyncRequest)
}

func checkSyncResponseDecode(t *testing.T, name string, data []byte) {
	t.Helper()
	checkSyncDecode(t, name, data, DecodeNodeSyncResponse, referenceSyncResponse)
}

// checkAppendJSON fails t unless appendJSON writes exactly what
// json.Marshal(v) does, after a prefix that it must leave alone, or
// fails with json.Marshal's error and leaves the prefix alone.
func checkAppendJSON(t *testing.T, name string, v any, appendJSON func([]byte) ([]byte, error)) []byte {
	t.Helper()
	want, wantErr := json.Marshal(v)
	prefix := []byte("prefix:")
	got, err := appendJSON(prefix)
	if (err != nil) != (wantErr != nil) || err != nil && err.Error() != wantErr.Error() {
		t.Fatalf("%s: AppendJSON error %v, json.Marshal error %v", name, err, wantErr)
	}
	if err != nil {
		if !bytes.Equal(got, prefix) {
			t.Fatalf("%s: AppendJSON returned %q on error, want the prefix alone", name, got)
		}
		return nil
	}
	if !bytes.HasPrefix(got, prefix) {
		t.Fatalf("%s: AppendJSON lost the prefix: %q", name, got)
	}
	if got := got[len(prefix):]; !bytes.Equal(got, want) {
		t.Fatalf("%s: AppendJSON differs from json.Marshal at byte %d\n got: %s\nwant: %s",
			name, firstDiff(got, want), got, want)
	}
	return want
}

// checkSyncRequestJSON checks the writer against json.Marshal and, on
// what it wrote, that the generated reader reads it by hand (not through
// encoding/json, which would hide a field it lacks) and as encoding/json
// does.
func checkSyncRequestJSON(t *testing.T, name string, r *NodeSyncRequest) {
	t.Helper()
	data := checkAppendJSON(t, name, r, r.AppendJSON)
	if data == nil || r == nil {
		return
	}
	var out NodeSyncRequest
	if !readJSONNodeSyncRequest(jsonfast.New(data), &out) {
		t.Fatalf("%s: the generated reader refused the encoder's output\n%s", name, data)
	}
	checkSyncRequestDecode(t, name, data)
}

func checkSyncResponseJSON(t *testing.T, name string, r *NodeSyncResponse) {
	t.Helper()
	data := checkAppendJSON(t, name, r, r.AppendJSON)
	if r != nil {
		for i := range r.Launch {
			l := &r.Launch[i]
			checkAppendJSON(t, name+": launch alone", l, l.AppendJSON)
		}
	}
	if data == nil || r == nil {
		return
	}
	var out NodeSyncResponse
	if !readJSONNodeSyncResponse(jsonfast.New(data), &out) {
		t.Fatalf("%s: the generated reader refused the encoder's output\n%s", name, data)
	}
	checkSyncResponseDecode(t, name, data)
}

// syncFloats are CPU loads around encoding/json's switches between
// fixed and exponent notation (1e-6 and 1e21), with one- to three-digit
// exponents, and the extremes.
var syncFloats = []float64{
	0.5, 1, 3.75, -2.25, 0.1 + 0.2, 123456789.123, 1e-6, 9.99e-7, 1e-7, 1e-10, 1.5e-100,
	1e20, 999999999999999999999, 1e21, 1.5e300, 5e-324, math.MaxFloat64, -math.MaxFloat64,
	math.SmallestNonzeroFloat64, 12.0, 100, 1.0 / 3,
}

// syncProcPIDs include keys whose decimal order differs from their
// numeric order (9 and 10, negatives) and the extremes.
var syncProcPIDs = []int{0, 1, 9, 10, 100, -1, -10, math.MaxInt, math.MinInt, 4194304, 123}

// fillSync fills the top-level fields of a sync request or response with
// the filler, doing itself the kinds the filler does not know (the CPU
// load and the PID map, which only occur at the top).
func fillSync(f *filler, v reflect.Value) {
	for i := range v.NumField() {
		fv, name := v.Field(i), v.Type().Name()+"."+v.Type().Field(i).Name
		switch fv.Kind() {
		case reflect.Float64:
			if f.zero() {
				fv.SetZero()
			} else {
				fv.SetFloat(syncFloats[f.rng.IntN(len(syncFloats))])
			}
		case reflect.Map:
			if fv.Type() != reflect.TypeFor[map[int]uint64]() {
				f.t.Fatalf("%s: no filler for %s", name, fv.Type())
			}
			if f.zero() {
				fv.SetZero()
				continue
			}
			m := map[int]uint64{}
			for range 1 + f.rng.IntN(6) {
				k := syncProcPIDs[f.rng.IntN(len(syncProcPIDs))]
				if f.rng.IntN(3) == 0 {
					k = int(f.rng.Int64())
				}
				m[k] = []uint64{0, 1, math.MaxUint64, f.rng.Uint64()}[f.rng.IntN(4)]
			}
			fv.Set(reflect.ValueOf(m))
		default:
			f.fill(fv, name)
		}
	}
}

func TestNodeSyncJSONMatchesEncodingJSON(t *testing.T) {
	requests := []struct {
		name string
		r    *NodeSyncRequest
	}{
		{"nil", nil},
		{"zero", &NodeSyncRequest{}},
		{"typical", typicalSyncRequest()},
		{"empty slices and map", &NodeSyncRequest{Jobs: []NodeJobReport{}, GPUStatus: []gres.Status{}, GPUProcJobs: map[int]uint64{}}},
		{"zero report", &NodeSyncRequest{Jobs: []NodeJobReport{{}}}},
		{"hosted list echoed", &NodeSyncRequest{Name: "n", HostedGen: math.MaxUint64}},
		{"zero status", &NodeSyncRequest{GPUStatus: []gres.Status{{Processes: []gres.ProcUsage{}}}}},
		{"zero time in a zone", &NodeSyncRequest{Jobs: []NodeJobReport{{StartTime: time.Time{}.In(time.FixedZone("X", -3600))}}}},
		{"time with monotonic clock", &NodeSyncRequest{Jobs: []NodeJobReport{{StartTime: time.Now()}}}},
		{"negative zero load", &NodeSyncRequest{CPULoad: math.Copysign(0, -1)}},
		{"load NaN", &NodeSyncRequest{CPULoad: math.NaN()}},
		{"load +Inf", &NodeSyncRequest{CPULoad: math.Inf(1)}},
		{"load -Inf", &NodeSyncRequest{CPULoad: math.Inf(-1), Name: "n", WaitMS: 5}},
		{"bad end time", &NodeSyncRequest{Jobs: []NodeJobReport{{State: NodeJobFinished, EndTime: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}}}},
		{"bad time before NaN load", &NodeSyncRequest{CPULoad: math.NaN(),
			Jobs: []NodeJobReport{{}, {StartTime: time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("", 24*3600))}}}},
	}
	for _, f := range syncFloats {
		requests = append(requests, struct {
			name string
			r    *NodeSyncRequest
		}{fmt.Sprintf("load %v", f), &NodeSyncRequest{CPULoad: f}})
	}
	for _, tc := range requests {
		checkSyncRequestJSON(t, tc.name, tc.r)
	}

	responses := []struct {
		name string
		r    *NodeSyncResponse
	}{
		{"nil", nil},
		{"zero", &NodeSyncResponse{}},
		{"unregistered", &NodeSyncResponse{Unregistered: true}},
		{"ack only", &NodeSyncResponse{Ack: []JobRef{{JobID: 7}, {JobID: 8, Restart: 1}}}},
		{"typical", &NodeSyncResponse{Launch: []LaunchSpec{*typicalLaunch()}, Ack: []JobRef{{JobID: 41}}}},
		{"empty slices", &NodeSyncResponse{Launch: []LaunchSpec{}, Signals: []SignalCommand{}, Limits: []LimitUpdate{}, Ack: []JobRef{}, Forget: []JobRef{}}},
		{"zero launch", &NodeSyncResponse{Launch: []LaunchSpec{{}}}},
		{"empty alloc", &NodeSyncResponse{Launch: []LaunchSpec{{Alloc: []NodeAlloc{}, Args: []string{}, Env: []string{}}}}},
		{"zero pointers' targets", &NodeSyncResponse{Launch: []LaunchSpec{{Signal: &SignalSpec{}, Array: &ArrayLaunch{}, Alloc: []NodeAlloc{{GPUs: []int{}}}}}}},
		{"zero signal and limit", &NodeSyncResponse{Signals: []SignalCommand{{}}, Limits: []LimitUpdate{{}}, Forget: []JobRef{{}}}},
		{"registration answer with step key", &NodeSyncResponse{StepKey: "MCowBQYDK2VwAyEA", HostedGen: 1}},
		{"hosted jobs", &NodeSyncResponse{Hosted: []HostedJob{{JobRef: JobRef{JobID: 9, Restart: 2}, UserID: 1000, GroupID: 100}, {}}, HostedGen: math.MaxUint64}},
		{"empty hosted list", &NodeSyncResponse{Hosted: []HostedJob{}, HostedGen: 3}},
		{"bad start time", &NodeSyncResponse{Ack: []JobRef{{JobID: 1}},
			Launch: []LaunchSpec{*typicalLaunch(), {StartTime: time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)}}}},
	}
	for _, tc := range responses {
		checkSyncResponseJSON(t, tc.name, tc.r)
	}

	// Every field non-zero, so that a field the writer or the reader
	// does not know shows up; then fields zeroed at random, for the
	// omitempty and omitzero paths.
	for _, zeroOdds := range []int{0, 3} {
		for seed := range uint64(1000) {
			name := fmt.Sprintf("seed %d, zero odds %d", seed, zeroOdds)
			f := filler{t: t, rng: rand.New(rand.NewPCG(seed, uint64(zeroOdds)+11)), zeroOdds: zeroOdds}
			var req NodeSyncRequest
			fillSync(&f, reflect.ValueOf(&req).Elem())
			checkSyncRequestJSON(t, "request, "+name, &req)
			var resp NodeSyncResponse
			fillSync(&f, reflect.ValueOf(&resp).Elem())
			checkSyncResponseJSON(t, "response, "+name, &resp)
		}
	}
}

// TestNodeSyncJSONErrors checks that the errors are json.Marshal's own,
// of its types.
func TestNodeSyncJSONErrors(t *testing.T) {
	req := &NodeSyncRequest{CPULoad: math.NaN()}
	_, err := req.AppendJSON(nil)
	var uv *json.UnsupportedValueError
	if !errors.As(err, &uv) {
		t.Errorf("NaN load: error %v (%T), want a *json.UnsupportedValueError", err, err)
	}
	resp := &NodeSyncResponse{Launch: []LaunchSpec{{StartTime: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}}}
	_, err = resp.AppendJSON(nil)
	var me *json.MarshalerError
	if !errors.As(err, &me) {
		t.Errorf("bad start time: error %v (%T), want a *json.MarshalerError", err, err)
	}
}

const (
	syncTime   = `"2026-03-01T12:00:00.123456789+01:00"`
	syncReport = `{"job_id":12,"restart":1,"state":"running","start_time":` + syncTime + `,"exit":{"code":0,"signal":0}}`
)

// syncRequestEdgeCases are inputs the reader must hand to
// encoding/json or read exactly as it does.
var syncRequestEdgeCases = []string{
	``, ` `, `null`, `{}`, `[]`, `"x"`, `{"name":"n"}`, ` { "name" : "n" , "wait_ms" : 5 } `,
	`{"name":null}`, `{"jobs":null}`, `{"jobs":[]}`, `{"jobs":[{}]}`, `{"jobs":[null]}`, `{"jobs":[1]}`, `{"jobs":{}}`,
	`{"jobs":[` + syncReport + `,` + syncReport + `]}`,
	`{"jobs":[{"job_id":1,"error":"x","killed":true}],"jobs":[{"job_id":2}]}`,
	`{"jobs":[{"job_id":1,"error":"x"}],"jobs":[]}`,
	`{"jobs":[{"exit":{"code":1},"exit":{"signal":9}}]}`, `{"jobs":[{"exit":null}]}`, `{"jobs":[{"exit":{"code":1,"x":2}}]}`,
	`{"jobs":[{"job_id":1,"extra":1}]}`, `{"jobs":[{"Job_ID":1}]}`, `{"Name":"n"}`, `{"NAME":"a","name":"b"}`, `{"other":1}`,
	`{"jobs":[{"job_id":-1}]}`, `{"jobs":[{"job_id":18446744073709551615}]}`, `{"jobs":[{"job_id":18446744073709551616}]}`,
	`{"jobs":[{"job_id":1.0}]}`, `{"jobs":[{"job_id":"1"}]}`, `{"jobs":[{"restart":-0}]}`, `{"jobs":[{"restart":01}]}`,
	`{"jobs":[{"state":1}]}`, `{"jobs":[{"state":"fin\u0069shed"}]}`, `{"jobs":[{"error":"a\"b\\c\u00e9\ud83d\ude00\ud800<&>"}]}`,
	"{\"jobs\":[{\"error\":\"\xff\xfe\"}]}", "{\"jobs\":[{\"error\":\"tab\there\"}]}", `{"jobs":[{"error":"\x"}]}`,
	`{"jobs":[{"timed_out":1}]}`, `{"jobs":[{"oom":tru}]}`, `{"jobs":[{"oom":truex}]}`, `{"jobs":[{"checkpoint_ack":null}]}`,
	`{"jobs":[{"start_time":"2026-03-01T12:00:00Z"}]}`, `{"jobs":[{"start_time":"2026-03-01T12:00:00.5-07:00"}]}`,
	`{"jobs":[{"start_time":"\u0032026-03-01T12:00:00Z"}]}`, `{"jobs":[{"start_time":"2026-13-01T12:00:00Z"}]}`,
	`{"jobs":[{"start_time":"yesterday"}]}`, `{"jobs":[{"start_time":null}]}`, `{"jobs":[{"start_time":123}]}`,
	`{"jobs":[{"start_time":"0001-01-01T00:00:00Z","end_time":"2026-03-01T12:00:00Z","end_time":"2026-03-02T12:00:00Z"}]}`,
	"{\"jobs\":[{\"start_time\":\"2026-03-01T12:00:00\xffZ\"}]}", `{"jobs":[{"start_time":"2026-03-01T12:00:00+24:00"}]}`,
	`{"wait_ms":1.5}`, `{"wait_ms":"1"}`, `{"wait_ms":9223372036854775807}`, `{"wait_ms":9223372036854775808}`,
	`{"free_mem_mb":-9223372036854775808}`, `{"free_mem_mb":-9223372036854775809}`, `{"free_mem_mb":1e3}`,
	`{"cpu_load":0.25}`, `{"cpu_load":-0}`, `{"cpu_load":-0.0}`, `{"cpu_load":0}`, `{"cpu_load":1E5}`, `{"cpu_load":1e+2}`,
	`{"cpu_load":1e-2}`, `{"cpu_load":1e400}`, `{"cpu_load":-1e400}`, `{"cpu_load":1e-400}`, `{"cpu_load":.5}`,
	`{"cpu_load":1.}`, `{"cpu_load":01.5}`, `{"cpu_load":-}`, `{"cpu_load":1.5e}`, `{"cpu_load":1.5e+}`, `{"cpu_load":"1.5"}`,
	`{"cpu_load":null}`, `{"cpu_load":true}`, `{"cpu_load":1.5.3}`, `{"cpu_load":0x10}`, `{"cpu_load":Infinity}`, `{"cpu_load":NaN}`,
	`{"cpu_load":1_000}`, `{"cpu_load":123456789012345678901234567890}`, `{"cpu_load":4.9e-324}`, `{"cpu_load":2.5e-324}`,
	`{"gpu_status":[{"index":0,"health":"healthy","mem_used_mb":1,"util_pct":2,"processes":[{"pid":1,"mem_mb":-1}]}]}`,
	`{"gpu_status":[{"index":0,"extra":1}]}`, `{"gpu_status":null}`, `{"gpu_status":[]}`, `{"gpu_status":{}}`,
	`{"gpu_status":[{"index":0,"health":"a"}],"gpu_status":[{"reason":"b"}]}`,
	`{"gpu_proc_jobs":{"12":3,"4":5}}`, `{"gpu_proc_jobs":{"x":1}}`, `{"gpu_proc_jobs":{"1":-1}}`, `{"gpu_proc_jobs":null}`,
	`{"gpu_proc_jobs":{"1":2},"gpu_proc_jobs":{"3":4}}`, `{"gpu_proc_jobs":{"99999999999999999999":1}}`, `{"gpu_proc_jobs":{}}`,
	`{"gpu_proc_jobs":{"1":2]}`, `{"gpu_status":[{"index":0]}`,
	`{"name":"a"} trailing`, `{"name":"a"}{"name":"b"}`, "\ufeff{}", `{"name":"a"`, `{"name":"a"},`,
	`{"name":"a",}`, `{"name" "a"}`, `{"jobs":[{"job_id":1},]}`, `{"jobs":[{"job_id":1}`,
	`{"name":"n","jobs":[` + syncReport + `],"wait_ms":30000,"cpu_load":1.25,"free_mem_mb":123456}`,
}

func TestDecodeNodeSyncRequestEdgeCases(t *testing.T) {
	for i, in := range syncRequestEdgeCases {
		checkSyncRequestDecode(t, fmt.Sprintf("case %d", i), []byte(in))
	}
}

const syncLaunch = `{"job_id":5,"restart":0,"name":"wrap","user_id":1000,"group_id":1000,"user":"alice",` +
	`"partition":"gpu","cluster":"c","script":"#!/bin/sh\ntrue\n","work_dir":"/w","submit_dir":"/w",` +
	`"env":["A=1","B=2"],"stdout":"o","time_limit":60,"start_time":` + syncTime + `,"kill_wait":30,` +
	`"alloc":[{"node":"n1","cpus":2,"memory_mb":100,"gpus":[0,1],"tasks":1}],"num_tasks":1,"cpus_per_task":2}`

var syncResponseEdgeCases = []string{
	``, ` `, `null`, `{}`, `[]`, `"x"`, `{"unregistered":true}`, ` { "unregistered" : false } `,
	`{"launch":[` + syncLaunch + `]}`, `{"launch":[` + syncLaunch + `,` + syncLaunch + `],"ack":[{"job_id":1,"restart":2}]}`,
	`{"launch":null}`, `{"launch":[]}`, `{"launch":[{}]}`, `{"launch":[null]}`, `{"launch":{}}`, `{"launch":[1]}`,
	`{"launch":[{"name":"a","user":"u"}],"launch":[{"name":"b"}]}`, `{"launch":[{"name":"a"},{"name":"b"}],"launch":[{"user":"c"}]}`,
	`{"launch":[],"extra":1}`, `{"extra":{"a":[1,"]"]},"unregistered":true}`, `{"Launch":[{"Name":"x"}]}`,
	`{"launch":[{"job_id":1,"env":["A=1"],"unknown":{"a":[1]}}]}`, `{"UNREGISTERED":true,"unregistered":false}`,
	`{"launch":[{"alloc":null}]}`, `{"launch":[{"alloc":[]}]}`, `{"launch":[{"alloc":[{}]}]}`,
	`{"launch":[{"alloc":[{"node":"a","cpus":1}],"alloc":[{"memory_mb":2}]}]}`, `{"launch":[{"alloc":[{"node":"a","x":1}]}]}`,
	`{"launch":[{"alloc":[{"gpus":[]}]}]}`, `{"launch":[{"alloc":[{"gpus":null}]}]}`, `{"launch":[{"alloc":[{"gpus":[1,2],"gpus":[3]}]}]}`,
	`{"launch":[{"alloc":[{"gpus":[1.5]}]}]}`, `{"launch":[{"alloc":[{"numa":[-1,9223372036854775808]}]}]}`,
	`{"launch":[{"signal":{"signal":10,"seconds":60}}]}`, `{"launch":[{"signal":{"signal":10},"signal":{"seconds":5}}]}`,
	`{"launch":[{"signal":null}]}`, `{"launch":[{"signal":{"signal":10},"signal":null}]}`, `{"launch":[{"signal":{"Signal":10}}]}`,
	`{"launch":[{"signal":{"signal":10,"extra":1}}]}`,
	`{"launch":[{"array":{"job_id":1,"task":2,"count":3,"min":0,"max":9,"step":1}}]}`,
	`{"launch":[{"array":{"job_id":1},"array":{"task":2}}]}`, `{"launch":[{"array":null}]}`, `{"launch":[{"array":{"task":-1.5}}]}`,
	`{"launch":[{"container_mounts":[{"source":"/a","destination":"/b","read_only":true}]}]}`,
	`{"launch":[{"container_mounts":[{"source":"/a","extra":1}]}]}`, `{"launch":[{"container_mounts":null}]}`,
	`{"launch":[{"container_mounts":[{"source":"/a","destination":"/b"}],"container_mounts":[{"read_only":true}]}]}`,
	`{"launch":[{"args":null}]}`, `{"launch":[{"args":[]}]}`, `{"launch":[{"args":["a",1]}]}`, `{"launch":[{"env":["A","B"],"env":["C"]}]}`,
	`{"launch":[{"user_id":4294967295}]}`, `{"launch":[{"user_id":4294967296}]}`, `{"launch":[{"group_id":-1}]}`,
	`{"launch":[{"time_limit":"x"}]}`, `{"launch":[{"kill_wait":9223372036854775808}]}`, `{"launch":[{"num_tasks":true}]}`,
	`{"launch":[{"start_time":"2026-03-01T12:00:00Z"}]}`, `{"launch":[{"start_time":null}]}`,
	`{"launch":[{"start_time":"\u0032026-03-01T12:00:00Z"}]}`, `{"launch":[{"start_time":"2026-03-01"}]}`,
	`{"launch":[{"script":"a\"b\\c\u00e9\ud83d\ude00\ud800<&>\u2028"}]}`, "{\"launch\":[{\"script\":\"\xff\xfe\"}]}",
	`{"launch":[{"script":"\q"}]}`, `{"launch":[{"env":["A=\n"]}]}`,
	`{"signals":[{"job_id":1,"restart":2,"signal":15,"kill":true,"batch_only":true}]}`, `{"signals":[{}]}`,
	`{"signals":[{"job_id":1}],"signals":[{"restart":2}]}`, `{"signals":[{"kill":"yes"}]}`, `{"signals":[{"x":1}]}`,
	`{"limits":[{"job_id":1,"restart":0,"time_limit":3600}]}`, `{"limits":[{"time_limit":-1}]}`, `{"limits":[{"time_limit":1.5}]}`,
	`{"ack":[{"job_id":1,"restart":2}],"forget":[]}`, `{"ack":[{"job_id":1}],"ack":[{"restart":2}]}`, `{"forget":[{"job_id":-1}]}`,
	`{"ack":[{"job_id":1,"x":2}]}`, `{"ack":null,"forget":null}`,
	`{"unregistered":true} trailing`, `{"unregistered":true}{}`, "\ufeff{}", `{"launch":[` + syncLaunch, `{"launch":[{"name":"a"}]`,
	`{"launch":[{"name":"a"},]}`, `{"unregistered":true,}`, `{"unregistered" true}`,
}

func TestDecodeNodeSyncResponseEdgeCases(t *testing.T) {
	for i, in := range syncResponseEdgeCases {
		checkSyncResponseDecode(t, fmt.Sprintf("case %d", i), []byte(in))
	}
}

func FuzzDecodeNodeSyncRequest(f *testing.F) {
	for _, in := range syncRequestEdgeCases {
		f.Add([]byte(in))
	}
	if typical, err := typicalSyncRequest().AppendJSON(nil); err == nil {
		f.Add(typical)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkSyncRequestDecode(t, "fuzz", data)
	})
}

func FuzzDecodeNodeSyncResponse(f *testing.F) {
	for _, in := range syncResponseEdgeCases {
		f.Add([]byte(in))
	}
	typical := &NodeSyncResponse{Launch: []LaunchSpec{*typicalLaunch()}, Ack: []JobRef{{JobID: 41}}}
	if data, err := typical.AppendJSON(nil); err == nil {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkSyncResponseDecode(t, "fuzz", data)
	})
}

// FuzzNodeSyncJSON checks the writers on strings, numbers and loads the
// fuzzer makes up, and that the readers read back what they wrote.
func FuzzNodeSyncJSON(f *testing.F) {
	f.Add("node01", "A=1", "#!/bin/sh\n", 1.25, int64(7), int64(-1), uint64(42))
	f.Add("<&>\u2028", "\xff", "\x00\x1f\x7f", 1e21, int64(math.MinInt64), int64(1), uint64(math.MaxUint64))
	f.Add("", "", "", 1e-7, int64(0), int64(0), uint64(0))
	f.Fuzz(func(t *testing.T, s1, s2, s3 string, load float64, n1, n2 int64, u uint64) {
		req := &NodeSyncRequest{
			Name:        s1,
			Jobs:        []NodeJobReport{{JobID: u, Restart: int(n2), State: NodeJobState(s2), Error: s3, Exit: ExitStatus{Code: int(n1)}}},
			CPULoad:     load,
			FreeMemMB:   n1,
			WaitMS:      int(n2),
			GPUStatus:   []gres.Status{{Index: int(n2), Health: s3, Reason: s2, MemUsedMB: n1}},
			GPUProcJobs: map[int]uint64{int(n1): u, int(n2): u / 2},
		}
		checkSyncRequestJSON(t, "fuzz request", req)
		l := typicalLaunch()
		l.JobID, l.Name, l.Script, l.Env = u, s1, s3, append(l.Env, s1, s2, s3)
		l.TimeLimit, l.KillWait, l.StartTime = n1, n2, time.Unix(n1%(1<<35), n2%1e9).In(time.FixedZone("", int(n2%(18*3600))))
		l.Alloc[0].GPUs = []int{int(n1), int(n2)}
		resp := &NodeSyncResponse{Launch: []LaunchSpec{*l}, Forget: []JobRef{{JobID: u, Restart: int(n1)}}}
		checkSyncResponseJSON(t, "fuzz response", resp)
	})
}

// typicalLaunch is what a launch of sbatch --wrap from a login shell
// carries: the environment, with what the controller adds, is most of
// it.
func typicalLaunch() *LaunchSpec {
	spec := typicalSubmit().Spec
	env := append(spec.Environment,
		"SLURM_JOB_ID=19278", "SLURM_JOB_NAME=wrap", "SLURM_SUBMIT_DIR=/home/alice/projects/llm-finetune",
		"SLURM_SUBMIT_HOST=login01", "SLURM_JOB_PARTITION=gpu")
	return &LaunchSpec{
		JobRef:      JobRef{JobID: 19278},
		Name:        spec.Name,
		UserID:      1000,
		GroupID:     1000,
		User:        "alice",
		Partition:   spec.Partition,
		Cluster:     "tide",
		Script:      spec.Script,
		WorkDir:     spec.WorkDir,
		SubmitDir:   spec.SubmitDir,
		SubmitHost:  spec.SubmitHost,
		Env:         env,
		Stdout:      "/home/alice/projects/llm-finetune/slurm-%j.out",
		TimeLimit:   spec.TimeLimit,
		StartTime:   time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC),
		KillWait:    30,
		Alloc:       []NodeAlloc{{Node: "gpu07", CPUs: 8, MemoryMB: 32768, GPUs: []int{2, 3}, Tasks: 1, NUMA: []int{1}}},
		NumTasks:    1,
		CPUsPerTask: 8,
		GPUUUIDs:    []string{"GPU-5f1c2b7e-8a3d-4c6e-9b0f-1a2b3c4d5e6f", "GPU-0a9b8c7d-6e5f-4a3b-2c1d-0e9f8a7b6c5d"},
	}
}

// typicalSyncRequest is a busy node's heartbeat: some jobs running, one
// just finished.
func typicalSyncRequest() *NodeSyncRequest {
	start := time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)
	r := &NodeSyncRequest{Name: "gpu07", WaitMS: 30000, CPULoad: 6.37, FreeMemMB: 412337}
	for i := range 8 {
		r.Jobs = append(r.Jobs, NodeJobReport{JobID: 19270 + uint64(i), State: NodeJobRunning,
			StartTime: start.Add(time.Duration(i) * time.Second)})
	}
	r.Jobs[0].State, r.Jobs[0].EndTime = NodeJobFinished, start.Add(time.Minute)
	r.Jobs[0].Exit = ExitStatus{Code: 1}
	return r
}

func BenchmarkDecodeNodeSyncResponse(b *testing.B) {
	resp := &NodeSyncResponse{Launch: []LaunchSpec{*typicalLaunch()}, Ack: []JobRef{{JobID: 19277}}}
	data, err := resp.AppendJSON(nil)
	if err != nil {
		b.Fatal(err)
	}
	benchDecode(b, data, DecodeNodeSyncResponse, referenceSyncResponse)
}

func BenchmarkDecodeNodeSyncRequest(b *testing.B) {
	data, err := typicalSyncRequest().AppendJSON(nil)
	if err != nil {
		b.Fatal(err)
	}
	benchDecode(b, data, DecodeNodeSyncRequest, referenceSyncRequest)
}

func benchDecode[T any](b *testing.B, data []byte, decode, ref func([]byte, *T) error) {
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var r T
			if err := decode(data, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var r T
			if err := ref(data, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkNodeSyncJSON(b *testing.B) {
	resp := &NodeSyncResponse{Launch: []LaunchSpec{*typicalLaunch()}, Ack: []JobRef{{JobID: 19277}}}
	req := typicalSyncRequest()
	for _, tc := range []struct {
		name       string
		v          any
		appendJSON func([]byte) ([]byte, error)
	}{
		{"response", resp, resp.AppendJSON},
		{"request", req, req.AppendJSON},
	} {
		b.Run(tc.name+"/AppendJSON", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := tc.appendJSON(nil); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(tc.name+"/encoding-json", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := json.Marshal(tc.v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
