package api

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/internal/jsonfast"
)

func TestSummarizeUsage(t *testing.T) {
	tests := []struct {
		name    string
		reports []NodeUsage
		want    *StepUsage
	}{
		{name: "none", want: nil},
		{
			name: "one batch task",
			reports: []NodeUsage{{JobID: 7, StepID: BatchStepID, Node: "n1", UserID: 1000, Final: true,
				Tasks: []TaskUsage{{Task: 0, UserUsec: 1_200_000, SystemUsec: 300_000, RSS: 5 << 20, VMSize: 9 << 20, Pages: 2, ReadBytes: 10, WriteBytes: 20}}}},
			want: &StepUsage{JobID: 7, StepID: BatchStepID, UserID: 1000, Nodes: 1, Tasks: 1, Final: true,
				UserUsec: 1_200_000, SystemUsec: 300_000,
				CPU:       UsageStat{Tot: 1_500_000, Max: 1_500_000, MaxNode: "n1", Min: 1_500_000, MinNode: "n1"},
				RSS:       UsageStat{Tot: 5 << 20, Max: 5 << 20, MaxNode: "n1", Min: 5 << 20, MinNode: "n1"},
				VMSize:    UsageStat{Tot: 9 << 20, Max: 9 << 20, MaxNode: "n1", Min: 9 << 20, MinNode: "n1"},
				Pages:     UsageStat{Tot: 2, Max: 2, MaxNode: "n1", Min: 2, MinNode: "n1"},
				DiskRead:  UsageStat{Tot: 10, Max: 10, MaxNode: "n1", Min: 10, MinNode: "n1"},
				DiskWrite: UsageStat{Tot: 20, Max: 20, MaxNode: "n1", Min: 20, MinNode: "n1"},
				GPUMem:    UsageStat{MaxNode: "n1", MinNode: "n1"},
				GPUUtil:   UsageStat{MaxNode: "n1", MinNode: "n1"},
			},
		},
		{
			// Reports in any order; ties go to the first node by name
			// and the lowest rank; a cgroup that saw more CPU and I/O
			// than the tasks raises the node's totals, not the tasks'.
			name: "two nodes, a cgroup, a running node",
			reports: []NodeUsage{
				{JobID: 9, StepID: 1, Node: "n2", GPU: true, Cgroup: &CgroupTotals{UserUsec: 50, SystemUsec: 1, HasIO: true, ReadBytes: 1000, WriteBytes: 1},
					Tasks: []TaskUsage{{Task: 3, UserUsec: 10, RSS: 300, GPUMem: 7, GPUUtil: 90}, {Task: 2, UserUsec: 10, RSS: 100, ReadBytes: 5, WriteBytes: 5}}},
				{JobID: 9, StepID: 1, Node: "n1", Final: true,
					Tasks: []TaskUsage{{Task: 1, UserUsec: 10, SystemUsec: 5, RSS: 300}, {Task: 0, UserUsec: 1, RSS: 100}}},
			},
			want: &StepUsage{JobID: 9, StepID: 1, Nodes: 2, Tasks: 4, Final: false, GPU: true,
				UserUsec: 11 + 50, SystemUsec: 5 + 1,
				CPU:       UsageStat{Tot: 67, Max: 15, MaxNode: "n1", MaxTask: 1, Min: 1, MinNode: "n1", MinTask: 0},
				RSS:       UsageStat{Tot: 800, Max: 300, MaxNode: "n1", MaxTask: 1, Min: 100, MinNode: "n1", MinTask: 0},
				VMSize:    UsageStat{MaxNode: "n1", MinNode: "n1"},
				Pages:     UsageStat{MaxNode: "n1", MinNode: "n1"},
				DiskRead:  UsageStat{Tot: 1000, Max: 5, MaxNode: "n2", MaxTask: 2, Min: 0, MinNode: "n1"},
				DiskWrite: UsageStat{Tot: 5, Max: 5, MaxNode: "n2", MaxTask: 2, Min: 0, MinNode: "n1"},
				GPUMem:    UsageStat{Tot: 7, Max: 7, MaxNode: "n2", MaxTask: 3, MinNode: "n1"},
				GPUUtil:   UsageStat{Tot: 90, Max: 90, MaxNode: "n2", MaxTask: 3, MinNode: "n1"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, SummarizeUsage(tt.reports)); diff != "" {
				t.Errorf("SummarizeUsage (-want +got):\n%s", diff)
			}
		})
	}
}

func TestUsageStatAve(t *testing.T) {
	s := UsageStat{Tot: 10}
	if s.Ave(0) != 0 || s.Ave(3) != 3 || s.Ave(1) != 10 {
		t.Errorf("Ave: %d %d %d", s.Ave(0), s.Ave(3), s.Ave(1))
	}
}

// TestNodeUsageJSONMatchesEncodingJSON: the generated writer produces
// json.Marshal's bytes and the generated reader takes them back to the same
// value, for edge cases and random fills.
func TestNodeUsageJSONMatchesEncodingJSON(t *testing.T) {
	cases := []*NodeUsage{
		{},
		{Tasks: []TaskUsage{}},
		{Cgroup: &CgroupTotals{}, Tasks: []TaskUsage{{}}},
		{JobID: 1, StepID: BatchStepID, Restart: 2, Node: "gpu01", UserID: 1000, Final: true, GPU: true, Samples: 3,
			Cgroup: &CgroupTotals{UserUsec: 1, SystemUsec: 2, ReadBytes: 3, WriteBytes: 4, HasIO: true},
			Tasks:  []TaskUsage{{Task: 5, UserUsec: 1, SystemUsec: 2, RSS: 3, VMSize: 4, Pages: 5, ReadBytes: 6, WriteBytes: 7, GPUMem: 8, GPUUtil: 9}}},
	}
	for seed := range uint64(300) {
		f := filler{t: t, rng: rand.New(rand.NewPCG(seed, 5)), zeroOdds: int(seed % 3)}
		var u NodeUsage
		fillSync(&f, reflect.ValueOf(&u).Elem())
		cases = append(cases, &u)
	}
	for i, u := range cases {
		want, err := json.Marshal(u)
		if err != nil {
			t.Fatal(err)
		}
		got := u.AppendJSON(nil)
		if string(got) != string(want) {
			t.Fatalf("case %d: AppendJSON\n got %s\nwant %s", i, got, want)
		}
		var back NodeUsage
		if !DecodeNodeUsageJSON(jsonfast.New(got), &back) {
			t.Fatalf("case %d: the generated reader refused %s", i, got)
		}
		var ref NodeUsage
		if err := json.Unmarshal(got, &ref); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(ref, back); diff != "" {
			t.Fatalf("case %d: decoded (-encoding/json +hand):\n%s", i, diff)
		}
	}
}

// TestDecodeNodeUsageOddInput: what the reader takes beyond what the
// writer produces (repeated keys, null), it reads as encoding/json
// does; what it cannot read so, it leaves to encoding/json.
func TestDecodeNodeUsageOddInput(t *testing.T) {
	for _, tc := range []struct {
		in     string
		refuse bool
	}{
		{in: `{"job_id":1,"job_id":2,"tasks":[]}`},
		{in: `{"tasks":[{"task":1,"task":2}]}`},
		{in: `{"tasks":[{"rss":1,"rss":2}]}`},
		{in: `{"cgroup":{"has_io":true,"has_io":false},"tasks":null}`},
		{in: `{"cgroup":{"user_usec":1},"cgroup":{"has_io":true},"tasks":null}`},
		{in: `{"cgroup":null,"tasks":[]}`},
		{in: `{"tasks":[{"task":1}],"tasks":[{"rss":2}]}`, refuse: true}, // encoding/json merges
		{in: `{"unknown":1}`, refuse: true},
		{in: `{"tasks":[{"rss":-1}]}`, refuse: true},
		{in: `{"tasks":[null]}`, refuse: true},
		{in: `{"job_id":null}`, refuse: true},
	} {
		var u NodeUsage
		ok := DecodeNodeUsageJSON(jsonfast.New([]byte(tc.in)), &u)
		if ok == tc.refuse {
			t.Errorf("%s: reader took it %v, want %v", tc.in, ok, !tc.refuse)
			continue
		}
		if !ok {
			continue
		}
		var ref NodeUsage
		if err := json.Unmarshal([]byte(tc.in), &ref); err != nil {
			t.Errorf("%s: the reader took what encoding/json refuses: %v", tc.in, err)
			continue
		}
		if diff := cmp.Diff(ref, u); diff != "" {
			t.Errorf("%s: decoded (-encoding/json +reader):\n%s", tc.in, diff)
		}
	}
	// What it refuses, the protocol's decoders hand to encoding/json.
	var r NodeSyncRequest
	if err := DecodeNodeSyncRequest([]byte(`{"name":"n","usage":[{"job_id":1,"job_id":2,"tasks":null}]}`), &r); err != nil || len(r.Usage) != 1 || r.Usage[0].JobID != 2 {
		t.Errorf("fallback decode: %+v, %v", r.Usage, err)
	}
}
