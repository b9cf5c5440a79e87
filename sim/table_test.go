package sim

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/sim/trace"
)

// TestTableOrder pins the arrival order of the table to the one the
// engine had when it sorted and shuffled a copy of the trace: a replay
// with the same seed must submit the same jobs in the same order, or
// the reports of older versions no longer compare.
func TestTableOrder(t *testing.T) {
	jobs := readSample(t, samples[0], trace.Options{})
	// Many equal submit times, out of file order too: the sample alone
	// has few ties.
	for i := range jobs {
		jobs[i].Submit = (jobs[i].Submit / 3600) * 3600
	}
	jobs[0], jobs[len(jobs)-1] = jobs[len(jobs)-1], jobs[0]
	for _, seed := range []uint64{0, 1, 7} {
		want := slices.Clone(jobs)
		trace.SortBySubmit(want)
		rng := rand.New(rand.NewPCG(seed, 0x7469646573696d))
		for i := 0; i < len(want); {
			k := i + 1
			for k < len(want) && want[k].Submit == want[i].Submit {
				k++
			}
			g := want[i:k]
			if len(g) > 1 {
				rng.Shuffle(len(g), func(a, b int) { g[a], g[b] = g[b], g[a] })
			}
			i = k
		}
		tab, err := newTable(jobs, seed, oneNode(t), EstimatesExact)
		if err != nil {
			t.Fatal(err)
		}
		var wantIDs, gotIDs []string
		for i := range want {
			wantIDs = append(wantIDs, want[i].ID)
			gotIDs = append(gotIDs, tab.id(i))
			tj := tab.jobs[i]
			if tj.submit != want[i].Submit || tj.duration != want[i].Duration || int(tj.gpus) != want[i].GPUs ||
				tj.share != want[i].Share || tab.queues[tj.queue] != want[i].Queue {
				t.Errorf("seed %d: job %d is %+v (queue %q), want %+v", seed, i, tj, tab.queues[tj.queue], want[i])
			}
		}
		if diff := cmp.Diff(wantIDs, gotIDs); diff != "" {
			t.Errorf("seed %d: order (-want +got):\n%s", seed, diff)
		}
	}
}

// TestPerJobRecordsHoldNoPointers keeps the records the engine holds for
// every trace job free of pointers: with them, each of the thousands of
// collections of a long replay would scan them all.
func TestPerJobRecordsHoldNoPointers(t *testing.T) {
	for _, v := range []any{tableJob{}, simJob{}, Sample{}} {
		typ := reflect.TypeOf(v)
		for i := range typ.NumField() {
			switch f := typ.Field(i); f.Type.Kind() {
			case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
				reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
			default:
				t.Errorf("%s.%s is a %s: per-job records hold numbers only", typ.Name(), f.Name, f.Type)
			}
		}
	}
}

// TestLiveJobsReused checks that a replay builds requests only for the
// jobs in the cluster at one time (pending or running), and that every
// job gives its back when it ends.
func TestLiveJobsReused(t *testing.T) {
	jobs := readSample(t, samples[0], trace.Options{})
	c, err := Generate(ClusterSpec{Nodes: 64, GPUsPerNode: 8, CPUsPerNode: 64, MemPerNodeMB: 512000, Leaf: 16})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"fifo", "backfill", "tide"} {
		t.Run(name, func(t *testing.T) {
			tab, err := newTable(jobs, 3, c, EstimatesExact)
			if err != nil {
				t.Fatal(err)
			}
			e := newEngine(Options{Cluster: c, Policy: policy(t, name), Seed: 3})
			e.load(tab)
			if err := e.loop(); err != nil {
				t.Fatal(err)
			}
			// At most as many requests as jobs in the cluster at once
			// (pending or running, after a pass), plus those of jobs that
			// end in the second they start: the sample of a second that
			// loops twice shows the cluster after they ended.
			most := 0
			for _, s := range e.res.Samples {
				most = max(most, int(s.Pending+s.Running))
			}
			for i := range tab.jobs {
				if tab.jobs[i].duration == 0 {
					most++
				}
			}
			if len(e.live) != 0 {
				t.Errorf("%d jobs still hold a request after the replay", len(e.live))
			}
			// Every request made is back on the free list.
			if made := len(e.free); made == 0 || made > most || most >= len(jobs) {
				t.Errorf("%d requests made for %d jobs, at most %d in the cluster at once", made, len(jobs), most)
			}
			for _, lj := range e.free {
				if lj.alloc != nil {
					t.Errorf("job %d's allocation kept after its end", lj.job.ID)
				}
			}
		})
	}
}
