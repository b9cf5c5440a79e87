package scontrol

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/tide-hpc/tide/cli/scontrol/jobfmt"
	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/hostlist"
)

// renderBlock lays out a node or partition record: unlike jobs, Slurm
// ends these with a bare blank line ("\n\n", or "\n" with -o).
func (r *record) renderBlock(oneLiner bool) string {
	if oneLiner {
		return strings.Join(r.lines, " ") + "\n"
	}
	return strings.Join(r.lines, "\n   ") + "\n\n"
}

func (o *Options) showNode(ctx context.Context, args []string) error {
	if len(args) > 1 {
		return fmt.Errorf("too many arguments for keyword: show node")
	}
	c, err := o.API()
	if err != nil {
		return err
	}
	nl, err := c.Nodes(ctx)
	if err != nil {
		return fmt.Errorf("slurm_load_node error: %w", err)
	}
	nodes := nl.Nodes
	if len(args) == 1 {
		want, err := hostlist.Expand(args[0])
		if err != nil {
			return fmt.Errorf("invalid node list %q: %w", args[0], err)
		}
		byName := map[string]*api.Node{}
		for i := range nl.Nodes {
			byName[nl.Nodes[i].Name] = &nl.Nodes[i]
		}
		nodes = nil
		for _, w := range want {
			n, ok := byName[w]
			if !ok {
				return api.Errorf(api.ErrNotFound, "Node %s not found", w)
			}
			nodes = append(nodes, *n)
		}
	}
	if len(nodes) == 0 {
		fmt.Fprintln(o.IO.Out, "No nodes in the system")
		return nil
	}
	var b strings.Builder
	for i := range nodes {
		b.WriteString(o.nodeRecord(&nodes[i], nl.Now).renderBlock(o.OneLiner))
	}
	_, err = fmt.Fprint(o.IO.Out, b.String())
	return err
}

// nodeRecord lays out one node in Slurm 22.05's order. Tide models no
// sockets or cores, so every CPU counts as one single-core socket, which
// is how Slurm itself describes a node configured with only CPUs=.
func (o *Options) nodeRecord(n *api.Node, now time.Time) *record {
	r := &record{}
	loc := o.Loc
	first := "NodeName=" + n.Name + " "
	if n.Arch != "" {
		first += "Arch=" + n.Arch + " "
	}
	r.add("%sCoresPerSocket=1 ", first)
	load := "N/A"
	if !n.LastSeen.IsZero() && n.Responding {
		load = fmt.Sprintf("%.2f", n.CPULoad)
	}
	r.add("CPUAlloc=%d CPUEfctv=%d CPUTot=%d CPULoad=%s", n.AllocCPUs, n.CPUs, n.CPUs, load)
	feat := orNull(strings.Join(n.Features, ","))
	r.add("AvailableFeatures=%s", feat)
	r.add("ActiveFeatures=%s", feat)
	model := n.GPUModel()
	if len(n.GPUs) > 0 {
		r.add("Gres=%s", gresString(model, len(n.GPUs)))
	} else {
		r.add("Gres=(null)")
	}
	if o.Details && len(n.GPUs) > 0 {
		// AllocGPUs lists a GPU shared by slices once per slice.
		used := slices.Compact(slices.Sorted(slices.Values(n.AllocGPUs)))
		r.add("GresUsed=%s(IDX:%s)", gresString(model, len(used)), jobfmt.IdxRanges(used))
	}
	if len(n.GPUs) > 0 {
		whole, shared, free := n.GPUCounts()
		r.add("GPUTot=%d GPUWhole=%d GPUShared=%d GPUFree=%d", len(n.GPUs), whole, shared, free)
		if len(n.SharedGPUs) > 0 {
			r.add("SharedGPUs=%s", jobfmt.SharedGPUs(n))
		}
	}
	line := fmt.Sprintf("NodeAddr=%s NodeHostName=%s", orNull(nodeAddr(n)), orNull(n.Hostname))
	if n.Version != "" {
		line += " Version=" + n.Version
	}
	r.add("%s", line)
	if n.OS != "" {
		r.add("OS=%s ", n.OS)
	}
	free := "N/A"
	if !n.LastSeen.IsZero() && n.Responding {
		free = fmt.Sprint(n.FreeMemMB)
	}
	r.add("RealMemory=%d AllocMem=%d FreeMem=%s Sockets=%d Boards=1", n.MemoryMB, n.AllocMemMB, free, n.CPUs)
	r.add("State=%s ThreadsPerCore=1 TmpDisk=%d Weight=1 Owner=N/A MCS_label=N/A", n.LongState(), n.TmpDiskMB)
	if len(n.Partitions) > 0 {
		r.add("Partitions=%s ", strings.Join(n.Partitions, ","))
	}
	r.add("BootTime=%s SlurmdStartTime=%s", fmtTimeOr(n.BootTime, loc, "None"), fmtTimeOr(n.Registered, loc, "None"))
	busy := n.AllocCPUs > 0 || len(n.AllocGPUs) > 0
	lastBusy := "Unknown"
	if busy && !now.IsZero() {
		// Tide does not record when a node was last busy; a busy node
		// is busy now.
		lastBusy = fmtTime(now, loc)
	}
	r.add("LastBusyTime=%s", lastBusy)
	r.add("CfgTRES=%s", tres{cpu: n.CPUs, memMB: n.MemoryMB, billing: n.CPUs, gpus: len(n.GPUs)})
	r.add("AllocTRES=%s", tres{cpu: n.AllocCPUs, memMB: n.AllocMemMB, gpus: n.GPUsInUse()})
	r.add("CapWatts=n/a")
	r.add("CurrentWatts=0 AveWatts=0")
	r.add("ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s")
	if n.Reason != "" {
		if n.ReasonTime.IsZero() {
			r.add("Reason=%s", n.Reason)
		} else {
			r.add("Reason=%s [%s@%s]", n.Reason, orDefault(n.ReasonUser, "Unknown"), fmtTime(n.ReasonTime, loc))
		}
	}
	return r
}

func (o *Options) showPartition(ctx context.Context, args []string) error {
	if len(args) > 1 {
		return fmt.Errorf("too many arguments for keyword: show partition")
	}
	c, err := o.API()
	if err != nil {
		return err
	}
	nl, err := c.Nodes(ctx)
	if err != nil {
		return fmt.Errorf("slurm_load_partitions error: %w", err)
	}
	parts := nl.Partitions
	if len(args) == 1 {
		parts = nil
		for _, p := range nl.Partitions {
			if p.Name == args[0] {
				parts = append(parts, p)
			}
		}
		if len(parts) == 0 {
			return api.Errorf(api.ErrNotFound, "Partition %s not found", args[0])
		}
	}
	if len(parts) == 0 {
		fmt.Fprintln(o.IO.Out, "No partitions in the system")
		return nil
	}
	byName := map[string]*api.Node{}
	for i := range nl.Nodes {
		byName[nl.Nodes[i].Name] = &nl.Nodes[i]
	}
	var b strings.Builder
	for i := range parts {
		b.WriteString(partitionRecord(&parts[i], byName).renderBlock(o.OneLiner))
	}
	_, err = fmt.Fprint(o.IO.Out, b.String())
	return err
}

// partLimit prints a partition time: NONE when unset for DefaultTime,
// UNLIMITED for no maximum.
func partLimit(secs int64, unset string) string {
	switch {
	case secs == api.Infinite:
		return "UNLIMITED"
	case secs <= 0:
		return unset
	}
	return api.FormatElapsedLong(secs)
}

func yesNo(b bool) string {
	if b {
		return "YES"
	}
	return "NO"
}

func partitionRecord(p *api.Partition, nodes map[string]*api.Node) *record {
	var t tres
	for _, name := range p.Nodes {
		if n, ok := nodes[name]; ok {
			t.cpu += n.CPUs
			t.memMB += n.MemoryMB
			t.gpus += len(n.GPUs)
		}
	}
	t.node = len(p.Nodes)
	t.billing = t.cpu
	maxNodes := "UNLIMITED"
	if p.MaxNodes > 0 {
		maxNodes = fmt.Sprint(p.MaxNodes)
	}
	tier := p.Priority
	if tier <= 0 {
		tier = 1
	}
	expr := p.NodesExpr
	if expr == "" {
		expr = hostlist.Compress(p.Nodes)
	}
	r := &record{}
	r.add("PartitionName=%s", p.Name)
	a := &p.Access
	r.add("AllowGroups=%s AllowAccounts=%s AllowQos=%s", api.FormatAccessList(a.AllowGroups),
		api.FormatAccessList(a.AllowAccounts), api.FormatAccessList(a.AllowQOS))
	if len(a.DenyAccounts) > 0 || len(a.DenyQOS) > 0 {
		// Slurm prints these lines only when set.
		var deny []string
		if len(a.DenyAccounts) > 0 {
			deny = append(deny, "DenyAccounts="+strings.Join(a.DenyAccounts, ","))
		}
		if len(a.DenyQOS) > 0 {
			deny = append(deny, "DenyQos="+strings.Join(a.DenyQOS, ","))
		}
		r.add("%s", strings.Join(deny, " "))
	}
	r.add("AllocNodes=ALL Default=%s QoS=N/A", yesNo(p.Default))
	r.add("DefaultTime=%s DisableRootJobs=NO ExclusiveUser=NO GraceTime=0 Hidden=NO", partLimit(p.DefaultTime, "NONE"))
	r.add("MaxNodes=%s MaxTime=%s MinNodes=0 LLN=NO MaxCPUsPerNode=UNLIMITED", maxNodes, partLimit(p.MaxTime, "UNLIMITED"))
	r.add("Nodes=%s", orNull(expr))
	r.add("PriorityJobFactor=1 PriorityTier=%d RootOnly=NO ReqResv=NO OverSubscribe=NO", tier)
	r.add("OverTimeLimit=NONE PreemptMode=OFF")
	r.add("State=%s TotalCPUs=%d TotalNodes=%d SelectTypeParameters=NONE",
		strings.ToUpper(orDefault(p.State, "UP")), t.cpu, t.node)
	// Slurm prints the per-GPU defaults as JobDefaults=DefCpuPerGPU=N,DefMemPerGPU=MB.
	var defs []string
	if p.DefCPUsPerGPU > 0 {
		defs = append(defs, fmt.Sprintf("DefCpuPerGPU=%d", p.DefCPUsPerGPU))
	}
	if p.DefMemPerGPUMB > 0 {
		defs = append(defs, fmt.Sprintf("DefMemPerGPU=%d", p.DefMemPerGPUMB))
	}
	r.add("JobDefaults=%s", orNull(strings.Join(defs, ",")))
	r.add("DefMemPerNode=UNLIMITED MaxMemPerNode=UNLIMITED")
	r.add("TRES=%s", t)
	return r
}

func (o *Options) showHostnames(args []string) error {
	expr := strings.Join(args, ",")
	if expr == "" {
		expr = o.Getenv("SLURM_JOB_NODELIST")
	}
	if expr == "" {
		return fmt.Errorf("no hostlist given and SLURM_JOB_NODELIST is not set")
	}
	hosts, err := hostlist.Expand(expr)
	if err != nil {
		return fmt.Errorf("invalid hostlist %q: %w", expr, err)
	}
	var b strings.Builder
	for _, h := range hosts {
		b.WriteString(h)
		b.WriteByte('\n')
	}
	_, err = fmt.Fprint(o.IO.Out, b.String())
	return err
}

func (o *Options) showHostlist(args []string) error {
	expr := strings.Join(args, ",")
	if expr == "" {
		return fmt.Errorf("no host names given for show hostlist")
	}
	hosts, err := hostlist.Expand(expr)
	if err != nil {
		return fmt.Errorf("invalid host names %q: %w", expr, err)
	}
	_, err = fmt.Fprintln(o.IO.Out, hostlist.Compress(hosts))
	return err
}

// nodeAddr is Slurm's NodeAddr for n: where the node is reached. Tide's
// nodes call the controller, so that is the address a node declares,
// else the host of its step listener (where srun connects), else, as
// Slurm's default, its hostname.
func nodeAddr(n *api.Node) string {
	for _, a := range []string{n.Addr, n.StepAddr} {
		if a == "" {
			continue
		}
		h, _, err := net.SplitHostPort(a)
		if err != nil {
			h = a
		}
		if ip := net.ParseIP(h); h != "" && (ip == nil || !ip.IsUnspecified()) {
			return h
		}
	}
	return n.Hostname
}
