package sinfo

import (
	"bufio"
	"net"
	"strconv"
	"strings"

	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/cli/slurmfmt"
	"github.com/tide-hpc/tide/cli/slurmjson"
	"github.com/tide-hpc/tide/ctld/api"
)

// jsonOutput is sinfo --json: Slurm 22.05's openapi/v0.0.38 answer
// (meta, errors, then the nodes with v0.0.38's keys in its order), plus
// the "warnings" list of later releases and, after the nodes, the
// partitions in v0.0.38's partition layout (22.05's sinfo printed only
// nodes; scripts asking for limits read them here). Each node ends with
// Tide's per-GPU detail (gpus_total ... gpus), after Slurm's keys. Times
// are unix seconds (0 when unknown), limits minutes (-1 unlimited).
type jsonOutput struct {
	Meta       slurmjson.Legacy    `json:"meta"`
	Errors     []slurmjson.Error   `json:"errors"`
	Warnings   []slurmjson.Warning `json:"warnings"`
	Nodes      []jsonNode          `json:"nodes"`
	Partitions []jsonPartition     `json:"partitions"`
}

type jsonNode struct {
	Architecture              string    `json:"architecture"`
	BurstbufferNetworkAddress string    `json:"burstbuffer_network_address"`
	Boards                    int       `json:"boards"`
	BootTime                  int64     `json:"boot_time"`
	Comment                   string    `json:"comment"`
	Cores                     int       `json:"cores"`
	CPUBinding                int       `json:"cpu_binding"`
	CPULoad                   int64     `json:"cpu_load"`
	Extra                     string    `json:"extra"`
	FreeMemory                int64     `json:"free_memory"`
	CPUs                      int       `json:"cpus"`
	LastBusy                  int64     `json:"last_busy"`
	Features                  string    `json:"features"`
	ActiveFeatures            string    `json:"active_features"`
	Gres                      string    `json:"gres"`
	GresDrained               string    `json:"gres_drained"`
	GresUsed                  string    `json:"gres_used"`
	MCSLabel                  string    `json:"mcs_label"`
	Name                      string    `json:"name"`
	NextStateAfterReboot      string    `json:"next_state_after_reboot"`
	Address                   string    `json:"address"`
	Hostname                  string    `json:"hostname"`
	State                     string    `json:"state"`
	StateFlags                []string  `json:"state_flags"`
	NextStateAfterRebootFlags []string  `json:"next_state_after_reboot_flags"`
	OperatingSystem           string    `json:"operating_system"`
	Owner                     *string   `json:"owner"`
	Partitions                []string  `json:"partitions"`
	Port                      int       `json:"port"`
	RealMemory                int64     `json:"real_memory"`
	Reason                    string    `json:"reason"`
	ReasonChangedAt           int64     `json:"reason_changed_at"`
	ReasonSetByUser           string    `json:"reason_set_by_user"`
	SlurmdStartTime           int64     `json:"slurmd_start_time"`
	Sockets                   int       `json:"sockets"`
	Threads                   int       `json:"threads"`
	TemporaryDisk             int64     `json:"temporary_disk"`
	Weight                    int       `json:"weight"`
	TRES                      string    `json:"tres"`
	SlurmdVersion             string    `json:"slurmd_version"`
	AllocMemory               int64     `json:"alloc_memory"`
	AllocCPUs                 int       `json:"alloc_cpus"`
	IdleCPUs                  int       `json:"idle_cpus"`
	TRESUsed                  string    `json:"tres_used"`
	TRESWeighted              float64   `json:"tres_weighted"`
	GPUsTotal                 int       `json:"gpus_total"`
	GPUsAlloc                 int       `json:"gpus_alloc"`
	GPUsIdle                  int       `json:"gpus_idle"`
	GPUs                      []jsonGPU `json:"gpus"`
}

// jsonGPU is one GPU of a node (Tide's addition).
type jsonGPU struct {
	Index     int    `json:"index"`
	UUID      string `json:"uuid"`
	Model     string `json:"model"`
	MemoryMB  int64  `json:"memory_mb"`
	Health    string `json:"health"`
	Allocated bool   `json:"allocated"`
}

type jsonPartition struct {
	Flags                  []string `json:"flags"`
	PreemptionMode         []string `json:"preemption_mode"`
	AllowedAllocationNodes string   `json:"allowed_allocation_nodes"`
	AllowedAccounts        string   `json:"allowed_accounts"`
	AllowedGroups          string   `json:"allowed_groups"`
	AllowedQOS             string   `json:"allowed_qos"`
	Alternative            string   `json:"alternative"`
	BillingWeights         string   `json:"billing_weights"`
	DefaultMemoryPerCPU    *int64   `json:"default_memory_per_cpu"`
	DefaultMemoryPerNode   *int64   `json:"default_memory_per_node"`
	DefaultTimeLimit       *int64   `json:"default_time_limit"`
	DeniedAccounts         string   `json:"denied_accounts"`
	DeniedQOS              string   `json:"denied_qos"`
	PreemptionGraceTime    int      `json:"preemption_grace_time"`
	MaximumCPUsPerNode     int      `json:"maximum_cpus_per_node"`
	MaximumMemoryPerCPU    *int64   `json:"maximum_memory_per_cpu"`
	MaximumMemoryPerNode   *int64   `json:"maximum_memory_per_node"`
	MaximumNodesPerJob     int      `json:"maximum_nodes_per_job"`
	MaxTimeLimit           int64    `json:"max_time_limit"`
	MinNodesPerJob         int      `json:"min nodes per job"`
	Name                   string   `json:"name"`
	Nodes                  string   `json:"nodes"`
	OverTimeLimit          *int     `json:"over_time_limit"`
	PriorityJobFactor      int      `json:"priority_job_factor"`
	PriorityTier           int      `json:"priority_tier"`
	QOS                    string   `json:"qos"`
	State                  string   `json:"state"`
	TotalCPUs              int      `json:"total_cpus"`
	TotalNodes             int      `json:"total_nodes"`
	TRES                   string   `json:"tres"`
}

// noneNull is a string field: "" where Tide's text output prints (null).
func noneNull(s string) string {
	if s == slurmfmt.Null {
		return ""
	}
	return s
}

func toJSONNode(n *api.Node, e *env) jsonNode {
	a, i, t := gpuCounts(n)
	flags := []string{}
	if n.Drain {
		flags = append(flags, "DRAIN")
	}
	if !n.Responding && n.State != api.NodeUnknown {
		flags = append(flags, "NOT_RESPONDING")
	}
	used := map[int]bool{}
	for _, x := range n.AllocGPUs {
		used[x] = true
	}
	gpus := make([]jsonGPU, len(n.GPUs))
	for k, d := range n.GPUs {
		gpus[k] = jsonGPU{Index: d.Index, UUID: d.UUID, Model: d.Model, MemoryMB: d.MemoryMB, Health: d.Health, Allocated: used[d.Index]}
	}
	idle := n.CPUs - n.AllocCPUs
	if unavailable(n) {
		idle = 0
	}
	parts := n.Partitions
	if parts == nil {
		parts = []string{}
	}
	feat := noneNull(features(e, n))
	addr := n.Addr
	if h, _, err := net.SplitHostPort(addr); err == nil {
		addr = h
	}
	var lastBusy int64
	if busy(n) {
		// Tide does not record when a node was last busy; a busy node is
		// busy now.
		lastBusy = slurmjson.Unix(n.LastSeen)
	}
	return jsonNode{
		Architecture: n.Arch, Boards: 1, BootTime: slurmjson.Unix(n.BootTime), Cores: 1,
		CPULoad: cpuLoad(n), FreeMemory: n.FreeMemMB, CPUs: n.CPUs, LastBusy: lastBusy,
		Features: feat, ActiveFeatures: feat,
		Gres: noneNull(gresConf(e, n)), GresUsed: noneNull(gresUsed(e, n)),
		Name: n.Name, NextStateAfterReboot: "invalid", Address: addr, Hostname: n.Hostname,
		State: stateWord(n), StateFlags: flags, NextStateAfterRebootFlags: []string{},
		OperatingSystem: n.OS, Partitions: parts, RealMemory: n.MemoryMB,
		Reason: n.Reason, ReasonChangedAt: slurmjson.Unix(n.ReasonTime), ReasonSetByUser: n.ReasonUser,
		SlurmdStartTime: slurmjson.Unix(n.Registered), Sockets: n.CPUs, Threads: 1, TemporaryDisk: n.TmpDiskMB, Weight: 1,
		TRES:          tresString(n.CPUs, n.MemoryMB, len(n.GPUs), true),
		SlurmdVersion: n.Version, AllocMemory: n.AllocMemMB, AllocCPUs: n.AllocCPUs, IdleCPUs: idle,
		TRESUsed:  tresString(n.AllocCPUs, n.AllocMemMB, n.GPUsInUse(), false),
		GPUsTotal: t, GPUsAlloc: a, GPUsIdle: i, GPUs: gpus,
	}
}

// tresString is a node's TRES as Slurm writes it: "cpu=64,mem=512G,
// billing=64,gres/gpu=8" (billing only for the configured TRES).
func tresString(cpus int, memMB int64, gpus int, billing bool) string {
	var b strings.Builder
	b.WriteString("cpu=")
	b.WriteString(itoa(int64(cpus)))
	b.WriteString(",mem=")
	b.WriteString(api.FormatMemMB(memMB))
	if billing {
		b.WriteString(",billing=")
		b.WriteString(itoa(int64(cpus)))
	}
	if gpus > 0 {
		b.WriteString(",gres/gpu=")
		b.WriteString(itoa(int64(gpus)))
	}
	return b.String()
}

func itoa(n int64) string {
	return strconv.FormatInt(n, 10)
}

// stateWord is the base state in lower case, as Slurm's openapi prints
// it ("idle", "mixed", "allocated", "down", "unknown").
func stateWord(n *api.Node) string {
	switch {
	case n.State == api.NodeIdle && busy(n):
		return "mixed"
	case n.State == api.NodeMixed:
		return "mixed"
	case n.State == api.NodeAllocated:
		return "allocated"
	case n.State == api.NodeDown:
		return "down"
	case n.State == api.NodeUnknown:
		return "unknown"
	}
	return "idle"
}

// minutesOrUnlimited is a partition limit in minutes, -1 when unlimited.
func minutesOrUnlimited(secs int64) int64 {
	if m, ok := slurmjson.Minutes(secs); ok && secs != api.Infinite {
		return m
	}
	return -1
}

func toJSONPartition(pt *api.Partition, byName map[string]*api.Node) jsonPartition {
	jp := jsonPartition{
		Flags: []string{}, PreemptionMode: []string{"disabled"},
		AllowedAllocationNodes: "", AllowedAccounts: strings.Join(pt.Access.AllowAccounts, ","),
		AllowedGroups: strings.Join(pt.Access.AllowGroups, ","), AllowedQOS: strings.Join(pt.Access.AllowQOS, ","),
		DeniedAccounts: strings.Join(pt.Access.DenyAccounts, ","), DeniedQOS: strings.Join(pt.Access.DenyQOS, ","),
		MaximumCPUsPerNode: -1, MaximumNodesPerJob: -1, MaxTimeLimit: minutesOrUnlimited(pt.MaxTime),
		Name: pt.Name, Nodes: pt.NodesExpr, PriorityJobFactor: 1, PriorityTier: max(pt.Priority, 1),
		State: strings.ToUpper(partAvail(pt)),
	}
	if pt.Default {
		jp.Flags = append(jp.Flags, "default")
	}
	if m, ok := slurmjson.Minutes(pt.DefaultTime); ok && pt.DefaultTime != api.Infinite {
		jp.DefaultTimeLimit = &m
	}
	if pt.MaxNodes > 0 {
		jp.MaximumNodesPerJob = pt.MaxNodes
	}
	var cpus, gpus int
	var mem int64
	for _, name := range pt.Nodes {
		if n := byName[name]; n != nil {
			jp.TotalNodes++
			cpus += n.CPUs
			mem += n.MemoryMB
			gpus += len(n.GPUs)
		}
	}
	jp.TotalCPUs = cpus
	jp.TRES = tresString(cpus, mem, gpus, true)
	if i := strings.Index(jp.TRES, ",billing"); i > 0 {
		jp.TRES = jp.TRES[:i] + ",node=" + itoa(int64(jp.TotalNodes)) + jp.TRES[i:]
	}
	return jp
}

func writeJSON(w *bufio.Writer, list *api.NodeList, p *plan, e *env) error {
	out := jsonOutput{Meta: slurmjson.LegacyMeta("v0.0.38"), Errors: []slurmjson.Error{},
		Warnings: []slurmjson.Warning{}, Nodes: []jsonNode{}, Partitions: []jsonPartition{}}
	byName := map[string]*api.Node{}
	for i := range list.Nodes {
		n := &list.Nodes[i]
		byName[n.Name] = n
		if !p.filter.keep(n) {
			continue
		}
		if p.filter.partitions != nil && !inAny(n.Partitions, p.filter.partitions) {
			continue
		}
		out.Nodes = append(out.Nodes, toJSONNode(n, e))
	}
	for i := range list.Partitions {
		pt := &list.Partitions[i]
		if p.filter.partitions != nil && !p.filter.partitions[pt.Name] {
			continue
		}
		out.Partitions = append(out.Partitions, toJSONPartition(pt, byName))
	}
	return cmdutil.WriteJSON(w, out)
}

func inAny(xs []string, set map[string]bool) bool {
	for _, x := range xs {
		if set[x] {
			return true
		}
	}
	return false
}
