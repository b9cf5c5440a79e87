package api

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseGPUBind(t *testing.T) {
	tests := []struct {
		in      string
		want    GPUBind
		wantErr bool
	}{
		{in: "", want: GPUBind{}},
		{in: "closest", want: GPUBind{Kind: "closest"}},
		{in: "c", want: GPUBind{Kind: "closest"}},
		{in: "none", want: GPUBind{Kind: "none"}},
		{in: "verbose,none", want: GPUBind{Verbose: true, Kind: "none"}},
		{in: "map_gpu:1,0", want: GPUBind{Kind: "map_gpu", List: []uint64{1, 0}}},
		{in: "map_gpu:0*2,1", want: GPUBind{Kind: "map_gpu", List: []uint64{0, 0, 1}}},
		{in: "mask_gpu:0x3,c", want: GPUBind{Kind: "mask_gpu", List: []uint64{3, 12}}},
		{in: "single:2", want: GPUBind{Kind: "single", N: 2}},
		{in: "per_task:1", want: GPUBind{Kind: "per_task", N: 1}},
		{in: "single:0", want: GPUBind{}},
		{in: "map_gpu:", wantErr: true},
		{in: "map_gpu:x", wantErr: true},
		{in: "single:-1", wantErr: true},
		{in: "bogus", wantErr: true},
		{in: "verbose,", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseGPUBind(tt.in)
			if tt.wantErr {
				if err == nil || err.Error() != "Invalid --gpu-bind argument: gpu:"+tt.in {
					t.Fatalf("err = %v, want Slurm's message", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Fatalf("(-want +got)\n%s", diff)
			}
		})
	}
}

func TestGPUBindTasks(t *testing.T) {
	gpus := []int{4, 5, 6, 7}
	tests := []struct {
		name    string
		bind    string
		ntasks  int
		gpt     int
		want    [][]int
		wantErr string
	}{
		{name: "all see all", bind: "", ntasks: 2, want: [][]int{gpus, gpus}},
		{name: "per task", ntasks: 2, gpt: 2, want: [][]int{{4, 5}, {6, 7}}},
		{name: "single:2", bind: "single:2", ntasks: 4, want: [][]int{{4}, {4}, {5}, {5}}},
		{name: "map_gpu repeats", bind: "map_gpu:3,0", ntasks: 3, want: [][]int{{7}, {4}, {7}}},
		{name: "mask_gpu", bind: "mask_gpu:0x5", ntasks: 1, want: [][]int{{4, 6}}},
		{name: "closest with per task", bind: "closest", ntasks: 4, gpt: 1, want: [][]int{{4}, {5}, {6}, {7}}},
		{name: "too few GPUs per task", ntasks: 3, gpt: 2, wantErr: "do not fit"},
		{name: "map beyond", bind: "map_gpu:4", ntasks: 1, wantErr: "not among"},
		{name: "mask beyond", bind: "mask_gpu:0x10", ntasks: 1, wantErr: "does not fit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := ParseGPUBind(tt.bind)
			if err != nil {
				t.Fatal(err)
			}
			got, err := b.Tasks(gpus, tt.ntasks, tt.gpt)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Fatalf("(-want +got)\n%s", diff)
			}
		})
	}
	if got, _ := (GPUBind{}).Tasks(nil, 3, 1); got != nil {
		t.Fatalf("no GPUs: %v", got)
	}
}

func TestParseCPUBind(t *testing.T) {
	tests := []struct {
		in      string
		want    CPUBind
		wantErr string
	}{
		{in: "q", want: CPUBind{}},
		{in: "verbose", want: CPUBind{Verbose: true}},
		{in: "v,cores", want: CPUBind{Verbose: true, Unit: "cores"}},
		{in: "none", want: CPUBind{Kind: "none"}},
		{in: "no", want: CPUBind{Kind: "none"}},
		{in: "rank", want: CPUBind{Kind: "rank"}},
		{in: "threads", want: CPUBind{Unit: "threads"}},
		{in: "sockets", want: CPUBind{Unit: "sockets"}},
		{in: "ldoms", want: CPUBind{Unit: "ldoms"}},
		{in: "rank_ldom", want: CPUBind{Kind: "rank_ldom"}},
		{in: "verbose,map_cpu:1,0", want: CPUBind{Verbose: true, Kind: "map_cpu", List: []uint64{1, 0}}},
		{in: "map_cpu:0x2", want: CPUBind{Kind: "map_cpu", List: []uint64{2}}},
		{in: "mask_cpu:0x3,c,0x1*2", want: CPUBind{Kind: "mask_cpu", List: []uint64{3, 12, 1, 1}}},
		{in: "map_ldom:1,0", want: CPUBind{Kind: "map_ldom", List: []uint64{1, 0}}},
		{in: "mask_ldom:0x1", want: CPUBind{Kind: "mask_ldom", List: []uint64{1}}},
		{in: "help", want: CPUBind{Help: true}},
		{in: "bogus", wantErr: `unrecognized --cpu-bind argument "bogus"`},
		{in: "map_cpu", wantErr: `missing list for "--cpu-bind=map_cpu:<list>"`},
		{in: "verbose,map_cpu:NaN", wantErr: "Failed to validate number: NaN, the offending character is N"},
		{in: "mask_cpu:0xg", wantErr: "Failed to validate number: 0xg, the offending character is g"},
		{in: "map_cpu:1*x", wantErr: "Invalid map_cpu multiplier: x"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseCPUBind(tt.in)
			if tt.wantErr != "" {
				var be *CPUBindError
				if !errors.As(err, &be) || !errors.Is(err, ErrCPUBind) || len(be.Lines) != 1 || be.Lines[0] != tt.wantErr {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Fatalf("(-want +got)\n%s", diff)
			}
		})
	}
}

func TestParseStepRef(t *testing.T) {
	tests := []struct {
		in   string
		want StepRef
		ok   bool
	}{
		{"12.0", StepRef{12, 0}, true},
		{"7.15", StepRef{7, 15}, true},
		{"12", StepRef{}, false},
		{"12.batch", StepRef{}, false},
		{"0.1", StepRef{}, false},
		{".1", StepRef{}, false},
		{"12.1.2", StepRef{}, false},
		{"12.-1", StepRef{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, ok := ParseStepRef(tt.in)
			if ok != tt.ok || got != tt.want {
				t.Fatalf("got %v %v, want %v %v", got, ok, tt.want, tt.ok)
			}
			if ok && got.String() != tt.in {
				t.Fatalf("String() = %q", got.String())
			}
		})
	}
}

// TestSignalCommandStepIDsTravel: scancel J.S's step ids survive the
// hand-written node sync encoding.
func TestSignalCommandStepIDsTravel(t *testing.T) {
	want := &NodeSyncResponse{Signals: []SignalCommand{
		{JobRef: JobRef{JobID: 3, Restart: 1}, Signal: 9, Steps: true, StepIDs: []uint32{0, 4}},
		{JobRef: JobRef{JobID: 4}, Signal: 10, Steps: true},
	}}
	checkSyncResponseJSON(t, "step ids", want)
	data, err := want.AppendJSON(nil)
	if err != nil {
		t.Fatal(err)
	}
	var got NodeSyncResponse
	if err := DecodeNodeSyncResponse(data, &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, &got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}
