package stepd

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// statusInputs are status.json documents: what the supervisor and tided
// write, and what neither does.
func statusInputs(t testing.TB) []string {
	zone := time.FixedZone("X", 3*3600+1800)
	var out []string
	for _, st := range []Status{
		{},
		{Exit: api.ExitStatus{Code: 3}, StartTime: time.Unix(1700000000, 123456789).UTC(), EndTime: time.Unix(1700000005, 0).UTC()},
		{Exit: api.ExitStatus{Signal: 9}, EndTime: time.Unix(1700000005, 1).In(zone), OOM: true},
		{Exit: api.ExitStatus{Code: 1}, EndTime: time.Now(), Error: "execve /x: \"quoted\" <html> & \u2028 \xff"},
		{Exit: api.ExitStatus{Code: -1, Signal: 1 << 40}},
		{Exit: api.ExitStatus{Code: 1}, EndTime: time.Unix(1700000006, 0).UTC(), Error: "launch timed out after 1m0s", LaunchFailed: true},
		{Exit: api.ExitStatus{Code: 0}, EndTime: time.Unix(1700000007, 0).UTC(), Usage: &api.NodeUsage{Final: true,
			Cgroup: &api.CgroupTotals{UserUsec: 5, SystemUsec: 6, HasIO: true, ReadBytes: 7},
			Tasks:  []api.TaskUsage{{UserUsec: 1, SystemUsec: 2, RSS: 4096, Pages: 3, ReadBytes: 512, WriteBytes: 1024}}}},
	} {
		b, err := json.Marshal(&st)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(b), string(b)+"\n")
	}
	return append(out,
		``, `null`, `{}`, `[]`, `{"exit":null}`, `{"exit":{"code":1.5}}`, `{"exit":{"code":"1"}}`,
		`{"Exit":{"Code":2}}`, `{"exit":{"code":2},"exit":{"signal":3}}`, `{"end_time":"not a time"}`,
		`{"end_time":"2026-01-02T03:04:05Z","end_time":"2026-01-02T03:04:06Z"}`,
		`{"error":"a\u00e9b\\n"}`, `{"oom":1}`, `{"launch_failed":"yes"}`, `{"unknown":true}`, `{"exit":{"code":1}} x`,
		`{"exit":{"code":99999999999999999999}}`, `{"start_time":null}`, `{"error":"\ud800"}`,
		` { "exit" : { "code" : 4 } , "oom" : true } `, `{"exit":{"code":1},}`, `{"exit"`,
		`{"usage":{"job_id":0,"step_id":0,"tasks":null},"usage":{"job_id":1,"step_id":0,"tasks":[]}}`,
		`{"usage":null}`, `{"usage":{"tasks":[{"task":1,"rss":"big"}]}}`,
	)
}

func TestDecodeStatusMatchesEncodingJSON(t *testing.T) {
	for i, in := range statusInputs(t) {
		checkDecodeStatus(t, []byte(in))
		// What encoding/json writes (the first fourteen) is read by
		// hand, not by the fallback.
		if st := new(Status); i < 14 && !statusByHand([]byte(in), st) {
			t.Errorf("%q went to encoding/json", in)
		}
	}
}

func checkDecodeStatus(t *testing.T, data []byte) {
	t.Helper()
	var want, got Status
	werr := json.Unmarshal(data, &want)
	gerr := decodeStatus(data, &got)
	if fmt.Sprint(werr) != fmt.Sprint(gerr) {
		t.Fatalf("%q: error %v, encoding/json %v", data, gerr, werr)
	}
	if werr == nil && (!reflect.DeepEqual(got, want) || !got.StartTime.Equal(want.StartTime) || !got.EndTime.Equal(want.EndTime)) {
		t.Fatalf("%q: got %+v, encoding/json %+v", data, got, want)
	}
}

func FuzzDecodeStatus(f *testing.F) {
	for _, in := range statusInputs(f) {
		f.Add([]byte(in))
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkDecodeStatus(t, data) })
}

func TestReadStatus(t *testing.T) {
	dir := t.TempDir()
	want := Status{Exit: api.ExitStatus{Code: 3}, StartTime: time.Unix(1, 0).UTC(), EndTime: time.Unix(2, 0).UTC(), Error: "e"}
	p := filepath.Join(dir, FileStatus)
	if err := WriteJSONAtomic(p, &want, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadStatus(p); err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("ReadStatus = %+v, %v; want %+v", got, err, want)
	}
	if err := os.WriteFile(p, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadStatus(p); err == nil {
		t.Error("ReadStatus of a cut file succeeded")
	}
	if _, err := ReadStatus(filepath.Join(dir, "missing")); !os.IsNotExist(err) {
		t.Errorf("ReadStatus of a missing file: %v, want not-exist", err)
	}
}
