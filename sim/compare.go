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
	// Seed is the seed of a one-seed comparison; Seeds, when not empty,
	// replaces it with several (see Report.Spread).
	Seed  uint64
	Seeds []uint64
	// StarveAfter is in seconds (0: DefaultStarveAfter).
	StarveAfter int64
	// TraceName labels the report.
	TraceName string
	// Progress, when set, gets the jobs done over all replays.
	Progress func(done, total int)
	// Parallel bounds the replays run at once (0: GOMAXPROCS).
	Parallel   int
	FullPasses bool
	// Estimates chooses the jobs' time limits ("": EstimatesModel).
	Estimates EstimateMode
}

// Compare replays jobs once per policy and seed (in parallel: replays
// share nothing but the read-only cluster and the trace, ordered once
// per seed) and summarizes them in seed and policy order. Each replay
// is summarized as soon as it ends and its per-job results dropped, and
// a seed's ordered trace is built when its first replay starts and
// dropped after its last, so that only the replays under way hold
// memory.
func Compare(jobs []trace.Job, o CompareOptions) (*Report, error) {
	starve := o.StarveAfter
	if starve <= 0 {
		starve = DefaultStarveAfter
	}
	seeds := o.Seeds
	if len(seeds) == 0 {
		seeds = []uint64{o.Seed}
	}
	c := o.Cluster
	// One ordered trace per seed, shared by its replays.
	type seedTable struct {
		once sync.Once
		t    *table
		err  error
		left int // replays of the seed not yet done
	}
	tables := make([]seedTable, len(seeds))
	for s := range tables {
		tables[s].left = len(o.Policies)
	}
	par := o.Parallel
	if par <= 0 {
		par = runtime.GOMAXPROCS(0)
	}
	np := len(o.Policies)
	runs := make([][]PolicyReport, len(seeds))
	walls := make([][]WallTimes, len(seeds))
	for s := range runs {
		runs[s] = make([]PolicyReport, np)
		walls[s] = make([]WallTimes, np)
	}
	ests := make([]EstimateSummary, len(seeds))
	errs := make([]error, len(seeds)*np)
	var mu sync.Mutex
	done := make([]int, len(seeds)*np)
	// Tasks run in seed order, so that few seeds' tables live at once.
	tasks := make(chan int)
	var wg sync.WaitGroup
	for range min(par, len(errs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range tasks {
				s, i := k/np, k%np
				st := &tables[s]
				st.once.Do(func() {
					st.t, st.err = newTable(jobs, seeds[s], c, o.Estimates)
					if st.err == nil {
						ests[s] = st.t.est
					}
				})
				if st.err != nil {
					errs[k] = st.err
					continue
				}
				opts := Options{Cluster: c, Policy: o.Policies[i], Seed: seeds[s], FullPasses: o.FullPasses, Estimates: o.Estimates}
				if o.Progress != nil {
					opts.Progress = func(d, total int) {
						mu.Lock()
						defer mu.Unlock()
						done[k] = d
						sum := 0
						for _, x := range done {
							sum += x
						}
						o.Progress(sum, total*len(done))
					}
				}
				res, err := run(st.t, opts)
				if err != nil {
					errs[k] = err
				} else {
					runs[s][i], walls[s][i] = Summarize(res, starve)
				}
				mu.Lock()
				if st.left--; st.left == 0 {
					st.t = nil
				}
				mu.Unlock()
			}
		}()
	}
	for k := range errs {
		tasks <- k
	}
	close(tasks)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	rep := &Report{Trace: o.TraceName, Seed: seeds[0], StarveAfterS: starve, Estimates: ests[0], Cluster: ClusterSummary{
		Nodes: len(c.Nodes), GPUs: c.TotalGPUs(), GPUsPerNode: c.GPUsPerNode, CPUsPerNode: c.CPUsPerNode,
		MemPerNode: c.MemPerNodeMB, Leaves: len(c.Tree.Leaves()), Partitions: strings.Join(sortedKeys(c.Partitions), ","),
	}}
	rep.Policies = runs[0]
	for i := range o.Policies {
		ws := make([]WallTimes, len(seeds))
		for s := range seeds {
			ws[s] = walls[s][i]
		}
		rep.Wall = append(rep.Wall, medianWall(ws))
	}
	if len(seeds) > 1 {
		rep.Seeds = seeds
		for s := 1; s < len(seeds); s++ {
			rep.MoreSeeds = append(rep.MoreSeeds, SeedRun{Seed: seeds[s], Policies: runs[s]})
		}
		rep.Spread = spread(runs, starve)
	}
	return rep, nil
}
