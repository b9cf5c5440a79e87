package root

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/ctld/api"
)

// compTimeout bounds what one completion may wait for the controller. A
// shell waits for the answer before it shows anything, so a controller
// that does not answer must cost a moment, not a hang: past it the
// values it would have given are left out, silently.
const compTimeout = time.Second

// completer answers the completion engine's questions about the cluster
// (partitions, queues, nodes, jobs), asking the controller at most once
// for each kind of answer. Every question has an answer: when the
// controller cannot be reached, or does not answer in time, it is
// empty.
type completer struct {
	f   *cmdutil.Factory
	ctx context.Context

	api     cmdutil.API
	apiErr  error
	asked   bool
	cluster *api.ClusterInfo
	nodes   *api.NodeList
	queues  *api.QueueList
	jobs    *api.JobList
}

// newCompleter returns a completer whose questions share one deadline
// (compTimeout from now); cancel releases it.
func newCompleter(f *cmdutil.Factory) (c *completer, cancel func()) {
	ctx, cancel := context.WithTimeout(context.Background(), compTimeout)
	return &completer{f: f, ctx: ctx}, cancel
}

func (c *completer) client() cmdutil.API {
	if !c.asked {
		c.asked = true
		c.api, c.apiErr = c.f.API()
	}
	if c.apiErr != nil || c.ctx.Err() != nil {
		return nil
	}
	return c.api
}

func (c *completer) clusterInfo() *api.ClusterInfo {
	if c.cluster == nil {
		c.cluster = &api.ClusterInfo{}
		if a := c.client(); a != nil {
			if ci, err := a.Cluster(c.ctx); err == nil {
				c.cluster = &ci
			}
		}
	}
	return c.cluster
}

func (c *completer) nodeList() *api.NodeList {
	if c.nodes == nil {
		c.nodes = &api.NodeList{}
		if a := c.client(); a != nil {
			if nl, err := a.Nodes(c.ctx); err == nil {
				c.nodes = &nl
			}
		}
	}
	return c.nodes
}

func (c *completer) queueList() *api.QueueList {
	if c.queues == nil {
		c.queues = &api.QueueList{}
		if a := c.client(); a != nil {
			if ql, err := a.Queues(c.ctx); err == nil {
				c.queues = &ql
			}
		}
	}
	return c.queues
}

func (c *completer) jobList() *api.JobList {
	if c.jobs == nil {
		c.jobs = &api.JobList{}
		if a := c.client(); a != nil {
			if jl, err := a.Jobs(c.ctx, api.JobFilter{}); err == nil {
				c.jobs = &jl
			}
		}
	}
	return c.jobs
}

// partitions are the partitions' names, the default one described so.
func (c *completer) partitions() []compCand {
	ps := c.clusterInfo().Partitions
	if len(ps) == 0 {
		ps = c.nodeList().Partitions
	}
	var out []compCand
	for _, p := range ps {
		d := fmt.Sprintf("%d nodes", len(p.Nodes))
		if p.Default {
			d += ", default"
		}
		out = append(out, compCand{Word: p.Name, Desc: d})
	}
	return out
}

// queueNames are the queues' names (Slurm accounts).
func (c *completer) queueNames() []compCand {
	var out []compCand
	for _, q := range c.queueList().Queues {
		out = append(out, compCand{Word: q.Name, Desc: "queue"})
	}
	return out
}

// qosNames are the job classes' names, with their levels.
func (c *completer) qosNames() []compCand {
	var out []compCand
	for _, q := range c.queueList().QOS {
		out = append(out, compCand{Word: q.Name, Desc: fmt.Sprintf("levels %d-%d", q.MinLevel, q.MaxLevel)})
	}
	return out
}

// nodeNames are the nodes' names, with their states.
func (c *completer) nodeNames() []compCand {
	var out []compCand
	for _, n := range c.nodeList().Nodes {
		out = append(out, compCand{Word: n.Name, Desc: string(n.State)})
	}
	return out
}

// gpuTypes are the short model names of the nodes' GPUs ("h100"), each
// with the number of GPUs of that type.
func (c *completer) gpuTypes() []compCand {
	count := map[string]int{}
	for _, n := range c.nodeList().Nodes {
		for i := range n.GPUs {
			if t := n.GPUs[i].ModelShort(); t != "" {
				count[t]++
			}
		}
	}
	types := make([]string, 0, len(count))
	for t := range count {
		types = append(types, t)
	}
	sort.Strings(types)
	out := make([]compCand, len(types))
	for i, t := range types {
		out[i] = compCand{Word: t, Desc: fmt.Sprintf("%d GPUs", count[t])}
	}
	return out
}

// clusterNames is the controller's cluster, and "all".
func (c *completer) clusterNames() []compCand {
	out := []compCand{{Word: "all"}}
	if n := c.clusterInfo().Name; n != "" {
		out = append([]compCand{{Word: n}}, out...)
	}
	return out
}

// userNames are the users the job list shows, the caller first.
func (c *completer) userNames() []compCand {
	var out []compCand
	uid := c.f.UID()
	for _, j := range c.jobList().Jobs {
		if j.User == "" || slices.ContainsFunc(out, func(o compCand) bool { return o.Word == j.User }) {
			continue
		}
		if int(j.UserID) == uid {
			out = append([]compCand{{Word: j.User}}, out...)
		} else {
			out = append(out, compCand{Word: j.User})
		}
	}
	return out
}

// myJobs are the ids of the caller's jobs in the given states (all when
// none): "12", an array's "7" and its tasks "7_3", each described by the
// job's name and state. Slurm's commands take these ids as written.
func (c *completer) myJobs(states ...api.JobState) []compCand {
	uid := c.f.UID()
	var out []compCand
	add := func(id, desc string) {
		if !slices.ContainsFunc(out, func(o compCand) bool { return o.Word == id }) {
			out = append(out, compCand{Word: id, Desc: desc})
		}
	}
	for _, j := range c.jobList().Jobs {
		if int(j.UserID) != uid || (len(states) > 0 && !slices.Contains(states, j.State)) {
			continue
		}
		desc := j.Name + " " + string(j.State)
		if j.ArrayJobID == 0 {
			add(strconv.FormatUint(j.ID, 10), desc)
			continue
		}
		add(strconv.FormatUint(j.ArrayJobID, 10), j.Name+" (array)")
		if len(j.ArrayPending) == 0 {
			add(strconv.FormatUint(j.ArrayJobID, 10)+"_"+strconv.Itoa(j.ArrayTaskID), desc)
		}
	}
	return out
}

// The fixed words some options take.
var (
	jobStateWords = []string{"PENDING", "RUNNING", "SUSPENDED", "COMPLETING", "COMPLETED", "CANCELLED",
		"FAILED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY", "all"}
	nodeStateWords = []string{"idle", "mixed", "allocated", "completing", "drained", "draining", "drain",
		"down", "responding", "no_respond"}
	signalWords = []string{"HUP", "INT", "QUIT", "KILL", "USR1", "USR2", "TERM", "CONT", "STOP", "TSTP"}
)

// valueKind is what an option's argument names.
type valueKind int

const (
	valNone valueKind = iota
	valPartitions
	valQueues
	valQOS
	valNodes
	valGPUs
	valGres
	valJobs
	valRunningJobs
	valDependency
	valUsers
	valJobStates
	valNodeStates
	valSignal
	valCluster
	valFile
	valDir
)

// optionValue returns the completion of option o's argument cur by the
// kind of value it names.
func (c *completer) optionValue(kind valueKind, cur string) compResult {
	switch kind {
	case valPartitions:
		return listOfCands(c.partitions(), cur, true)
	case valQueues:
		return listOfCands(c.queueNames(), cur, true)
	case valQOS:
		return listOfCands(c.qosNames(), cur, true)
	case valNodes:
		return listOfCands(c.nodeNames(), cur, true)
	case valUsers:
		return listOfCands(c.userNames(), cur, true)
	case valCluster:
		return listOfCands(c.clusterNames(), cur, true)
	case valJobs:
		return listOfCands(c.myJobs(), cur, true)
	case valRunningJobs:
		return listOfCands(c.myJobs(api.StateRunning), cur, true)
	case valJobStates:
		return listOf(jobStateWords, cur, true)
	case valNodeStates:
		return listOf(nodeStateWords, cur, true)
	case valSignal:
		return listOf(signalWords, cur, false)
	case valGPUs:
		// [type:]count: the types, each ending in ':' for the count.
		if strings.Contains(cur, ":") {
			return compResult{}
		}
		return typed(c.gpuTypes(), "", cur)
	case valGres:
		return c.gres(cur)
	case valDependency:
		return c.dependency(cur)
	case valFile:
		return compResult{Kind: compFiles, Partial: cur}
	case valDir:
		return compResult{Kind: compDirs, Partial: cur}
	}
	return compResult{}
}

// typed offers prefix+type+":" for each type matching cur.
func typed(types []compCand, prefix, cur string) compResult {
	var r compResult
	for _, t := range types {
		w := prefix + t.Word + ":"
		if strings.HasPrefix(w, cur) {
			r.Cands = append(r.Cands, compCand{Word: w, Desc: t.Desc})
		}
	}
	r.NoSpace = true
	return r
}

// gres completes --gres's comma-separated items: "gpu:", a GPU type
// after "gpu:", "shard:" and "mps:".
func (c *completer) gres(cur string) compResult {
	head, item := "", cur
	if i := strings.LastIndexByte(cur, ','); i >= 0 {
		head, item = cur[:i+1], cur[i+1:]
	}
	var r compResult
	if rest, ok := strings.CutPrefix(item, "gpu:"); ok && !strings.Contains(rest, ":") {
		r = typed(c.gpuTypes(), "gpu:", item)
	} else if !strings.Contains(item, ":") {
		r = typed([]compCand{{Word: "gpu", Desc: "whole GPUs"}, {Word: "shard", Desc: "shares of a GPU's memory"},
			{Word: "mps", Desc: "percent of a GPU's compute"}}, "", item)
	}
	for i := range r.Cands {
		r.Cands[i].Word = head + r.Cands[i].Word
	}
	return r
}

// dependency completes -d: a kind ("afterok:") or, after one, the
// caller's job ids.
func (c *completer) dependency(cur string) compResult {
	i := strings.LastIndexAny(cur, ",?")
	head, item := cur[:i+1], cur[i+1:]
	var r compResult
	if j := strings.LastIndexByte(item, ':'); j >= 0 {
		for _, id := range c.myJobs() {
			if w := item[:j+1] + id.Word; strings.HasPrefix(w, item) {
				r.Cands = append(r.Cands, compCand{Word: w, Desc: id.Desc})
			}
		}
	} else {
		var kinds []compCand
		for _, k := range depKinds() {
			kinds = append(kinds, compCand{Word: k})
		}
		r = typed(kinds, "", item)
		if strings.HasPrefix("singleton", item) {
			r.Cands = append(r.Cands, compCand{Word: "singleton"})
		}
		r.NoSpace = len(r.Cands) != 1 || r.Cands[0].Word != "singleton"
	}
	for i := range r.Cands {
		r.Cands[i].Word = head + r.Cands[i].Word
	}
	return r
}
