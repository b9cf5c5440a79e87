package ctld

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tide-hpc/tide/ctld/api"
)

// TestLiveJobs checks liveJobs against a map and an insertion order
// under random adds, replacements and removals, through compactions.
func TestLiveJobs(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	l := newLiveJobs()
	want := map[uint64]*api.Job{}
	var order []uint64 // first-add order of the ids in want
	for step := range 20000 {
		switch r := rng.IntN(10); {
		case r < 6: // add a new job or replace one
			id := uint64(rng.IntN(5000))
			j := &api.Job{ID: id}
			if _, ok := want[id]; !ok {
				order = append(order, id)
			}
			want[id] = j
			l.add(j)
		default: // a pass drops a random share of the jobs
			drop := map[uint64]bool{}
			for id := range want {
				if rng.IntN(4) == 0 {
					drop[id] = true
				}
			}
			l.walk(func(j *api.Job) bool { return !drop[j.ID] })
			for id := range drop {
				delete(want, id)
			}
			order = slices.DeleteFunc(order, func(id uint64) bool { return drop[id] })
		}
		var got []uint64
		l.each(func(j *api.Job) {
			if want[j.ID] != j {
				t.Fatalf("step %d: job %d is not the last one added", step, j.ID)
			}
			got = append(got, j.ID)
		})
		if !slices.Equal(got, order) || l.len() != len(want) {
			t.Fatalf("step %d: %d jobs %v, want %d in add order", step, l.len(), got[:min(len(got), 10)], len(want))
		}
	}
	if l.holes > len(l.list)/2+1024 {
		t.Errorf("%d holes in a list of %d: compact never ran", l.holes, len(l.list))
	}
}
