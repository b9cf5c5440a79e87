package trace

import (
	"bytes"
	"compress/gzip"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/ctld/api"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

const header = "job_id,submit_time,start_time,end_time,duration,num_gpus,gpu_share,user,queue,status\n"

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		opts    Options
		want    []Job
		wantErr string
	}{
		{
			name: "rows",
			in:   header + "a,0,,,100,8,1.0,,vc1,\nb,5,5,10,5,1,0.5,u,vc2,Running\nc,7,,,,2,1.0,,vc1,Pending\n",
			want: []Job{
				{ID: "a", Submit: 0, Start: -1, End: -1, Duration: 100, GPUs: 8, Share: 1, Queue: "vc1", Line: 2},
				{ID: "b", Submit: 5, Start: 5, End: 10, Duration: 5, GPUs: 1, Share: 0.5, User: "u", Queue: "vc2", Status: "Running", Line: 3},
				{ID: "c", Submit: 7, Start: -1, End: -1, Duration: -1, GPUs: 2, Share: 1, Queue: "vc1", Status: "Pending", Line: 4},
			},
		},
		{
			name: "columns in another order, extra ignored",
			in:   "num_gpus,extra,duration,submit_time,job_id\n4,x,60,3,j1\n",
			want: []Job{{ID: "j1", Submit: 3, Start: -1, End: -1, Duration: 60, GPUs: 4, Share: 1, Line: 2}},
		},
		{
			name: "window, load and queue map",
			in:   header + "a,50,,,1,1,1.0,,vc1,\nb,100,,,1,1,1.0,,vc2,\nc,300,,,1,1,1.0,,vc3,\nd,400,,,1,1,1.0,,vc1,\n",
			opts: Options{From: 100, To: 400, Load: 2, QueueMap: map[string]string{"vc2": "gpu", "*": "other"}},
			want: []Job{
				{ID: "b", Submit: 100, Start: -1, End: -1, Duration: 1, GPUs: 1, Share: 1, Queue: "vc2", Partition: "gpu", Line: 3},
				{ID: "c", Submit: 200, Start: -1, End: -1, Duration: 1, GPUs: 1, Share: 1, Queue: "vc3", Partition: "other", Line: 4},
			},
		},
		{
			name: "optional columns: time limit, CPUs, censored",
			in: strings.TrimSuffix(header, "\n") + ",time_limit,num_cpus,censored\n" +
				"a,0,0,,3600,0,1.0,,q,RUNNING,7200,16,1\nb,1,,,60,1,1.0,,q,,,,0\nc,2,,,60,1,1.0,,q,,,,\n",
			want: []Job{
				{ID: "a", Submit: 0, Start: 0, End: -1, Duration: 3600, Share: 1, Queue: "q", Status: "RUNNING", TimeLimit: 7200, CPUs: 16, Censored: true, Line: 2},
				{ID: "b", Submit: 1, Start: -1, End: -1, Duration: 60, GPUs: 1, Share: 1, Queue: "q", Line: 3},
				{ID: "c", Submit: 2, Start: -1, End: -1, Duration: 60, GPUs: 1, Share: 1, Queue: "q", Line: 4},
			},
		},
		{name: "bad time limit", in: "job_id,submit_time,duration,num_gpus,time_limit\na,0,1,1,0\n", wantErr: "t.csv:2: time_limit: \"0\" is not a positive number of seconds"},
		{name: "bad cpus", in: "job_id,submit_time,duration,num_gpus,num_cpus\na,0,1,0,-3\n", wantErr: "t.csv:2: num_cpus"},
		{name: "bad censored", in: "job_id,submit_time,duration,num_gpus,censored\na,0,1,0,yes\n", wantErr: "t.csv:2: censored: \"yes\" is not 0 or 1"},
		{name: "bad gpus", in: header + "a,0,,,1,1,1.0,,q,\nb,0,,,1,two,1.0,,q,\n", wantErr: "t.csv:3: num_gpus: \"two\" is not a non-negative integer"},
		{name: "bad submit", in: header + "a,x,,,1,1,1.0,,q,\n", wantErr: "t.csv:2: submit_time"},
		{name: "bad share", in: header + "a,0,,,1,1,1.5,,q,\n", wantErr: "t.csv:2: gpu_share"},
		{name: "negative duration", in: header + "a,0,,,-4,1,1.0,,q,\n", wantErr: "t.csv:2: duration"},
		{name: "missing column", in: "job_id,submit_time\na,0\n", wantErr: "t.csv:1: header lacks column duration"},
		{name: "empty", in: "", wantErr: "empty trace"},
		{name: "bad load", in: header, opts: Options{Load: -1}, wantErr: "load factor"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(strings.NewReader(tc.in), "t.csv", tc.opts)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				if !errors.Is(err, api.ErrInvalidArgument) {
					t.Errorf("err = %v, want ErrInvalidArgument", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestReadGzipAndRoundTrip(t *testing.T) {
	jobs := []Job{
		{ID: "a", Submit: 0, Start: 1, End: 11, Duration: 10, GPUs: 2, Share: 1, Queue: "q", Status: "COMPLETED"},
		{ID: "b", Submit: 4, Start: -1, End: -1, Duration: -1, GPUs: 1, Share: 0.25, User: "u"},
		{ID: "c", Submit: 5, Start: 6, End: -1, Duration: 30, CPUs: 4, Share: 1, TimeLimit: 600, Censored: true},
	}
	var csv bytes.Buffer
	if err := Write(&csv, jobs); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "t.csv.gz")
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(csv.Bytes())
	zw.Close()
	if err := os.WriteFile(path, gz.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := Read(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range got {
		got[i].Line = 0
	}
	if diff := cmp.Diff(jobs, got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}

// TestWriteLeavesOptionalColumnsOut writes a trace without time limits,
// CPU counts or censored jobs in exactly the shared traces' schema.
func TestWriteLeavesOptionalColumnsOut(t *testing.T) {
	var b bytes.Buffer
	if err := Write(&b, []Job{{ID: "a", Duration: 5, GPUs: 1, Share: 1, Start: -1, End: -1}}); err != nil {
		t.Fatal(err)
	}
	if want := header + "a,0,,,5,1,1.0,,,\n"; b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
}

func TestParseWindow(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		from, to int64
		err      bool
	}{
		{name: "empty", in: ""},
		{name: "seconds", in: "10,20", from: 10, to: 20},
		{name: "units", in: "30d,1.5h", err: true},
		{name: "days", in: "30d,60d", from: 30 * 86400, to: 60 * 86400},
		{name: "open end", in: "2h,", from: 7200},
		{name: "no comma", in: "5", err: true},
		{name: "bad", in: "x,5", err: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			from, to, err := ParseWindow(tc.in)
			if (err != nil) != tc.err {
				t.Fatalf("err = %v, want error %v", err, tc.err)
			}
			if !tc.err && (from != tc.from || to != tc.to) {
				t.Errorf("ParseWindow(%q) = %d, %d; want %d, %d", tc.in, from, to, tc.from, tc.to)
			}
		})
	}
}

func TestParseQueueMap(t *testing.T) {
	got, err := ParseQueueMap("a=gpu, b=debug,*=gpu")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"a": "gpu", "b": "debug", "*": "gpu"}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for _, bad := range []string{"a", "a=", "a=x,a=y"} {
		if _, err := ParseQueueMap(bad); err == nil {
			t.Errorf("ParseQueueMap(%q): no error", bad)
		}
	}
}

// TestConvertSacct converts a dump with every kind of row a real one
// holds: a step line, a typed-GPU job, a job that never started, a
// zero-length NODE_FAIL, a running and a pending job (censored), a
// CPU-only job, and two bad rows (left out, each reported with its
// line).
func TestConvertSacct(t *testing.T) {
	f, err := os.Open("testdata/sacct.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var warnings []string
	jobs, err := ConvertSacct(f, "sacct.txt", ConvertOptions{Loc: time.UTC,
		Skipped: func(err error) { warnings = append(warnings, err.Error()) },
		Note:    func(s string) { t.Errorf("unexpected note %q", s) }})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := Write(&b, jobs); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", "sacct.csv.golden")
	if *update {
		os.WriteFile(path, b.Bytes(), 0o644)
	} else {
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("read golden (run with -update): %v", err)
		}
		if diff := cmp.Diff(string(want), b.String()); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	}
	wantWarn := []string{
		`sacct.txt:11: Submit: "yesterday" is not a time like 2024-01-02T15:04:05`,
		`sacct.txt:12: Timelimit: "forever" is not a Slurm time limit ([D-]HH:MM:SS, MM:SS, minutes, UNLIMITED, Partition_Limit)`,
	}
	if diff := cmp.Diff(wantWarn, warnings); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
	// The converted trace reads back, with what each kind of row became.
	back, err := Parse(&b, "sacct.csv", Options{})
	if err != nil {
		t.Fatalf("converted trace does not parse: %v", err)
	}
	byID := map[string]Job{}
	for _, j := range back {
		j.Line = 0
		byID[j.ID] = j
	}
	for _, tc := range []struct {
		name string
		id   string
		want Job
	}{
		{name: "typed GPUs, limit in days", id: "102", want: Job{ID: "102", Submit: 0, Start: 86400, End: 176400, Duration: 90000,
			GPUs: 8, CPUs: 16, Share: 1, User: "bob", Queue: "gpu", Status: "TIMEOUT", TimeLimit: 90000}},
		{name: "never started", id: "103", want: Job{ID: "103", Submit: 1860, Start: -1, End: -1, Duration: -1,
			GPUs: 0, CPUs: 1, Share: 1, User: "carol", Queue: "gpu", Status: "CANCELLED", TimeLimit: 1800}},
		{name: "zero-length kept", id: "105", want: Job{ID: "105", Submit: 2460, Start: 2760, End: 2760, Duration: 0,
			GPUs: 1, CPUs: 8, Share: 1, User: "erin", Queue: "gpu", Status: "NODE_FAIL"}},
		{name: "running: censored, ran at least its elapsed time", id: "106", want: Job{ID: "106", Submit: 3660, Start: 3960, End: -1,
			Duration: 9000, GPUs: 4, CPUs: 32, Share: 1, User: "frank", Queue: "gpu", Status: "RUNNING", TimeLimit: 43200, Censored: true}},
		{name: "pending: censored, first partition of its list", id: "107", want: Job{ID: "107", Submit: 4260, Start: -1, End: -1,
			Duration: -1, Share: 1, User: "grace", Queue: "gpu", Status: "PENDING", TimeLimit: 172800, Censored: true}},
		{name: "CPU-only keeps its CPUs", id: "108", want: Job{ID: "108", Submit: 4860, Start: 4870, End: 6670, Duration: 1800,
			GPUs: 0, CPUs: 16, Share: 1, User: "heidi", Queue: "cpu", Status: "COMPLETED", TimeLimit: 2700}},
	} {
		if diff := cmp.Diff(tc.want, byID[tc.id]); diff != "" {
			t.Errorf("%s: job %s (-want +got):\n%s", tc.name, tc.id, diff)
		}
	}
	if _, ok := byID["101.batch"]; ok {
		t.Errorf("a step line became a job")
	}
}

// TestConvertSacctQueueFrom takes the queue from the Partition (the
// default) or the Account, and accepts an older dump without Partition
// and Timelimit when the queue comes from the Account (with a note that
// the limits stay unknown).
func TestConvertSacctQueueFrom(t *testing.T) {
	newDump := "JobID|Submit|Start|End|Elapsed|Timelimit|AllocTRES|User|Account|Partition|State\n" +
		"1|2024-01-01T00:00:00|2024-01-01T00:00:00|2024-01-01T00:01:00|00:01:00|5|gres/gpu=1|u|vision|gpu|COMPLETED\n"
	oldDump := "JobID|Submit|Start|End|Elapsed|AllocTRES|User|Account|State\n" +
		"1|2024-01-01T00:00:00|2024-01-01T00:00:00|2024-01-01T00:01:00|00:01:00|gres/gpu=1|u|vision|COMPLETED\n"
	tests := []struct {
		name, in, from string
		wantQueue      string
		wantLimit      int64
		wantNote       string
		wantErr        string
	}{
		{name: "partition by default", in: newDump, wantQueue: "gpu", wantLimit: 300},
		{name: "partition", in: newDump, from: QueueFromPartition, wantQueue: "gpu", wantLimit: 300},
		{name: "account", in: newDump, from: QueueFromAccount, wantQueue: "vision", wantLimit: 300},
		{name: "old dump by account", in: oldDump, from: QueueFromAccount, wantQueue: "vision", wantNote: "lacks Timelimit"},
		{name: "old dump by partition", in: oldDump, wantErr: "in:1: sacct header lacks Partition"},
		{name: "unknown source", in: newDump, from: "qos", wantErr: `queue source "qos" is not partition or account`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var notes []string
			jobs, err := ConvertSacct(strings.NewReader(tc.in), "in", ConvertOptions{QueueFrom: tc.from,
				Note: func(s string) { notes = append(notes, s) }})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				if !errors.Is(err, api.ErrInvalidArgument) {
					t.Errorf("err = %v, want ErrInvalidArgument", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(jobs) != 1 || jobs[0].Queue != tc.wantQueue || jobs[0].TimeLimit != tc.wantLimit {
				t.Fatalf("jobs = %+v, want one with queue %s and limit %d", jobs, tc.wantQueue, tc.wantLimit)
			}
			if got := strings.Join(notes, "\n"); tc.wantNote == "" && got != "" || !strings.Contains(got, tc.wantNote) {
				t.Errorf("notes %q, want %q", got, tc.wantNote)
			}
		})
	}
}

func TestConvertSacctErrors(t *testing.T) {
	const head = "JobID|Submit|Start|End|Elapsed|Timelimit|AllocTRES|User|Account|Partition|State\n"
	tests := []struct {
		name, in, want string
	}{
		{name: "no header fields", in: "JobID|Submit\n1|2024-01-01T00:00:00\n", want: "sacct header lacks Start"},
		{name: "bad submit", in: head + "1|yesterday|||00:00:01||||u|a|p|COMPLETED\n", want: "in:2: Submit"},
		{name: "bad start", in: head + "1|2024-01-01T00:00:00|soon||00:00:01||||u|a|p|COMPLETED\n", want: "in:2: Start"},
		{name: "bad gpus", in: head + "1|2024-01-01T00:00:00|||00:00:01||gres/gpu=x|u|a|p|COMPLETED\n", want: "in:2: AllocTRES"},
		{name: "bad cpus", in: head + "1|2024-01-01T00:00:00|||00:00:01||cpu=-2|u|a|p|COMPLETED\n", want: "in:2: AllocTRES"},
		{name: "bad elapsed", in: head + "1|2024-01-01T00:00:00|2024-01-01T00:00:00||1:75:00||cpu=1|u|a|p|COMPLETED\n", want: "in:2: Elapsed"},
		{name: "bad limit", in: head + "1|2024-01-01T00:00:00|||00:00:01|0|cpu=1|u|a|p|COMPLETED\n", want: "in:2: Timelimit"},
		{name: "short row", in: head + "1|2024-01-01T00:00:00\n", want: "in:2: 2 fields, the header has 11"},
		{name: "empty", in: "", want: "empty input"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ConvertSacct(strings.NewReader(tc.in), "in", ConvertOptions{Strict: true})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("strict: err = %v, want one containing %q", err, tc.want)
			}
			if !errors.Is(err, api.ErrInvalidArgument) {
				t.Errorf("err = %v, want ErrInvalidArgument", err)
			}
			if !strings.HasPrefix(tc.in, head) {
				return
			}
			// Not strict: the row is reported and left out.
			var warned []error
			jobs, err := ConvertSacct(strings.NewReader(tc.in), "in", ConvertOptions{Skipped: func(err error) { warned = append(warned, err) }})
			if err != nil || len(jobs) != 0 || len(warned) != 1 || !strings.Contains(warned[0].Error(), tc.want) {
				t.Errorf("lenient: jobs %v, err %v, warnings %v; want the row left out with a warning containing %q", jobs, err, warned, tc.want)
			}
		})
	}
}

func TestParseElapsed(t *testing.T) {
	for in, want := range map[string]int64{"00:00:00": 0, "00:10:00": 600, "05:07": 307, "1-01:00:00": 90000, "12-00:00:01": 1036801} {
		if got, err := parseElapsed(in); err != nil || got != want {
			t.Errorf("parseElapsed(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "10", "1:2:3:4", "x:00", "00:60", "-1:00:00", "1-"} {
		if _, err := parseElapsed(in); err == nil {
			t.Errorf("parseElapsed(%q): no error", in)
		}
	}
}

func TestParseTimelimit(t *testing.T) {
	for in, want := range map[string]int64{"UNLIMITED": 0, "Partition_Limit": 0, "": 0, "30": 1800, "05:00": 300,
		"04:00:00": 14400, "2-00:00:00": 172800, "1-12": 129600} {
		if got, err := parseTimelimit(in); err != nil || got != want {
			t.Errorf("parseTimelimit(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"0", "forever", "1:2:3:4"} {
		if _, err := parseTimelimit(in); err == nil {
			t.Errorf("parseTimelimit(%q): no error", in)
		}
	}
}

// TestParseInterns checks that jobs share one copy of each queue, user
// and status: a trace of 80,000 jobs names a handful.
func TestParseInterns(t *testing.T) {
	in := header + "a,0,,,100,8,1.0,u1,vc1,Done\nb,5,,,5,1,1.0,u1,vc2,Done\nc,7,,,9,2,1.0,u1,vc1,Done\n"
	jobs, err := Parse(strings.NewReader(in), "t.csv", Options{})
	if err != nil {
		t.Fatal(err)
	}
	same := func(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }
	if !same(jobs[0].Queue, jobs[2].Queue) || !same(jobs[0].User, jobs[1].User) || !same(jobs[0].Status, jobs[2].Status) {
		t.Errorf("jobs hold copies of the same queue, user or status")
	}
	if same(jobs[0].Queue, jobs[1].Queue) {
		t.Errorf("queues vc1 and vc2 share their bytes")
	}
}
