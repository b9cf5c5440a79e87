package sched_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/sched"
	st "github.com/tide-hpc/tide/ctld/sched/schedtest"
)

func TestParseConstraint(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		names   []string
		alts    int
		wantErr string
	}{
		{name: "empty is no constraint", in: "  ", alts: 1},
		{name: "single", in: "nvlink", names: []string{"nvlink"}, alts: 1},
		{name: "and", in: "ib&nvlink", names: []string{"ib", "nvlink"}, alts: 1},
		{name: "comma is and", in: "ib,nvlink", names: []string{"ib", "nvlink"}, alts: 1},
		{name: "or", in: "a100|h100", names: []string{"a100", "h100"}, alts: 1},
		{name: "grouping", in: "(ib|roce)&containerd", names: []string{"containerd", "ib", "roce"}, alts: 1},
		{name: "matching or", in: "[rack1|rack2|rack3]", names: []string{"rack1", "rack2", "rack3"}, alts: 3},
		{name: "matching or with and", in: "nvlink&[r1|r2]", names: []string{"nvlink", "r1", "r2"}, alts: 2},
		{name: "bracket without or groups", in: "[a&b]", names: []string{"a", "b"}, alts: 1},
		{name: "spaces around operators", in: " a & b ", names: []string{"a", "b"}, alts: 1},
		{name: "dots and dashes in names", in: "cpu.gen-4_x", names: []string{"cpu.gen-4_x"}, alts: 1},
		{name: "count refused", in: "nvlink*2", wantErr: "node counts"},
		{name: "multiple counts refused", in: "[a*2&b*4]", wantErr: "node counts"},
		{name: "negation refused", in: "!a", wantErr: "negated"},
		{name: "dangling and", in: "a&", wantErr: "missing at the end"},
		{name: "double operator", in: "a||b", wantErr: "missing before"},
		{name: "leading operator", in: "&a", wantErr: "missing before"},
		{name: "unclosed paren", in: "(a|b", wantErr: "missing )"},
		{name: "stray paren", in: "a)", wantErr: "unexpected"},
		{name: "unclosed bracket", in: "[a|b", wantErr: "missing ]"},
		{name: "nested brackets", in: "[a|[b|c]]", wantErr: "cannot nest"},
		{name: "two bracket groups", in: "[a|b]&[c|d]", wantErr: "only one"},
		{name: "space inside a name", in: "a b", wantErr: "unexpected"},
		{name: "too many terms", in: strings.Repeat("(a|b|c|d)&", 5) + "(e|f)", wantErr: "more than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := sched.ParseConstraint(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, sched.ErrConstraint) {
					t.Fatalf("ParseConstraint(%q) error = %v, want ErrConstraint containing %q", tt.in, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseConstraint(%q): %v", tt.in, err)
			}
			if diff := cmp.Diff(tt.names, c.Names()); diff != "" {
				t.Errorf("Names (-want +got):\n%s", diff)
			}
			if got := c.Alternatives(); got != tt.alts {
				t.Errorf("Alternatives = %d, want %d", got, tt.alts)
			}
		})
	}
}

func TestConstraintMatch(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		features []string
		want     []bool // per alternative
	}{
		{name: "has it", in: "nvlink", features: []string{"ib", "nvlink"}, want: []bool{true}},
		{name: "lacks it", in: "nvlink", features: []string{"ib"}, want: []bool{false}},
		{name: "no features", in: "nvlink", want: []bool{false}},
		{name: "case matters", in: "NVLink", features: []string{"nvlink"}, want: []bool{false}},
		{name: "and needs both", in: "ib&nvlink", features: []string{"nvlink"}, want: []bool{false}},
		{name: "and with both", in: "ib&nvlink", features: []string{"nvlink", "ib"}, want: []bool{true}},
		{name: "or needs one", in: "ib|nvlink", features: []string{"nvlink"}, want: []bool{true}},
		{name: "and binds tighter than or", in: "a|b&c", features: []string{"a"}, want: []bool{true}},
		{name: "and binds tighter: b alone fails", in: "a|b&c", features: []string{"b"}, want: []bool{false}},
		{name: "parentheses regroup", in: "(a|b)&c", features: []string{"a"}, want: []bool{false}},
		{name: "parentheses regroup ok", in: "(a|b)&c", features: []string{"b", "c"}, want: []bool{true}},
		{name: "matching or per alternative", in: "[r1|r2]", features: []string{"r2"}, want: []bool{false, true}},
		{name: "and outside brackets", in: "nvlink&[r1|r2]", features: []string{"r1"}, want: []bool{false, false}},
		{name: "and outside brackets ok", in: "nvlink&[r1|r2]", features: []string{"r1", "nvlink"}, want: []bool{true, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := sched.ParseConstraint(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			var got []bool
			for k := range c.Alternatives() {
				got = append(got, c.Match(k, tt.features))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Match per alternative (-want +got):\n%s", diff)
			}
			any := false
			for _, ok := range tt.want {
				any = any || ok
			}
			if c.MatchAny(tt.features) != any {
				t.Errorf("MatchAny = %v, want %v", !any, any)
			}
		})
	}
}

// featureCluster is four 4-GPU nodes: n1 (r1, ib), n2 (r1, nvlink), n3
// (r2, nvlink, containerd), n4 (r2, nvlink); used lists GPUs in use
// per node.
func featureCluster(used map[string][]int, jobs ...*api.Job) *sched.Snapshot {
	feats := map[string][]string{
		"n1": {"ib", "r1"}, "n2": {"nvlink", "r1"}, "n3": {"containerd", "nvlink", "r2"}, "n4": {"nvlink", "r2"},
	}
	w := st.MakeSnapshot()
	for _, name := range []string{"n1", "n2", "n3", "n4"} {
		n := st.MakeNode(name).CPUs(32).Mem(64000).GPUs(4).Model("h100").UsedGPUs(used[name]...).Obj()
		n.Features = feats[name]
		w.Nodes(n)
	}
	return w.Partitions(st.MakePartition("gpu", "n1", "n2", "n3", "n4").Obj()).Jobs(jobs...).Obj()
}

// constrained is a job with --constraint c.
func constrained(jw *st.JobWrapper, c string) *api.Job {
	j := jw.Obj()
	j.Constraint = c
	return j
}

func TestScheduleFeatures(t *testing.T) {
	busy := []int{0, 1, 2, 3}
	tests := []struct {
		name       string
		used       map[string][]int
		job        *api.Job
		wantNodes  string // comma-separated, "" when pending
		wantReason api.ReasonCode
		wantDetail string
	}{
		{
			name:      "plain feature picks the only node with it",
			job:       constrained(st.MakeJob().ID(1).Partition("gpu").GPUs(1), "ib"),
			wantNodes: "n1",
		},
		{
			name:      "container job goes to the containerd node",
			job:       constrained(st.MakeJob().ID(1).Partition("gpu").GPUs(4), "containerd"),
			wantNodes: "n3",
		},
		{
			name:      "and",
			job:       constrained(st.MakeJob().ID(1).Partition("gpu").GPUs(1), "nvlink&r1"),
			wantNodes: "n2",
		},
		{
			name:      "per-node or may mix alternatives",
			job:       constrained(st.MakeJob().ID(1).Partition("gpu").Nodes(2).GPUsPerNode(4), "ib|containerd"),
			wantNodes: "n1,n3",
		},
		{
			name:      "matching or keeps one alternative",
			used:      map[string][]int{"n2": busy},
			job:       constrained(st.MakeJob().ID(1).Partition("gpu").Nodes(2).GPUsPerNode(4), "[r1|r2]"),
			wantNodes: "n3,n4",
		},
		{
			name:      "matching or tries alternatives in order",
			job:       constrained(st.MakeJob().ID(1).Partition("gpu").Nodes(2).GPUsPerNode(4), "[r2|r1]"),
			wantNodes: "n3,n4",
		},
		{
			name:       "matching or pends when no alternative has room",
			used:       map[string][]int{"n2": busy, "n4": busy},
			job:        constrained(st.MakeJob().ID(1).Partition("gpu").Nodes(2).GPUsPerNode(4), "[r1|r2]"),
			wantReason: api.ReasonResources,
			wantDetail: "1/4 nodes available: 2 NodeFeatures, 1 InsufficientGPU",
		},
		{
			name:       "busy feature nodes: Resources with a histogram",
			used:       map[string][]int{"n2": busy, "n3": busy, "n4": busy},
			job:        constrained(st.MakeJob().ID(1).Partition("gpu").GPUs(1), "nvlink"),
			wantReason: api.ReasonResources,
			wantDetail: "0/4 nodes available: 3 InsufficientGPU, 1 NodeFeatures",
		},
		{
			name:       "feature no node has",
			job:        constrained(st.MakeJob().ID(1).Partition("gpu").GPUs(1), "roce"),
			wantReason: api.ReasonBadConstraints,
			wantDetail: "no node of partition gpu has features matching --constraint=roce",
		},
		{
			name:       "too few nodes with the feature",
			job:        constrained(st.MakeJob().ID(1).Partition("gpu").Nodes(2).GPUsPerNode(1), "ib"),
			wantReason: api.ReasonBadConstraints,
			wantDetail: "2 nodes with 1 CPUs, 1 GPUs requested, partition gpu has 1 that can hold it",
		},
		{
			name:       "constraint stored before submit checks",
			job:        constrained(st.MakeJob().ID(1).Partition("gpu").GPUs(1), "ib*2"),
			wantReason: api.ReasonBadConstraints,
			wantDetail: `invalid constraint "ib*2" at offset 2: node counts (feature*N) are not supported; ask for the feature on every node or split the job`,
		},
		{
			name:       "required node without the feature",
			job:        constrained(st.MakeJob().ID(1).Partition("gpu").GPUs(1).NodeList("n1"), "nvlink"),
			wantReason: api.ReasonBadConstraints,
			wantDetail: "required node n1 can never hold 1 CPUs, 1 GPUs: NodeFeatures",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan := sched.Schedule(featureCluster(tt.used, tt.job), now, sched.Config{})
			var got string
			if len(plan.Starts) == 1 {
				var names []string
				for _, a := range plan.Starts[0].Alloc {
					names = append(names, a.Node)
				}
				got = strings.Join(names, ",")
			}
			if got != tt.wantNodes {
				t.Fatalf("started on %q, want %q (plan %+v)", got, tt.wantNodes, plan.Pending)
			}
			if tt.wantNodes != "" {
				return
			}
			want := []sched.Decision{{JobID: 1, Reason: tt.wantReason, Detail: tt.wantDetail}}
			if diff := cmp.Diff(want, plan.Pending); diff != "" {
				t.Errorf("pending (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCheckFeasibleFeatures(t *testing.T) {
	tests := []struct {
		name    string
		spec    api.JobSpec
		wantOK  bool
		wantWhy string
	}{
		{name: "feature present", spec: api.JobSpec{Constraint: "nvlink", GPUs: 4, Nodes: 3}, wantOK: true},
		{name: "matching or with one rack big enough", spec: api.JobSpec{Constraint: "[r1|r2]", Nodes: 2}, wantOK: true},
		{
			name: "matching or needs one rack to hold the job", spec: api.JobSpec{Constraint: "[r1|r2]", Nodes: 3},
			wantWhy: "3 nodes with 1 CPUs requested, partition gpu has 2 that can hold it",
		},
		{
			name: "per-node or may span racks", spec: api.JobSpec{Constraint: "r1|r2", Nodes: 3}, wantOK: true,
		},
		{
			name: "absent feature", spec: api.JobSpec{Constraint: "ib&nvlink"},
			wantWhy: "no node of partition gpu has features matching --constraint=ib&nvlink",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := featureCluster(map[string][]int{"n1": {0, 1, 2, 3}})
			tt.spec.Partition = "gpu"
			ok, why := sched.CheckFeasible(&tt.spec, snap.Partitions["gpu"], snap.Nodes, sched.Config{})
			if ok != tt.wantOK || why != tt.wantWhy {
				t.Errorf("CheckFeasible = %v, %q; want %v, %q", ok, why, tt.wantOK, tt.wantWhy)
			}
		})
	}
}

func TestSortedFeatures(t *testing.T) {
	tests := []struct {
		name string
		in   []string
		want []string
	}{
		{name: "nil", in: nil, want: nil},
		{name: "sorted is kept", in: []string{"a", "b"}, want: []string{"a", "b"}},
		{name: "unsorted is sorted", in: []string{"nvlink", "containerd"}, want: []string{"containerd", "nvlink"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := append([]string(nil), tt.in...)
			got := sched.SortedFeatures(in)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.in, in); diff != "" {
				t.Errorf("input modified (-want +got):\n%s", diff)
			}
		})
	}
}
