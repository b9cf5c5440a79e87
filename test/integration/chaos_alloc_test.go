package integration

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// Invariant 3 of the chaos test: allocations rebuilt from the job trails.

// chaosInterval is what one incarnation of a job held on one node, from
// its start event to its end or requeue event.
type chaosInterval struct {
	job    uint64
	node   string
	cpus   int
	memMB  int64
	gpus   []int
	sliced bool
	// start and end bound the holding; a zero end means still held.
	start, end time.Time
}

func (iv chaosInterval) String() string {
	end := "now"
	if !iv.end.IsZero() {
		end = iv.end.Format("15:04:05.000000")
	}
	return fmt.Sprintf("job %d on %s cpus=%d gpus=%v from %s to %s", iv.job, iv.node, iv.cpus, iv.gpus, iv.start.Format("15:04:05.000000"), end)
}

// overlaps reports whether two holdings share an instant.
func (iv chaosInterval) overlaps(o chaosInterval) bool {
	return (o.end.IsZero() || iv.start.Before(o.end)) && (iv.end.IsZero() || o.start.Before(iv.end))
}

// allocRE finds the allocation a start event records (ctld's
// startMessage): "[alloc gpu01 cpus=4 mem_mb=0 gpus=0,1; gpu02 ...]".
var allocRE = regexp.MustCompile(`\[alloc ([^\]]*)\]$`)

// parseStartAlloc reads the allocation of a start event's message.
func parseStartAlloc(msg string) ([]chaosInterval, error) {
	m := allocRE.FindStringSubmatch(msg)
	if m == nil {
		return nil, fmt.Errorf("start event without an allocation: %q", msg)
	}
	var out []chaosInterval
	for _, part := range strings.Split(m[1], ";") {
		f := strings.Fields(part)
		if len(f) < 2 {
			return nil, fmt.Errorf("allocation %q: node part %q", m[1], part)
		}
		iv := chaosInterval{node: f[0]}
		for _, kv := range f[1:] {
			k, val, ok := strings.Cut(kv, "=")
			var err error
			switch {
			case !ok:
				err = fmt.Errorf("not key=value")
			case k == "cpus":
				iv.cpus, err = strconv.Atoi(val)
			case k == "mem_mb":
				iv.memMB, err = strconv.ParseInt(val, 10, 64)
			case k == "gpus":
				for _, g := range strings.Split(val, ",") {
					n, gerr := strconv.Atoi(g)
					if gerr != nil {
						err = gerr
						break
					}
					iv.gpus = append(iv.gpus, n)
				}
			case k == "gpu_mem_mb" || k == "gpu_pct":
				iv.sliced = true
			}
			if err != nil {
				return nil, fmt.Errorf("allocation %q: %q: %v", m[1], kv, err)
			}
		}
		out = append(out, iv)
	}
	return out, nil
}

// chaosIntervals rebuilds job j's holdings from its trail: a start event
// opens them, the next end or requeue event closes them (a suspend
// closes and a resume reopens them). A trail that starts a job twice
// without an end between, or leaves an ended job holding, is a
// violation itself.
func chaosIntervals(j *api.Job, evs []api.Event) ([]chaosInterval, []chaosViolation) {
	var out, open, last []chaosInterval
	var v []chaosViolation
	closeAt := func(t time.Time) {
		for _, iv := range open {
			iv.end = t
			out = append(out, iv)
		}
		open = nil
	}
	for _, e := range evs {
		switch e.Kind {
		case api.EventStart:
			if open != nil {
				v = append(v, chaosViolation{"3-alloc", j.ID, fmt.Sprintf("started again at %s while its start at %s had no end or requeue",
					e.Time.Format("15:04:05.000000"), open[0].start.Format("15:04:05.000000"))})
				closeAt(e.Time)
			}
			ivs, err := parseStartAlloc(e.Message)
			if err != nil {
				v = append(v, chaosViolation{"3-alloc", j.ID, err.Error()})
				continue
			}
			for i := range ivs {
				ivs[i].job, ivs[i].start = j.ID, e.Time
			}
			open, last = ivs, ivs
		case api.EventEnd, api.EventRequeue, api.EventSuspend:
			closeAt(e.Time)
		case api.EventResume:
			if open == nil {
				for _, iv := range last {
					iv.start = e.Time
					open = append(open, iv)
				}
			}
		}
	}
	if open != nil {
		if j.State.Active() {
			out = append(out, open...) // still held
		} else {
			v = append(v, chaosViolation{"3-alloc", j.ID, fmt.Sprintf("%s, but its trail has no end after its start at %s",
				j.State, open[0].start.Format("15:04:05.000000"))})
			if !j.EndTime.IsZero() {
				closeAt(j.EndTime) // the record's end, for the other checks
			}
		}
	}
	return out, v
}

// checkAllocations is invariant 3: on every node no whole GPU is held
// by two holdings at once (nor by a whole and a sliced one), no GPU
// index is outside the node, and the CPUs and memory held at any instant
// fit the node.
func checkAllocations(ivs []chaosInterval, nodes []api.Node) []chaosViolation {
	var v []chaosViolation
	byNode := map[string][]chaosInterval{}
	for _, iv := range ivs {
		byNode[iv.node] = append(byNode[iv.node], iv)
	}
	caps := map[string]api.Node{}
	for _, n := range nodes {
		caps[n.Name] = n
	}
	names := make([]string, 0, len(byNode))
	for n := range byNode {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		list := byNode[name]
		n, ok := caps[name]
		if !ok {
			v = append(v, chaosViolation{"3-alloc", list[0].job, fmt.Sprintf("holds node %s, which the controller does not know", name)})
			continue
		}
		slices.SortFunc(list, func(a, b chaosInterval) int { return cmp.Or(a.start.Compare(b.start), cmp.Compare(a.job, b.job)) })
		// GPUs: every pair that shares a GPU and an instant, once.
		for i := range list {
			for _, g := range list[i].gpus {
				if g < 0 || g >= len(n.GPUs) {
					v = append(v, chaosViolation{"3-alloc", list[i].job, fmt.Sprintf("%s holds GPU %d, which %s does not have (%d GPUs)", list[i], g, name, len(n.GPUs))})
				}
			}
			for k := i + 1; k < len(list); k++ {
				a, b := list[i], list[k]
				if !a.end.IsZero() && !b.start.Before(a.end) {
					continue
				}
				if a.job == b.job || !a.overlaps(b) || (a.sliced && b.sliced) {
					continue
				}
				if shared := sharedGPUs(a.gpus, b.gpus); len(shared) > 0 {
					v = append(v, chaosViolation{"3-alloc", b.job, fmt.Sprintf("GPU %v of %s allocated twice at once: %s; %s", shared, name, a, b)})
				}
			}
		}
		// CPUs and memory: a sweep over starts and ends, ends first at
		// the same instant (a holding ends where the next may begin).
		type step struct {
			at   time.Time
			end  bool
			iv   chaosInterval
			cpus int
			mem  int64
		}
		var steps []step
		for _, iv := range list {
			steps = append(steps, step{at: iv.start, iv: iv, cpus: iv.cpus, mem: iv.memMB})
			if !iv.end.IsZero() {
				steps = append(steps, step{at: iv.end, end: true, iv: iv, cpus: -iv.cpus, mem: -iv.memMB})
			}
		}
		slices.SortStableFunc(steps, func(a, b step) int {
			if c := a.at.Compare(b.at); c != 0 {
				return c
			}
			switch {
			case a.end && !b.end:
				return -1
			case !a.end && b.end:
				return 1
			}
			return 0
		})
		cpus, mem := 0, int64(0)
		held := map[uint64]chaosInterval{}
		reportedCPU, reportedMem := false, false
		for _, s := range steps {
			cpus += s.cpus
			mem += s.mem
			if s.end {
				delete(held, s.iv.job)
				continue
			}
			held[s.iv.job] = s.iv
			if cpus > n.CPUs && !reportedCPU {
				reportedCPU = true
				v = append(v, chaosViolation{"3-alloc", s.iv.job, fmt.Sprintf("%s: %d CPUs allocated at %s, the node has %d: %s",
					name, cpus, s.at.Format("15:04:05.000000"), n.CPUs, heldList(held))})
			}
			if mem > n.MemoryMB && !reportedMem {
				reportedMem = true
				v = append(v, chaosViolation{"3-alloc", s.iv.job, fmt.Sprintf("%s: %d MB of memory allocated at %s, the node has %d MB: %s",
					name, mem, s.at.Format("15:04:05.000000"), n.MemoryMB, heldList(held))})
			}
		}
	}
	return v
}

func sharedGPUs(a, b []int) []int {
	var out []int
	for _, g := range a {
		if slices.Contains(b, g) {
			out = append(out, g)
		}
	}
	return out
}

func heldList(held map[uint64]chaosInterval) string {
	var parts []string
	for _, iv := range held {
		parts = append(parts, fmt.Sprintf("job %d cpus=%d mem_mb=%d", iv.job, iv.cpus, iv.memMB))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// checkIdleNodes: once no job is active, no node may still count CPUs,
// memory or GPUs as allocated (a leak would keep them from every later
// job).
func checkIdleNodes(recs []api.Job, nodes []api.Node) []chaosViolation {
	for i := range recs {
		if recs[i].State.Active() {
			return nil // settle cancelled everything; checkStates reports this one
		}
	}
	var v []chaosViolation
	for _, n := range nodes {
		if n.AllocCPUs != 0 || n.AllocMemMB != 0 || len(n.AllocGPUs) != 0 {
			v = append(v, chaosViolation{"3-alloc", 0, fmt.Sprintf("node %s still has %d CPUs, %d MB and GPUs %v allocated with no job active",
				n.Name, n.AllocCPUs, n.AllocMemMB, n.AllocGPUs)})
		}
	}
	return v
}
