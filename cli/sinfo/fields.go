package sinfo

import (
	"strconv"
	"strings"
	"time"

	"github.com/tide-hpc/tide/cli/scontrol/jobfmt"
	"github.com/tide-hpc/tide/cli/slurmfmt"
	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/gres"
	"github.com/tide-hpc/tide/hostlist"
)

// env is what values depend on besides the record.
type env struct {
	now   time.Time
	loc   *time.Location
	exact bool // -e: group by sizes too instead of printing ranges
	// tf is SLURM_TIME_FORMAT's format for time stamps.
	tf slurmfmt.TimeFormat
}

// record is one output line: nodes of one partition (part is nil when the
// format shows nothing of the partition) that share the grouping values.
type record struct {
	part    *api.Partition
	partIdx int
	nodes   []*api.Node
}

// nodeField is one sinfo field. part fields depend on the partition, so
// records split by partition; key fields split records by a per-node
// value; the others summarize a record's nodes.
type nodeField struct {
	letter      byte
	names       []string
	header      string
	part        bool
	key         func(e *env, n *api.Node) string
	exactOnly   bool // key applies only with -e (else min/max ranges)
	noCut       bool
	headerNoCut bool
	value       func(e *env, dst []byte, r *record) []byte
}

// perNode prints the first node's key: right for fields that group.
func perNode(key func(e *env, n *api.Node) string) func(*env, []byte, *record) []byte {
	return func(e *env, dst []byte, r *record) []byte { return append(dst, key(e, r.nodes[0])...) }
}

func partStr(f func(p *api.Partition) string) func(*env, []byte, *record) []byte {
	return func(_ *env, dst []byte, r *record) []byte {
		if r.part == nil {
			return append(dst, "n/a"...)
		}
		return append(dst, f(r.part)...)
	}
}

func constant(s string) func(*env, []byte, *record) []byte {
	return func(_ *env, dst []byte, _ *record) []byte { return append(dst, s...) }
}

// minMax prints a per-node number over a record as Slurm does: "N" when
// all nodes agree, else "min+" (or "min-max" with rng).
func minMax(f func(n *api.Node) int64, rng bool) func(*env, []byte, *record) []byte {
	return func(_ *env, dst []byte, r *record) []byte {
		lo, hi := f(r.nodes[0]), f(r.nodes[0])
		for _, n := range r.nodes[1:] {
			lo, hi = min(lo, f(n)), max(hi, f(n))
		}
		dst = strconv.AppendInt(dst, lo, 10)
		switch {
		case lo == hi:
		case rng:
			dst = append(dst, '-')
			dst = strconv.AppendInt(dst, hi, 10)
		default:
			dst = append(dst, '+')
		}
		return dst
	}
}

func itoaKey(f func(n *api.Node) int64) func(*env, *api.Node) string {
	return func(_ *env, n *api.Node) string { return strconv.FormatInt(f(n), 10) }
}

func cpus(n *api.Node) int64   { return int64(n.CPUs) }
func memory(n *api.Node) int64 { return n.MemoryMB }

// tmpDisk is the node's TmpDisk in MB.
func tmpDisk(n *api.Node) int64 { return n.TmpDiskMB }

// unavailable reports whether a node's idle resources cannot be used:
// drained, down or not responding.
func unavailable(n *api.Node) bool {
	return n.Drain || n.State == api.NodeDown || !n.Responding
}

// busy reports whether a node runs something.
func busy(n *api.Node) bool {
	return n.AllocCPUs > 0 || len(n.AllocGPUs) > 0 || n.State == api.NodeAllocated || n.State == api.NodeMixed
}

// longState is %T: the compact state spelled out.
func longState(n *api.Node) string {
	s := n.SinfoState()
	star := strings.HasSuffix(s, "*")
	s = strings.TrimSuffix(s, "*")
	switch s {
	case "mix":
		s = "mixed"
	case "alloc":
		s = "allocated"
	case "drain":
		s = "drained"
	case "drng":
		s = "draining"
	case "unk":
		s = "unknown"
	}
	if star {
		s += "*"
	}
	return s
}

// stateRank orders states like Slurm's numeric node states (base state,
// then DRAIN and NOT_RESPONDING flags), for sorting.
func stateRank(n *api.Node) int {
	r := 0
	switch {
	case n.State == api.NodeDown:
		r = 1
	case n.State == api.NodeIdle && !busy(n):
		r = 2
	case n.State == api.NodeAllocated:
		r = 3
	case n.State == api.NodeMixed || busy(n):
		r = 5
	}
	if n.Drain {
		r |= 0x200
	}
	if !n.Responding {
		r |= 0x800
	}
	return r
}

// gpuModels groups a node's GPUs by model, in order of first appearance.
func gpuModels(devs []gres.Device) (models []string, counts map[string]int) {
	counts = map[string]int{}
	for _, d := range devs {
		if counts[d.ModelShort()] == 0 {
			models = append(models, d.ModelShort())
		}
		counts[d.ModelShort()]++
	}
	return models, counts
}

func gresPrefix(b []byte, model string) []byte {
	b = append(b, "gpu:"...)
	if model != "" {
		b = append(append(b, model...), ':')
	}
	return b
}

// gresConf is %G: "gpu:a100:8" (several models comma-separated), or
// "(null)" for a node without GPUs.
func gresConf(_ *env, n *api.Node) string {
	if len(n.GPUs) == 0 {
		return slurmfmt.Null
	}
	models, counts := gpuModels(n.GPUs)
	var b []byte
	for i, m := range models {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(gresPrefix(b, m), int64(counts[m]), 10)
	}
	return string(b)
}

// gresUsed is GresUsed: "gpu:a100:3(IDX:0-2)", "gpu:a100:0(IDX:N/A)".
func gresUsed(_ *env, n *api.Node) string {
	if len(n.GPUs) == 0 {
		return slurmfmt.Null
	}
	models, _ := gpuModels(n.GPUs)
	used := map[int]bool{}
	for _, i := range n.AllocGPUs {
		used[i] = true
	}
	var b []byte
	for k, m := range models {
		var idx []int
		for _, d := range n.GPUs {
			if d.ModelShort() == m && used[d.Index] {
				idx = append(idx, d.Index)
			}
		}
		if k > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(gresPrefix(b, m), int64(len(idx)), 10)
		b = append(b, "(IDX:"...)
		if len(idx) == 0 {
			b = append(b, "N/A"...)
		} else {
			b = slurmfmt.AppendRanges(b, idx)
		}
		b = append(b, ')')
	}
	return string(b)
}

// gpuCounts returns a node's allocated, idle and total GPUs. GPUs of a
// drained, down or silent node, and unhealthy GPUs, are not idle.
func gpuCounts(n *api.Node) (alloc, idle, total int) {
	total, alloc = len(n.GPUs), n.GPUsInUse()
	if unavailable(n) {
		return alloc, 0, total
	}
	used := map[int]bool{}
	for _, i := range n.AllocGPUs {
		used[i] = true
	}
	for _, d := range n.GPUs {
		if !used[d.Index] && (d.Health == "" || d.Health == gres.Healthy) {
			idle++
		}
	}
	return alloc, idle, total
}

func appendCounts(dst []byte, xs ...int) []byte {
	for i, x := range xs {
		if i > 0 {
			dst = append(dst, '/')
		}
		dst = strconv.AppendInt(dst, int64(x), 10)
	}
	return dst
}

func nodeNames(r *record) []string {
	out := make([]string, len(r.nodes))
	for i, n := range r.nodes {
		out[i] = n.Name
	}
	return out
}

func reasonKey(_ *env, n *api.Node) string {
	if n.Reason == "" {
		return "none"
	}
	return n.Reason
}

func reasonUser(_ *env, n *api.Node) string {
	if n.ReasonUser == "" {
		return "Unknown"
	}
	return n.ReasonUser
}

func reasonTime(e *env, n *api.Node) string {
	if n.ReasonTime.IsZero() {
		return "Unknown"
	}
	return e.tf.Format(n.ReasonTime, e.loc)
}

func features(_ *env, n *api.Node) string {
	if len(n.Features) == 0 {
		return slurmfmt.Null
	}
	return strings.Join(n.Features, ",")
}

func partName(p *api.Partition) string { return p.Name }

func partAvail(p *api.Partition) string {
	if p.State == "" {
		return "up"
	}
	return strings.ToLower(p.State)
}

func partitionStar(_ *env, dst []byte, r *record) []byte {
	if r.part == nil {
		return append(dst, "n/a"...)
	}
	dst = append(dst, r.part.Name...)
	if r.part.Default {
		dst = append(dst, '*')
	}
	return dst
}

func jobSize(p *api.Partition) string {
	if p.MaxNodes <= 0 {
		return "1-infinite"
	}
	return "1-" + strconv.Itoa(p.MaxNodes)
}

func defaultTime(p *api.Partition) string {
	if p.DefaultTime <= 0 && p.DefaultTime != api.Infinite {
		return "n/a"
	}
	return string(slurmfmt.AppendLimit(nil, p.DefaultTime))
}

func cpuLoad(n *api.Node) int64 { return int64(n.CPULoad*100 + 0.5) }

// loadRange prints CPU load as "12.50" or "1.50-35.25".
func loadRange(_ *env, dst []byte, r *record) []byte {
	lo, hi := cpuLoad(r.nodes[0]), cpuLoad(r.nodes[0])
	for _, n := range r.nodes[1:] {
		lo, hi = min(lo, cpuLoad(n)), max(hi, cpuLoad(n))
	}
	dst = appendHundredths(dst, lo)
	if hi != lo {
		dst = appendHundredths(append(dst, '-'), hi)
	}
	return dst
}

func appendHundredths(dst []byte, v int64) []byte {
	dst = strconv.AppendInt(dst, v/100, 10)
	return append(dst, '.', byte('0'+v%100/10), byte('0'+v%10))
}

// nodeFields finds sinfo's fields by letter and name.
var nodeFields = slurmfmt.Index[nodeField]{Build: nodeFieldList, Keys: func(f *nodeField) (byte, []string) { return f.letter, f.names }}

// nodeFieldList lists sinfo's fields in letter order; -O-only fields
// follow.
func nodeFieldList() []nodeField {
	return []nodeField{
		{letter: 'a', names: []string{"Available"}, header: "AVAIL", part: true, value: partStr(partAvail)},
		{letter: 'A', names: []string{"NodeAI"}, header: "NODES(A/I)", value: func(_ *env, dst []byte, r *record) []byte {
			a, i, _ := nodeStates(r)
			return appendCounts(dst, a, i)
		}},
		{letter: 'b', names: []string{"features_act"}, header: "ACTIVE_FEATURES", key: features, value: perNode(features)},
		{letter: 'B', names: []string{"MaxCPUsPerNode"}, header: "MAX_CPUS_PER_NODE", part: true, value: constant("UNLIMITED")},
		{letter: 'c', names: []string{"CPUs"}, header: "CPUS", key: itoaKey(cpus), exactOnly: true, value: minMax(cpus, false)},
		{letter: 'C', names: []string{"CPUsState"}, header: "CPUS(A/I/O/T)", value: cpuStates},
		{letter: 'd', names: []string{"Disk"}, header: "TMP_DISK", key: itoaKey(tmpDisk), exactOnly: true, value: minMax(tmpDisk, false)},
		{letter: 'D', names: []string{"Nodes"}, header: "NODES", value: func(_ *env, dst []byte, r *record) []byte {
			return strconv.AppendInt(dst, int64(len(r.nodes)), 10)
		}},
		{letter: 'e', names: []string{"FreeMem"}, header: "FREE_MEM", key: itoaKey(func(n *api.Node) int64 { return n.FreeMemMB }), exactOnly: true,
			value: minMax(func(n *api.Node) int64 { return n.FreeMemMB }, true)},
		{letter: 'E', names: []string{"Reason"}, header: "REASON", key: reasonKey, value: perNode(reasonKey)},
		{letter: 'f', names: []string{"Features"}, header: "AVAIL_FEATURES", key: features, value: perNode(features)},
		{letter: 'F', names: []string{"NodeAIOT"}, header: "NODES(A/I/O/T)", value: func(_ *env, dst []byte, r *record) []byte {
			a, i, o := nodeStates(r)
			return appendCounts(dst, a, i, o, len(r.nodes))
		}},
		{letter: 'g', names: []string{"Groups"}, header: "GROUPS", part: true, value: constant("all")},
		{letter: 'G', names: []string{"Gres"}, header: "GRES", key: gresConf, value: perNode(gresConf)},
		{letter: 'h', names: []string{"OverSubscribe"}, header: "OVERSUBSCRIBE", part: true, value: constant("NO")},
		{letter: 'H', names: []string{"TimeStamp"}, header: "TIMESTAMP", key: reasonTime, value: perNode(reasonTime)},
		{letter: 'l', names: []string{"Time"}, header: "TIMELIMIT", part: true, value: func(_ *env, dst []byte, r *record) []byte {
			if r.part == nil {
				return append(dst, "n/a"...)
			}
			return slurmfmt.AppendLimit(dst, r.part.MaxTime)
		}},
		{letter: 'L', names: []string{"DefaultTime"}, header: "DEFAULTTIME", part: true, value: partStr(defaultTime)},
		{letter: 'm', names: []string{"Memory"}, header: "MEMORY", key: itoaKey(memory), exactOnly: true, value: minMax(memory, false)},
		{letter: 'M', names: []string{"PreemptMode"}, header: "PREEMPT_MODE", part: true, value: constant("OFF")},
		{letter: 'n', names: []string{"NodeHost"}, header: "HOSTNAMES", noCut: true, value: func(_ *env, dst []byte, r *record) []byte {
			hs := make([]string, len(r.nodes))
			for i, n := range r.nodes {
				hs[i] = n.Hostname
				if hs[i] == "" {
					hs[i] = n.Name
				}
			}
			return append(dst, hostlist.Compress(hs)...)
		}},
		{letter: 'N', names: []string{"NodeList"}, header: "NODELIST", noCut: true, headerNoCut: true, value: func(_ *env, dst []byte, r *record) []byte {
			return append(dst, hostlist.Compress(nodeNames(r))...)
		}},
		{letter: 'o', names: []string{"NodeAddr"}, header: "NODE_ADDR", noCut: true, value: func(_ *env, dst []byte, r *record) []byte {
			for i, n := range r.nodes {
				if i > 0 {
					dst = append(dst, ',')
				}
				dst = append(dst, n.Addr...)
			}
			return dst
		}},
		{letter: 'O', names: []string{"CPUsLoad"}, header: "CPU_LOAD", key: func(_ *env, n *api.Node) string {
			return string(appendHundredths(nil, cpuLoad(n)))
		}, exactOnly: true, value: loadRange},
		{letter: 'p', names: []string{"PriorityTier"}, header: "PRIO_TIER", part: true, value: func(_ *env, dst []byte, r *record) []byte {
			if r.part == nil {
				return append(dst, "n/a"...)
			}
			return strconv.AppendInt(dst, int64(max(r.part.Priority, 1)), 10)
		}},
		{letter: 'P', names: []string{"Partition"}, header: "PARTITION", part: true, value: partitionStar},
		{letter: 'r', names: []string{"Root"}, header: "ROOT", part: true, value: constant("no")},
		{letter: 'R', names: []string{"PartitionName"}, header: "PARTITION", part: true, value: partStr(partName)},
		{letter: 's', names: []string{"Size"}, header: "JOB_SIZE", part: true, value: partStr(jobSize)},
		{letter: 'S', names: []string{"AllocNodes"}, header: "ALLOCNODES", part: true, value: constant("all")},
		{letter: 't', names: []string{"StateCompact"}, header: "STATE", key: func(_ *env, n *api.Node) string { return n.SinfoState() },
			value: perNode(func(_ *env, n *api.Node) string { return n.SinfoState() })},
		{letter: 'T', names: []string{"StateLong"}, header: "STATE", key: func(_ *env, n *api.Node) string { return longState(n) },
			value: perNode(func(_ *env, n *api.Node) string { return longState(n) })},
		{letter: 'u', names: []string{"User"}, header: "USER", key: reasonUser, value: perNode(reasonUser)},
		{letter: 'U', names: []string{"UserLong"}, header: "USER", key: reasonUser, value: perNode(reasonUser)},
		{letter: 'v', names: []string{"Version"}, header: "VERSION", key: func(_ *env, n *api.Node) string { return slurmfmt.OrNull(n.Version) },
			value: perNode(func(_ *env, n *api.Node) string { return slurmfmt.OrNull(n.Version) })},
		{letter: 'w', names: []string{"Weight"}, header: "WEIGHT", value: constant("1")},
		{letter: 'X', names: []string{"Sockets"}, header: "SOCKETS", key: itoaKey(cpus), exactOnly: true, value: minMax(cpus, false)},
		{letter: 'Y', names: []string{"Cores"}, header: "CORES", value: constant("1")},
		{letter: 'Z', names: []string{"Threads"}, header: "THREADS", value: constant("1")},
		{letter: 'z', names: []string{"SocketCoreThread"}, header: "S:C:T", key: itoaKey(cpus), exactOnly: true, value: func(e *env, dst []byte, r *record) []byte {
			return append(minMax(cpus, false)(e, dst, r), ":1:1"...)
		}},

		{names: []string{"GresUsed"}, header: "GRES_USED", key: gresUsed, value: perNode(gresUsed)},
		{names: []string{"AllocMem"}, header: "ALLOCMEM", key: itoaKey(func(n *api.Node) int64 { return n.AllocMemMB }), exactOnly: true,
			value: minMax(func(n *api.Node) int64 { return n.AllocMemMB }, false)},
		{names: []string{"StateComplete"}, header: "STATECOMPLETE", key: stateComplete, value: perNode(stateComplete)},
		// GPUsState is Tide's GPU counterpart of CPUsState.
		{names: []string{"GPUsState"}, header: "GPUS(A/I/T)", value: gpuStates},
		// GPUsShared splits allocated GPUs into whole and shared by slices
		// (Tide); GPUShared lists each shared GPU's slices and committed
		// memory.
		{names: []string{"GPUsShared"}, header: "GPUS(W/S/I/T)", value: gpuShares},
		{names: []string{"GPUShared"}, header: "GPU_SHARED", key: gpuShared, value: perNode(gpuShared)},
	}
}

// gpuShares sums whole-allocated, shared, idle and total GPUs over a
// record's nodes ("3/1/4/8").
func gpuShares(_ *env, dst []byte, r *record) []byte {
	var w, s, i, t int
	for _, n := range r.nodes {
		nw, ns, _ := n.GPUCounts()
		_, ni, nt := gpuCounts(n)
		w, s, i, t = w+nw, s+ns, i+ni, t+nt
	}
	return appendCounts(dst, w, s, i, t)
}

// gpuShared is a node's shared GPUs with their slices and committed
// memory, "(null)" for none.
func gpuShared(_ *env, n *api.Node) string {
	return slurmfmt.OrNull(jobfmt.SharedGPUs(n))
}

func stateComplete(_ *env, n *api.Node) string {
	s := strings.ToLower(string(n.State))
	if n.State == api.NodeIdle && busy(n) {
		s = "mixed"
	}
	if n.Drain {
		s += "+drain"
	}
	if !n.Responding && n.State != api.NodeUnknown {
		s += "+not_responding"
	}
	return s
}

// nodeStates counts a record's nodes as allocated (running something),
// idle, and other (drained, down or silent).
func nodeStates(r *record) (alloc, idle, other int) {
	for _, n := range r.nodes {
		switch {
		case unavailable(n):
			other++
		case busy(n):
			alloc++
		default:
			idle++
		}
	}
	return alloc, idle, other
}

func cpuStates(_ *env, dst []byte, r *record) []byte {
	var a, i, o, t int
	for _, n := range r.nodes {
		a += n.AllocCPUs
		t += n.CPUs
		if unavailable(n) {
			o += n.CPUs - n.AllocCPUs
		} else {
			i += n.CPUs - n.AllocCPUs
		}
	}
	return appendCounts(dst, a, i, o, t)
}

func gpuStates(_ *env, dst []byte, r *record) []byte {
	var a, i, t int
	for _, n := range r.nodes {
		na, ni, nt := gpuCounts(n)
		a, i, t = a+na, i+ni, t+nt
	}
	return appendCounts(dst, a, i, t)
}

// lookupField finds a field by -o letter (long=false) or -O name.
func lookupField(name string, long bool) (*nodeField, bool) {
	return nodeFields.Lookup(name, long)
}
