package sinfo

import (
	"bufio"
	"time"

	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/ctld/api"
)

// jsonOutput is sinfo --json: Slurm's openapi layout ({"nodes": [...],
// "partitions": [...]}) with snake_case keys, plus per-GPU detail. Times
// are unix seconds (0 when unknown); limits are minutes (null when
// unlimited).
type jsonOutput struct {
	Errors     []string        `json:"errors"`
	Nodes      []jsonNode      `json:"nodes"`
	Partitions []jsonPartition `json:"partitions"`
}

type jsonNode struct {
	Name            string    `json:"name"`
	Hostname        string    `json:"hostname"`
	Address         string    `json:"address"`
	State           string    `json:"state"`
	StateFlags      []string  `json:"state_flags"`
	Partitions      []string  `json:"partitions"`
	CPUs            int       `json:"cpus"`
	AllocCPUs       int       `json:"alloc_cpus"`
	IdleCPUs        int       `json:"idle_cpus"`
	CPULoad         int64     `json:"cpu_load"`
	RealMemory      int64     `json:"real_memory"`
	AllocMemory     int64     `json:"alloc_memory"`
	FreeMemory      int64     `json:"free_memory"`
	Features        string    `json:"features"`
	Gres            string    `json:"gres"`
	GresUsed        string    `json:"gres_used"`
	GPUsTotal       int       `json:"gpus_total"`
	GPUsAlloc       int       `json:"gpus_alloc"`
	GPUsIdle        int       `json:"gpus_idle"`
	GPUs            []jsonGPU `json:"gpus"`
	Reason          string    `json:"reason"`
	ReasonSetByUser string    `json:"reason_set_by_user"`
	ReasonChangedAt int64     `json:"reason_changed_at"`
	SlurmdVersion   string    `json:"slurmd_version"`
	OperatingSystem string    `json:"operating_system"`
	Architecture    string    `json:"architecture"`
	BootTime        int64     `json:"boot_time"`
	LastSeen        int64     `json:"last_seen"`
}

type jsonGPU struct {
	Index     int    `json:"index"`
	UUID      string `json:"uuid"`
	Model     string `json:"model"`
	MemoryMB  int64  `json:"memory_mb"`
	Health    string `json:"health"`
	Allocated bool   `json:"allocated"`
}

type jsonPartition struct {
	Name         string `json:"name"`
	Nodes        string `json:"nodes"`
	Default      bool   `json:"default"`
	State        string `json:"state"`
	MaxTime      *int64 `json:"maximum_time"`
	DefaultTime  *int64 `json:"default_time"`
	MaxNodes     *int   `json:"maximum_nodes_per_job"`
	PriorityTier int    `json:"priority_tier"`
	TotalNodes   int    `json:"total_nodes"`
	TotalCPUs    int    `json:"total_cpus"`
	TotalGPUs    int    `json:"total_gpus"`
}

func unix(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.Unix()
}

func minutes(secs int64) *int64 {
	if secs <= 0 {
		return nil
	}
	m := (secs + 59) / 60
	return &m
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
	feat := features(e, n)
	if len(n.Features) == 0 {
		feat = ""
	}
	return jsonNode{
		Name: n.Name, Hostname: n.Hostname, Address: n.Addr,
		State: stateWord(n), StateFlags: flags, Partitions: parts,
		CPUs: n.CPUs, AllocCPUs: n.AllocCPUs, IdleCPUs: idle, CPULoad: cpuLoad(n),
		RealMemory: n.MemoryMB, AllocMemory: n.AllocMemMB, FreeMemory: n.FreeMemMB,
		Features: feat, Gres: gresConf(e, n), GresUsed: gresUsed(e, n),
		GPUsTotal: t, GPUsAlloc: a, GPUsIdle: i, GPUs: gpus,
		Reason: n.Reason, ReasonSetByUser: n.ReasonUser, ReasonChangedAt: unix(n.ReasonTime),
		SlurmdVersion: n.Version, OperatingSystem: n.OS, Architecture: n.Arch,
		BootTime: unix(n.BootTime), LastSeen: unix(n.LastSeen),
	}
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

func writeJSON(w *bufio.Writer, list *api.NodeList, p *plan, e *env) error {
	out := jsonOutput{Errors: []string{}, Nodes: []jsonNode{}, Partitions: []jsonPartition{}}
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
		jp := jsonPartition{
			Name: pt.Name, Nodes: pt.NodesExpr, Default: pt.Default, State: partAvail(pt),
			MaxTime: minutes(pt.MaxTime), DefaultTime: minutes(pt.DefaultTime),
			PriorityTier: max(pt.Priority, 1),
		}
		if pt.MaxNodes > 0 {
			jp.MaxNodes = &pt.MaxNodes
		}
		for _, name := range pt.Nodes {
			if n := byName[name]; n != nil {
				jp.TotalNodes++
				jp.TotalCPUs += n.CPUs
				jp.TotalGPUs += len(n.GPUs)
			}
		}
		out.Partitions = append(out.Partitions, jp)
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
