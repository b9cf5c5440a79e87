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
// nothing but the read-only cluster and jobs) and summarizes them in
// policy order.
func Compare(jobs []trace.Job, o CompareOptions) (*Report, error) {
	starve := o.StarveAfter
	if starve <= 0 {
		starve = DefaultStarveAfter
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
	results := make([]*Result, len(o.Policies))
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
			results[i], errs[i] = Run(jobs, opts)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return nil, err
		}
		pr, w := Summarize(results[i], starve)
		rep.Policies = append(rep.Policies, pr)
		rep.Wall = append(rep.Wall, w)
	}
	return rep, nil
}
