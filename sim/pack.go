package sim

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/sched"
	"github.com/tide-hpc/tide/sim/trace"
)

// Packing: the allocation experiment of the FGD paper (Weng et al.,
// ATC '23) on which GPU-sharing placements are compared. The trace's
// GPU jobs arrive in submission order and never leave; each is placed
// at once by the scheduling core if it fits (a job that does not is
// counted and dropped), until every job has arrived. As the cluster
// fills, a placement that fragments GPUs strands free capacity that the
// workload's request shapes cannot use: the measure is that stranded
// capacity (workload fragmentation, see workload) against the share of
// the cluster's GPUs allocated, and how much is allocated when the first
// job no longer fits.

// PackPoint is the cluster after the arrivals that brought the
// requested GPU capacity to Arrived × the cluster's GPUs.
type PackPoint struct {
	Arrived float64 `json:"arrived"`
	// Allocated is the share of the cluster's GPU capacity held (slices
	// by their share).
	Allocated float64 `json:"allocated"`
	// FragGPUs is the workload fragmentation in GPUs; FragOfFree divides
	// it by the free capacity.
	FragGPUs   float64 `json:"frag_gpus"`
	FragOfFree float64 `json:"frag_of_free"`
	Failed     int     `json:"failed"`
}

// PackResult is one policy's packing run.
type PackResult struct {
	Policy string `json:"policy"`
	// FirstFailAt is the allocated share when the first job did not fit
	// (1 when every job fitted).
	FirstFailAt float64     `json:"first_fail_at"`
	Placed      int         `json:"placed"`
	Failed      int         `json:"failed"`
	Points      []PackPoint `json:"points"`
}

// packLevels are the arrived-capacity levels PackResult.Points reports.
var packLevels = []float64{0.5, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2}

// Pack runs the packing experiment for one policy: GPU jobs of jobs
// (CPU-only and rejected jobs are left out) arrive in submission order
// on opts.Cluster and are placed by opts.Policy's core settings.
func Pack(jobs []trace.Job, opts Options) (*PackResult, error) {
	t, err := newTable(jobs, opts.Seed, opts.Cluster, EstimatesExact)
	if err != nil {
		return nil, err
	}
	return pack(t, opts)
}

// pack runs the packing experiment on the jobs of t (ordered with
// opts.Seed).
func pack(t *table, opts Options) (*PackResult, error) {
	if opts.Cluster == nil {
		return nil, fmt.Errorf("no cluster")
	}
	e := newEngine(opts)
	e.load(t)
	e.snap.Workload = packWorkload(e)
	total := float64(e.res.TotalGPUs)
	res := &PackResult{Policy: opts.Policy.Name, FirstFailAt: 1}
	if total == 0 {
		return res, nil
	}
	var arrived, allocated float64 // GPU capacity
	level := 0
	now := Epoch
	one := make([]*api.Job, 1)
	for i := range e.jobs {
		gpus := e.tab.jobs[i].gpus
		if e.jobs[i].outcome != outcomeNone || gpus == 0 {
			continue
		}
		need := float64(gpus)
		if pct := e.jobShapes[e.jobs[i].shape].slicePct; pct > 0 {
			need = float64(pct) / 100
		}
		arrived += need
		one[0] = &e.arrive(i).job
		e.snap.Pending = one
		plan := sched.Schedule(&e.snap, now, e.cfg)
		e.snap.Pending = nil
		if len(plan.Starts) == 1 {
			if err := e.start(&plan.Starts[0], 0); err != nil {
				return nil, err
			}
			allocated += need
			res.Placed++
		} else {
			if res.Failed == 0 {
				res.FirstFailAt = round6(allocated / total)
			}
			res.Failed++
			e.release(uint64(i + 1))
		}
		for level < len(packLevels) && arrived >= packLevels[level]*total {
			free := total - allocated
			p := PackPoint{Arrived: packLevels[level], Allocated: round6(allocated / total),
				FragGPUs: round6(math.Max(0, e.fragSum)), Failed: res.Failed}
			if free > 0 {
				p.FragOfFree = round6(math.Max(0, e.fragSum) / free)
			}
			res.Points = append(res.Points, p)
			level++
		}
	}
	return res, nil
}

// packWorkload is the experiment's target workload for sched.SliceFGD:
// the per-node shapes of the GPU jobs that will arrive, each job
// counting once, as the FGD paper derives its typical tasks from the
// trace it replays.
func packWorkload(e *engine) []sched.WorkloadShape {
	counts := make([]float64, len(e.jobShapes))
	for i := range e.jobs {
		if e.jobs[i].outcome == outcomeNone && e.tab.jobs[i].gpus > 0 {
			counts[e.jobs[i].shape]++
		}
	}
	var out []sched.WorkloadShape
	for k, c := range counts {
		if c > 0 {
			w := sched.JobShape(&e.jobShapes[k].spec, e.opts.Cluster.GPUsPerNode, e.cfg.DefMemPerCPUMB)
			w.Weight = c
			out = append(out, w)
		}
	}
	return out
}

// PackCompare runs Pack once per policy.
func PackCompare(jobs []trace.Job, cluster *Cluster, policies []PolicySpec, seed uint64) ([]*PackResult, error) {
	t, err := newTable(jobs, seed, cluster, EstimatesExact)
	if err != nil {
		return nil, err
	}
	out := make([]*PackResult, 0, len(policies))
	for _, p := range policies {
		r, err := pack(t, Options{Cluster: cluster, Policy: p, Seed: seed})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.Name, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// WritePackTable prints the packing results side by side: per arrived
// level, the allocated share and the fragmentation of the free capacity
// under each policy.
func WritePackTable(w io.Writer, rs []*PackResult, wall time.Duration) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := []string{"arrived"}
	for _, r := range rs {
		head = append(head, r.Policy+" alloc", r.Policy+" frag/free")
	}
	fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
	for k, lv := range packLevels {
		cells := []string{fmt.Sprintf("%.0f%%", lv*100)}
		for _, r := range rs {
			if k >= len(r.Points) {
				cells = append(cells, "-", "-")
				continue
			}
			p := r.Points[k]
			cells = append(cells, fmt.Sprintf("%.1f%%", p.Allocated*100), fmt.Sprintf("%.1f%%", p.FragOfFree*100))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	cells := []string{"first failure at"}
	for _, r := range rs {
		cells = append(cells, fmt.Sprintf("%.1f%%", r.FirstFailAt*100), fmt.Sprintf("%d failed", r.Failed))
	}
	fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	if err := tw.Flush(); err != nil {
		return err
	}
	if wall > 0 {
		_, err := fmt.Fprintf(w, "(%s)\n", wall.Round(time.Millisecond))
		return err
	}
	return nil
}
