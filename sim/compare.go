package sim

import (
	"runtime"
	"strings"
	"sync"

	"github.com/tide-hpc/tide/sim/trace"
)

// CompareOptions configures Compare.
type CompareOptions struct {
	Cluster  *Cluster
	Policies []PolicySpec
	Seed     uint64
	// StarveAfter is in seconds (0: DefaultStarveAfter).
	StarveAfter int64
	// TraceName labels the report.
	TraceName string
	// Progress, when set, gets the jobs done over all replays.
	Progress func(done, total int)
	// Parallel bounds the replays run at once (0: GOMAXPROCS).
	Parallel   int
	FullPasses bool
}

// Compare replays jobs once per policy (in parallel: replays share
// nothing but the read-only cluster and the trace, ordered once) and
// summarizes them in policy order. Each replay is summarized as soon as it ends and its
// per-job results dropped, so that only the replays under way hold
// memory.
func Compare(jobs []trace.Job, o CompareOptions) (*Report, error) {
	starve := o.StarveAfter
	if starve <= 0 {
		starve = DefaultStarveAfter
	}
	// The trace is ordered once, for all replays.
	t, err := newTable(jobs, o.Seed)
	if err != nil {
		return nil, err
	}
	c := o.Cluster
	rep := &Report{Trace: o.TraceName, Seed: o.Seed, StarveAfterS: starve, Cluster: ClusterSummary{
		Nodes: len(c.Nodes), GPUs: c.TotalGPUs(), GPUsPerNode: c.GPUsPerNode, CPUsPerNode: c.CPUsPerNode,
		MemPerNode: c.MemPerNodeMB, Leaves: len(c.Tree.Leaves()), Partitions: strings.Join(sortedKeys(c.Partitions), ","),
	}}
	par := o.Parallel
	if par <= 0 {
		par = runtime.GOMAXPROCS(0)
	}
	reports := make([]PolicyReport, len(o.Policies))
	walls := make([]WallTimes, len(o.Policies))
	errs := make([]error, len(o.Policies))
	var mu sync.Mutex
	done := make([]int, len(o.Policies))
	sem := make(chan struct{}, par)
	var wg sync.WaitGroup
	for i, p := range o.Policies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			opts := Options{Cluster: c, Policy: p, Seed: o.Seed, FullPasses: o.FullPasses}
			if o.Progress != nil {
				opts.Progress = func(d, total int) {
					mu.Lock()
					defer mu.Unlock()
					done[i] = d
					sum := 0
					for _, x := range done {
						sum += x
					}
					o.Progress(sum, total*len(o.Policies))
				}
			}
			res, err := run(t, opts)
			if err != nil {
				errs[i] = err
				return
			}
			reports[i], walls[i] = Summarize(res, starve)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return nil, err
		}
		rep.Policies = append(rep.Policies, reports[i])
		rep.Wall = append(rep.Wall, walls[i])
	}
	return rep, nil
}
