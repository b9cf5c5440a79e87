package api

import (
	"fmt"
	"slices"
	"strings"
)

// ResolveGPUs makes a submission's GPU options agree with each other and
// with its node and task counts, the way Slurm's cons_tres reads them
// (gres_job_state_validate), and fills in the counts they imply:
//
//   - --gpus with --gpus-per-node fixes the node count (--gpus=16
//     --gpus-per-node=8 is -N2); --gpus must be a multiple of
//     --gpus-per-node, and -N, when given, must allow that count;
//   - --gpus with --gpus-per-task fixes the task count (--gpus=8
//     --gpus-per-task=2 is -n4), which -n, when given, must equal;
//   - --gpus-per-node with --gpus-per-task fixes the tasks per node;
//   - --gpus-per-task takes its task count from -n, --gpus,
//     --ntasks-per-node or -N (one task per node; without any of them
//     one task on one node, as srun's allocations ask);
//   - no per-node or per-task count may exceed --gpus, and the
//     allocation has at least one GPU per node (--gpus=2 -N4 is refused).
//
// --gpus alone (no -N) is a total: the scheduler spans as many nodes as
// it needs (sched's Request.Nodes). ResolveGPUs changes only Nodes,
// Tasks and TasksPerNode, and only where they were not given; errors
// name the options that disagree.
func (s *JobSpec) ResolveGPUs() error {
	g, gn, gt := s.GPUs, s.GPUsPerNode, s.GPUsPerTask
	if g == 0 && gn == 0 && gt == 0 {
		return nil
	}
	switch {
	case g > 0 && gn > g:
		return fmt.Errorf("--gpus-per-node=%d is more than --gpus=%d", gn, g)
	case g > 0 && gt > g:
		return fmt.Errorf("--gpus-per-task=%d is more than --gpus=%d", gt, g)
	case gn > 0 && gt > gn:
		return fmt.Errorf("--gpus-per-task=%d is more than --gpus-per-node=%d", gt, gn)
	}
	if g > 0 && gn > 0 {
		if g%gn != 0 {
			return fmt.Errorf("--gpus=%d is not a multiple of --gpus-per-node=%d", g, gn)
		}
		n := g / gn
		if s.Nodes > 0 && (n < s.Nodes || n > max(s.MaxNodes, s.Nodes)) {
			return fmt.Errorf("--gpus=%d with --gpus-per-node=%d needs %d nodes, outside the %s requested with -N",
				g, gn, n, nodeRange(s.Nodes, s.MaxNodes))
		}
		s.Nodes, s.MaxNodes = n, 0
	}
	if gt > 0 {
		switch {
		case g > 0:
			if g%gt != 0 {
				return fmt.Errorf("--gpus=%d is not a multiple of --gpus-per-task=%d", g, gt)
			}
			if t := g / gt; s.Tasks == 0 {
				s.Tasks = t
			} else if s.Tasks != t {
				return fmt.Errorf("--gpus=%d with --gpus-per-task=%d makes %d tasks, not the %d of -n", g, gt, t, s.Tasks)
			}
		case s.Tasks > 0 || s.TasksPerNode > 0:
		case s.Nodes > 0 && (s.MaxNodes == 0 || s.MaxNodes == s.Nodes):
			// Slurm's implicit task count: one per node.
			s.Tasks = s.Nodes
		default:
			// One task per node, as srun's allocations have it
			// (sbatch itself refuses --gpus-per-task without a count).
		}
		if gn > 0 {
			if gn%gt != 0 {
				return fmt.Errorf("--gpus-per-node=%d is not a multiple of --gpus-per-task=%d", gn, gt)
			}
			if tpn := gn / gt; s.TasksPerNode == 0 {
				s.TasksPerNode = tpn
			} else if s.TasksPerNode != tpn {
				return fmt.Errorf("--gpus-per-node=%d with --gpus-per-task=%d makes %d tasks per node, not the %d of --ntasks-per-node",
					gn, gt, tpn, s.TasksPerNode)
			}
		}
	}
	if g > 0 && gn == 0 && gt == 0 && s.Nodes > g {
		return fmt.Errorf("--gpus=%d is fewer than the %d nodes of -N: the allocation has at least one GPU per node", g, s.Nodes)
	}
	return nil
}

// nodeRange spells -N's count or range.
func nodeRange(lo, hi int) string {
	if hi > lo {
		return fmt.Sprintf("%d-%d", lo, hi)
	}
	return fmt.Sprint(lo)
}

// TaskGPUs splits a node's GPUs among its tasks for --gpus-per-task:
// the node's task k (counted from 0 on each node, in the order tasks
// are laid out) gets a.GPUs[k×g : (k+1)×g], in the allocation's order,
// as Slurm's --gpu-bind=per_task:g binds them. It returns nil when the
// job asked for no GPUs per task (every task then sees all the node's
// GPUs) or a does not hold g GPUs for each of its tasks.
func (s *JobSpec) TaskGPUs(a *NodeAlloc) [][]int {
	g := s.GPUsPerTask
	if g <= 0 || a.Tasks <= 0 || len(a.GPUs) < g*a.Tasks {
		return nil
	}
	out := make([][]int, a.Tasks)
	for k := range out {
		out[k] = a.GPUs[k*g : (k+1)*g : (k+1)*g]
	}
	return out
}

// PartitionNames splits a partition request ("a,b", -p's list) into its
// names in the order given, without blanks or repeats.
func PartitionNames(s string) []string {
	if !strings.Contains(s, ",") {
		if s = strings.TrimSpace(s); s == "" {
			return nil
		}
		return []string{s}
	}
	var out []string
	for _, name := range strings.Split(s, ",") {
		if name = strings.TrimSpace(name); name != "" && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

// ReqPartition is the partitions the job may run in, as requested: a
// list ("a,b") when -p named several, which the job keeps in
// PartitionList once it starts in one of them and Partition names that
// one.
func (j *Job) ReqPartition() string {
	if j.PartitionList != "" {
		return j.PartitionList
	}
	return j.Partition
}

// ShownPartition is the job's partition as squeue and scontrol show it:
// the requested list while the job is pending, the partition it runs
// (or ran) in otherwise.
func (j *Job) ShownPartition() string {
	if j.State == StatePending {
		return j.ReqPartition()
	}
	return j.Partition
}

// InPartition reports whether the job belongs to partition name for
// listings (squeue -p): the one it runs or ran in, or, while pending,
// any of those it may run in.
func (j *Job) InPartition(name string) bool {
	if j.State != StatePending || !strings.Contains(j.ReqPartition(), ",") {
		return j.Partition == name
	}
	return slices.Contains(PartitionNames(j.ReqPartition()), name)
}
