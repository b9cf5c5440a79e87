package ctld

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tide-hpc/tide/accounting"
	"github.com/tide-hpc/tide/ctld/api"
)

// fakeCommits records the batches written; a batch that holds job bad
// fails, and the first write waits until hold writers are queued behind
// it, so that the test sees them merged.
type fakeCommits struct {
	g    *groupCommit
	bad  uint64
	hold int

	mu      sync.Mutex
	batches [][]uint64
}

func (f *fakeCommits) write(_ context.Context, b *accounting.Batch) error {
	f.mu.Lock()
	first := len(f.batches) == 0
	var ids []uint64
	for _, j := range b.NewJobs {
		ids = append(ids, j.ID)
	}
	f.batches = append(f.batches, ids)
	f.mu.Unlock()
	for first && f.queued() < f.hold {
		time.Sleep(time.Millisecond)
	}
	if slices.Contains(ids, f.bad) {
		return errors.New("constraint failed")
	}
	return nil
}

func (f *fakeCommits) queued() int {
	f.g.mu.Lock()
	defer f.g.mu.Unlock()
	return len(f.g.queue)
}

func TestGroupCommit(t *testing.T) {
	tests := []struct {
		name string
		bad  uint64
		// wantBatches: the first writer alone, the rest merged; with a
		// bad job, the merged write fails and each is retried alone.
		wantBatches [][]uint64
	}{
		{name: "merged", wantBatches: [][]uint64{{1}, {2, 3, 4, 5}}},
		{name: "one bad job fails alone", bad: 4,
			wantBatches: [][]uint64{{1}, {2, 3, 4, 5}, {2}, {3}, {4}, {5}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := &groupCommit{}
			f := &fakeCommits{g: g, bad: tt.bad, hold: 4}
			g.write = f.write
			errs := make([]error, 6)
			var wg sync.WaitGroup
			submit := func(id uint64) {
				defer wg.Done()
				errs[id] = g.Write(context.Background(), &accounting.Batch{NewJobs: []*api.Job{{ID: id}}, MaxJobID: id}, nil)
			}
			wg.Add(1)
			go submit(1)
			for f.firstWrite() == false {
				time.Sleep(time.Millisecond)
			}
			// Queue the others one by one, so the merged order is known.
			for id := uint64(2); id <= 5; id++ {
				wg.Add(1)
				go submit(id)
				for f.queued() < int(id-1) && f.writes() < 2 {
					time.Sleep(time.Millisecond)
				}
			}
			wg.Wait()
			// The merged round's order follows the queue.
			if len(f.batches) < 2 {
				t.Fatalf("batches %v", f.batches)
			}
			got := slices.Clone(f.batches)
			if !slices.EqualFunc(got, tt.wantBatches, slices.Equal) {
				t.Errorf("batches %v, want %v", got, tt.wantBatches)
			}
			for id := uint64(1); id <= 5; id++ {
				if (errs[id] != nil) != (id == tt.bad) {
					t.Errorf("job %d: err %v", id, errs[id])
				}
			}
			if g.leading || len(g.queue) != 0 {
				t.Errorf("left leading=%v queue=%d", g.leading, len(g.queue))
			}
		})
	}
}

func (f *fakeCommits) writes() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.batches)
}

func (f *fakeCommits) firstWrite() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.batches) > 0
}

// TestGroupCommitStorm runs many writers at once: each batch is written
// exactly once and every writer returns.
func TestGroupCommitStorm(t *testing.T) {
	g := &groupCommit{}
	var mu sync.Mutex
	seen := map[uint64]int{}
	writes := 0
	g.write = func(_ context.Context, b *accounting.Batch) error {
		mu.Lock()
		defer mu.Unlock()
		writes++
		for _, j := range b.NewJobs {
			seen[j.ID]++
		}
		return nil
	}
	const n = 200
	var wg sync.WaitGroup
	for id := uint64(1); id <= n; id++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := g.Write(context.Background(), &accounting.Batch{NewJobs: []*api.Job{{ID: id}}}, nil); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if len(seen) != n {
		t.Fatalf("%d jobs written, want %d", len(seen), n)
	}
	for id, c := range seen {
		if c != 1 {
			t.Errorf("job %d written %d times", id, c)
		}
	}
	t.Logf("%d jobs in %d commits", n, writes)
}

// A leader that knows of arriving submissions waits for them and
// commits them with its own batch; one that leaves without writing
// releases the wait.
func TestGroupCommitGathersArrivals(t *testing.T) {
	g := &groupCommit{wait: time.Hour} // the test, not a timer, ends the wait
	rec := recordCommits(g)
	batch := oneJob
	a1, a2 := g.arrive(), g.arrive()
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := g.Write(context.Background(), batch(1), nil); err != nil {
			t.Error(err)
		}
	})
	// Wait until the leader waits for the two arrivals.
	for {
		g.mu.Lock()
		waiting := g.gathered != nil
		g.mu.Unlock()
		if waiting {
			break
		}
		time.Sleep(100 * time.Microsecond)
	}
	wg.Go(func() {
		if err := g.Write(context.Background(), batch(2), a1); err != nil {
			t.Error(err)
		}
	})
	for g.queuedLen() < 2 {
		time.Sleep(100 * time.Microsecond)
	}
	a2.leave() // a refused submission: the leader stops waiting
	a2.leave() // and leaving twice counts once
	wg.Wait()
	if got, want := rec.get(), [][]uint64{{1, 2}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("batches %v, want %v", got, want)
	}
	if g.arriving != 0 {
		t.Errorf("arriving = %d after all left", g.arriving)
	}
}

func (g *groupCommit) queuedLen() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.queue)
}

// A leader yields before it commits, again while each yield brought
// writers (at most maxGatherYields times), and commits them with its own
// batch. Here each yield lets one waiting writer queue.
func TestGroupCommitYieldsToReadyWriters(t *testing.T) {
	tests := []struct {
		name    string
		writers int // besides the leader
		want    [][]uint64
	}{
		{name: "until a yield brings nobody", writers: 2, want: [][]uint64{{1, 2, 3}}},
		{name: "at most maxGatherYields", writers: maxGatherYields + 1,
			want: [][]uint64{{1, 2, 3, 4, 5}, {6}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := &groupCommit{}
			rec := recordCommits(g)
			batch := oneJob
			var wg sync.WaitGroup
			write := func(id uint64) {
				wg.Go(func() {
					if err := g.Write(context.Background(), batch(id), nil); err != nil {
						t.Error(err)
					}
				})
			}
			// A yield runs the next writer up to its place in the queue,
			// as long as writers are left for it (at most as many as the
			// leader yields); the rest write once the leader is done.
			last := uint64(min(tt.writers, maxGatherYields) + 1)
			var hook sync.Mutex
			next := uint64(2)
			g.yield = func() {
				hook.Lock()
				defer hook.Unlock()
				if next > last {
					return
				}
				queued := g.queuedLen()
				write(next)
				next++
				for g.queuedLen() == queued {
					time.Sleep(100 * time.Microsecond)
				}
			}
			if err := g.Write(context.Background(), batch(1), nil); err != nil {
				t.Fatal(err)
			}
			for id := last + 1; id <= uint64(tt.writers+1); id++ {
				write(id) // left over: leads a round of its own
			}
			wg.Wait()
			if got := rec.get(); !slices.EqualFunc(got, tt.want, slices.Equal) {
				t.Errorf("batches %v, want %v", got, tt.want)
			}
		})
	}
}

// commitRecord is what recordCommits saw: the job ids of each commit.
type commitRecord struct {
	mu      sync.Mutex
	batches [][]uint64
}

// recordCommits makes g's writes record their jobs' ids.
func recordCommits(g *groupCommit) *commitRecord {
	rec := &commitRecord{}
	g.write = func(_ context.Context, b *accounting.Batch) error {
		var ids []uint64
		for _, j := range b.NewJobs {
			ids = append(ids, j.ID)
		}
		rec.mu.Lock()
		rec.batches = append(rec.batches, ids)
		rec.mu.Unlock()
		return nil
	}
	return rec
}

// get returns the commits so far.
func (r *commitRecord) get() [][]uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.batches)
}

// oneJob is a submission's batch: job id alone.
func oneJob(id uint64) *accounting.Batch { return &accounting.Batch{NewJobs: []*api.Job{{ID: id}}} }
