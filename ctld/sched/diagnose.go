package sched

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/hostlist"
)

// histogram counts why nodes were turned away for one job, k8s style.
// It is reset per job and keeps its buffers.
type histogram struct {
	total, available int
	codes            []api.DetailCode
	counts           []int
}

func (h *histogram) reset(total int) {
	h.total, h.available = total, 0
	h.codes, h.counts = h.codes[:0], h.counts[:0]
}

func (h *histogram) add(code api.DetailCode) { h.addN(code, 1) }

func (h *histogram) addN(code api.DetailCode, n int) {
	if n <= 0 || code == "" {
		return
	}
	for i, c := range h.codes {
		if c == code {
			h.counts[i] += n
			return
		}
	}
	h.codes = append(h.codes, code)
	h.counts = append(h.counts, n)
}

func (h *histogram) count(code api.DetailCode) int {
	for i, c := range h.codes {
		if c == code {
			return h.counts[i]
		}
	}
	return 0
}

// String renders "1/4 nodes available: 2 InsufficientGPU, 1 NodeDrained",
// codes by count (highest first), then by name.
func (h *histogram) String() string {
	type bin struct {
		code api.DetailCode
		n    int
	}
	bins := make([]bin, len(h.codes))
	for i := range h.codes {
		bins[i] = bin{h.codes[i], h.counts[i]}
	}
	slices.SortFunc(bins, func(a, b bin) int {
		if c := cmp.Compare(b.n, a.n); c != 0 {
			return c
		}
		return cmp.Compare(a.code, b.code)
	})
	var b strings.Builder
	b.WriteString(strconv.Itoa(h.available))
	b.WriteByte('/')
	b.WriteString(strconv.Itoa(h.total))
	b.WriteString(" nodes available")
	for i, x := range bins {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Itoa(x.n))
		b.WriteByte(' ')
		b.WriteString(string(x.code))
	}
	return b.String()
}

// diagnose classifies a job that did not fit now (and was not turned
// away by a reserved node): Resources when it would fit on the usable
// nodes of its partition if they were empty, NodeDown when it would fit
// only once down or drained nodes return, BadConstraints when it could
// never fit.
func (p *pass) diagnose(r *Request) (api.ReasonCode, string) {
	switch {
	case p.fitsEmpty(r, false):
		return api.ReasonResources, p.hist.String()
	case p.fitsEmpty(r, true):
		return api.ReasonNodeDown, p.hist.String() + "; needs nodes that are down or drained"
	}
	return api.ReasonBadConstraints, p.explainImpossible(r)
}

// fitsEmpty reports whether r would fit in its partition if every node
// were empty (total capacity, idle, nothing reserved). Unless allUp,
// unusable nodes do not count. Required nodes must hold their own slots;
// for the other slots it checks, at the last slot of each run of equal
// slots, that enough nodes can hold it (the slots shrink, so that is
// enough).
func (p *pass) fitsEmpty(r *Request, allUp bool) bool {
	for k, i := range r.Required {
		if !allUp && !p.nodes[i].Usable {
			return false
		}
		if p.chain.check(r, &r.Slots[k], p.emptyView(i)) != "" {
			return false
		}
	}
	if r.OnlyRequired {
		return true
	}
	base := len(r.Required)
	members := p.parts[r.Part].members
	for k := base; k < r.Nodes; k++ {
		if k+1 < r.Nodes && r.Slots[k+1] == r.Slots[k] {
			continue
		}
		need, have := k-base+1, 0
		for _, i := range members {
			n := &p.nodes[i]
			if n.required == r.stamp || (!allUp && !n.Usable) {
				continue
			}
			if p.chain.check(r, &r.Slots[k], p.emptyView(i)) == "" {
				if have++; have >= need {
					break
				}
			}
		}
		if have < need {
			return false
		}
	}
	return true
}

// explainImpossible says, for a request that could never fit in its
// partition, which part of it is impossible.
func (p *pass) explainImpossible(r *Request) string {
	ps := &p.parts[r.Part]
	part := ps.info.Name
	for k, i := range r.Required {
		info := p.nodes[i].Info
		switch code := p.chain.check(r, &r.Slots[k], p.emptyView(i)); code {
		case "":
		case api.DetailInsufficientTmpDisk:
			return fmt.Sprintf("required node %s has %d MB of temporary disk, --tmp asks for %d MB", info.Name, info.TmpDiskMB, r.TmpDiskMB)
		case api.DetailTooManyTasks:
			return fmt.Sprintf("required node %s can never run %d tasks: at most %d per node (MaxTasksPerNode)", info.Name, r.Slots[k].Tasks, api.MaxTasksPerNode(info.CPUs))
		default:
			return fmt.Sprintf("required node %s can never hold %s: %s", info.Name, slotText(&r.Slots[k]), code)
		}
	}
	base := len(r.Required)
	if base >= len(r.Slots) {
		return "the required nodes can never hold the job"
	}
	largest, smallest := &r.Slots[base], &r.Slots[len(r.Slots)-1]
	if why := p.explainFeatures(r); why != "" {
		return why
	}

	var maxCPUs, maxGPUs, eligible, fit, maxPct int
	var maxMem, maxGPUMem int64
	modelSeen := r.GPUType == ""
	featureless := true // no node of the right model matches -C
	// tmpFits: some node of the right model and features has the --tmp
	// asked; else maxTmp is the most they have.
	tmpFits, maxTmp := false, int64(0)
	for _, i := range ps.members {
		if p.nodes[i].required == r.stamp {
			continue
		}
		v := p.emptyView(i)
		if (gpuModelFilter{}).Check(r, smallest, v) != "" {
			continue
		}
		modelSeen = true
		if (featureFilter{}).Check(r, smallest, v) == "" {
			featureless = false
			if (tmpDiskFilter{}).Check(r, smallest, v) == "" {
				tmpFits = true
			} else {
				maxTmp = max(maxTmp, v.Info.TmpDiskMB)
			}
		}
		if p.chain.checkStatic(r, smallest, v) != "" {
			continue
		}
		eligible++
		maxCPUs, maxGPUs, maxMem = max(maxCPUs, v.FreeCPUs), max(maxGPUs, len(v.FreeGPUs)), max(maxMem, v.FreeMemMB)
		if r.Sliced {
			gm, gp := r.sliceCaps(v.Info)
			maxGPUMem, maxPct = max(maxGPUMem, gm), max(maxPct, gp)
		}
		if p.chain.check(r, smallest, v) == "" {
			fit++
		}
	}
	switch {
	case !modelSeen:
		return fmt.Sprintf("no node of partition %s has GPU model %s", part, r.GPUType)
	case eligible == 0 && r.Features != nil && featureless:
		// Some node matches -C, but not one of the requested GPU model.
		return fmt.Sprintf("no node of partition %s with GPU model %s has features matching --constraint=%s", part, r.GPUType, r.Features)
	case eligible == 0 && !featureless && !tmpFits:
		return fmt.Sprintf("%d MB of temporary disk per node requested (--tmp), nodes of partition %s have at most %d MB", r.TmpDiskMB, part, maxTmp)
	case eligible == 0:
		return fmt.Sprintf("no node of partition %s is left after -w/-x", part)
	case largest.GPUs > maxGPUs:
		return fmt.Sprintf("%d GPUs per node requested, nodes of partition %s have at most %d", largest.GPUs, part, maxGPUs)
	case r.Sliced && explainSlice(largest, part, maxGPUMem, maxPct) != "":
		return explainSlice(largest, part, maxGPUMem, maxPct)
	case largest.CPUs > maxCPUs:
		return fmt.Sprintf("%d CPUs per node requested, nodes of partition %s have at most %d", largest.CPUs, part, maxCPUs)
	case largest.Tasks > largest.CPUs && largest.Tasks > api.MaxTasksPerNode(maxCPUs):
		return fmt.Sprintf("%d tasks per node requested (--overcommit), nodes of partition %s run at most %d (MaxTasksPerNode)", largest.Tasks, part, api.MaxTasksPerNode(maxCPUs))
	case largest.MemMB > maxMem:
		return fmt.Sprintf("%d MB memory per node requested, nodes of partition %s have at most %d MB", largest.MemMB, part, maxMem)
	}
	return fmt.Sprintf("%d nodes with %s requested, partition %s has %d that can hold it",
		r.Nodes-base, slotText(smallest), part, fit)
}

// slotText prints a slot for diagnosis messages: "8 CPUs, 64000 MB, 2 GPUs".
func slotText(s *Slot) string {
	t := strconv.Itoa(s.CPUs) + " CPUs"
	if s.MemMB > 0 {
		t += ", " + strconv.FormatInt(s.MemMB, 10) + " MB"
	}
	if s.GPUs > 0 && s.Sliced() {
		t += ", " + strconv.Itoa(s.GPUs) + " GPU slices of " + strings.TrimPrefix(sliceText(s), "slice ")
	} else if s.GPUs > 0 {
		t += ", " + strconv.Itoa(s.GPUs) + " GPUs"
	}
	return t
}

// why says in a few words where a started job went and what it left.
func (p *pass) why(r *Request) string {
	how := "best fit"
	switch {
	case r.Exclusive:
		how = "exclusive"
	case r.OnlyRequired:
		how = "required"
	}
	if len(p.picked) == 1 {
		n := &p.nodes[p.picked[0]]
		if n.Info.GPUs > 0 {
			w := fmt.Sprintf("%s on %s: %d/%d GPUs free left", how, n.Info.Name, len(n.FreeGPUs), n.Info.GPUs)
			if p.gpuWhy != "" {
				w += "; " + p.gpuWhy
			}
			return w
		}
		return fmt.Sprintf("%s on %s: %d/%d CPUs free left", how, n.Info.Name, n.FreeCPUs, n.Info.CPUs)
	}
	names := make([]string, len(p.picked))
	whole := true
	for k, i := range p.picked {
		n := &p.nodes[i]
		names[k] = n.Info.Name
		whole = whole && (r.Exclusive || n.Info.GPUs > 0 && r.Slots[k].GPUs >= n.Info.GPUs && !r.Slots[k].Sliced())
	}
	kind := "nodes"
	if whole {
		kind = "whole nodes"
	}
	w := fmt.Sprintf("%s on %d %s %s", how, len(names), kind, hostlist.Compress(names))
	switch {
	case p.sw >= 0:
		w += " under " + p.topo.where(p.sw)
	case p.topo != nil && len(r.Required) == 0:
		w += " (no single switch holds the job)"
	}
	if p.linkNodes > 0 {
		w += fmt.Sprintf("; link score %d/%d over %d nodes", p.linkScore, p.linkIdeal, p.linkNodes)
	}
	switch {
	case p.numaNodes == 1:
		w += "; GPUs on 1 NUMA node per node"
	case p.numaNodes > 1:
		w += fmt.Sprintf("; GPUs on up to %d NUMA nodes per node", p.numaNodes)
	}
	return w
}

// CheckFeasible reports whether spec could ever run in part, judged on
// the total (not free) capacity of the partition's nodes with every node
// up and empty. The controller calls it at submit to refuse what Slurm
// refuses with "Requested node configuration is not available"; why says
// what is impossible. nodes may be the whole cluster: only part's members
// count. It checks neither time limits nor MaxNodes (those leave a job
// pending, as in Slurm) and does not modify its arguments.
func CheckFeasible(spec *api.JobSpec, part *PartitionInfo, nodes []NodeInfo, cfg Config) (ok bool, why string) {
	return NewFeasibility(part, nodes, cfg).Check(spec)
}

// Feasibility answers CheckFeasible for any number of requests against
// one partition and capacity, building the pass (copies and indexes of
// every node) once: on 512 nodes that was most of a submission's
// checks. Checks run one at a time; it is safe for concurrent use.
type Feasibility struct {
	part  *PartitionInfo
	nodes []NodeInfo
	cfg   Config

	mu sync.Mutex
	p  *pass // nil until the first check, and when its stamps run out
}

// NewFeasibility prepares checks against part (nil: no such partition)
// and nodes, which it keeps and never modifies.
func NewFeasibility(part *PartitionInfo, nodes []NodeInfo, cfg Config) *Feasibility {
	return &Feasibility{part: part, nodes: nodes, cfg: cfg}
}

// maxFeasibilityStamps bounds the checks one pass serves: each takes a
// stamp, and node marks compare equal to the current one, so the
// counter must never wrap.
const maxFeasibilityStamps = 1 << 31

// Check is CheckFeasible for spec.
func (f *Feasibility) Check(spec *api.JobSpec) (ok bool, why string) {
	if spec == nil {
		return false, "no job specification"
	}
	if f.part == nil {
		return false, fmt.Sprintf("partition %s does not exist", spec.Partition)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.p == nil || f.p.stamp >= maxFeasibilityStamps {
		f.p = newPass(&Snapshot{Nodes: f.nodes, Partitions: map[string]*PartitionInfo{f.part.Name: f.part}}, f.cfg)
	}
	ok, why = f.p.feasible(spec, f.part)
	// The pass outlives the check: it keeps neither the submission (its
	// script and environment) nor every --constraint ever parsed.
	f.p.req.Job = nil
	f.p.feasJob = api.Job{}
	if len(f.p.chain.constraints) > maxFeasibilityConstraints {
		f.p.chain.constraints = nil
	}
	return ok, why
}

// maxFeasibilityConstraints bounds the parsed --constraint strings a
// Feasibility keeps between checks.
const maxFeasibilityConstraints = 256

// feasible is Check on a pass at full capacity.
func (p *pass) feasible(spec *api.JobSpec, part *PartitionInfo) (ok bool, why string) {
	// The pass's own Job: a fresh one was a quarter of a submission's garbage
	// (api.Job is some 2 KB).
	job := &p.feasJob
	*job = api.Job{JobSpec: *spec}
	if _, detail, ok := p.resolve(job, 0); !ok {
		return false, detail
	}
	r := &p.req
	if n := len(p.parts[0].members); r.Nodes > n {
		return false, fmt.Sprintf("%d nodes requested, partition %s has %d", r.Nodes, part.Name, n)
	}
	p.fillRequest(spec)
	if why := slicingRefused(r, part); why != "" {
		return false, why
	}
	for k := range r.Features.Alternatives() {
		if r.FeatureAlt = k; p.fitsEmpty(r, true) {
			return true, ""
		}
	}
	r.FeatureAlt = p.likelyAlt(r)
	return false, p.explainImpossible(r)
}
