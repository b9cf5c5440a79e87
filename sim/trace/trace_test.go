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
				{ID: "b", Submit: 100, Start: -1, End: -1, Duration: 1, GPUs: 1, Share: 1, Queue: "gpu", Line: 3},
				{ID: "c", Submit: 200, Start: -1, End: -1, Duration: 1, GPUs: 1, Share: 1, Queue: "other", Line: 4},
			},
		},
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

func TestConvertSacct(t *testing.T) {
	f, err := os.Open("testdata/sacct.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	jobs, err := ConvertSacct(f, "sacct.txt", time.UTC)
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
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden (run with -update): %v", err)
	}
	if diff := cmp.Diff(string(want), b.String()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	// The converted trace reads back.
	if _, err := Parse(&b, "sacct.csv", Options{}); err != nil {
		t.Errorf("converted trace does not parse: %v", err)
	}
}

func TestConvertSacctErrors(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{name: "no header fields", in: "JobID|Submit\n1|2024-01-01T00:00:00\n", want: "sacct header lacks Start"},
		{name: "bad submit", in: "JobID|Submit|Start|End|Elapsed|AllocTRES|User|Account|State\n1|yesterday|||00:00:01||u|a|COMPLETED\n", want: "in:2: Submit"},
		{name: "bad gpus", in: "JobID|Submit|Start|End|Elapsed|AllocTRES|User|Account|State\n1|2024-01-01T00:00:00|||00:00:01|gres/gpu=x|u|a|COMPLETED\n", want: "in:2: AllocTRES"},
		{name: "empty", in: "", want: "empty input"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ConvertSacct(strings.NewReader(tc.in), "in", time.UTC)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
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
