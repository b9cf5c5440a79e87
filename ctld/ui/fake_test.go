package ui

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/gres"
	"github.com/tide-hpc/tide/topology"
)

// fakeSource is a Source over fixed data, standing in for the
// controller. Its privacy is the test's: it returns what it holds.
type fakeSource struct {
	who      Identity
	cl       Cluster
	nodes    api.NodeList
	nodesErr error
	jobs     []api.Job
	events   map[uint64][]api.Event
	eventErr error
	queues   api.QueueList
	usage    JobUsage
	hist     History
	// tokens are the valid tokens and their users; every token expires
	// at expires.
	tokens  map[string]string
	expires time.Time
}

var _ Source = (*fakeSource)(nil)

func (f *fakeSource) Identity(*http.Request) Identity { return f.who }
func (f *fakeSource) Cluster(*http.Request) Cluster   { return f.cl }

func (f *fakeSource) Nodes(*http.Request) (api.NodeList, error) {
	if f.nodesErr != nil {
		return api.NodeList{}, f.nodesErr
	}
	return f.nodes, nil
}

func (f *fakeSource) Jobs(_ *http.Request, flt api.JobFilter) api.JobList {
	var out []api.Job
	for i := range f.jobs {
		j := &f.jobs[i]
		if (flt.All || len(flt.States) > 0 || !j.State.Terminal()) && flt.Match(j) {
			out = append(out, *j)
		}
	}
	return api.JobList{Jobs: out, Now: f.cl.Now}
}

func (f *fakeSource) Running(*http.Request) []RunningJob {
	var out []RunningJob
	for _, j := range f.jobs {
		if j.State.Active() {
			out = append(out, RunningJob{ID: j.ID, Label: j.ArrayID(), User: j.User, Alloc: j.Alloc})
		}
	}
	return out
}

func (f *fakeSource) Job(_ *http.Request, id uint64) (api.Job, error) {
	for _, j := range f.jobs {
		if j.ID == id {
			return j, nil
		}
	}
	return api.Job{}, api.Errorf(api.ErrNotFound, "Invalid job id specified")
}

func (f *fakeSource) Events(_ *http.Request, id uint64) ([]api.Event, error) {
	if f.eventErr != nil {
		return nil, f.eventErr
	}
	return f.events[id], nil
}

func (f *fakeSource) Queues(*http.Request) api.QueueList     { return f.queues }
func (f *fakeSource) Usage(*http.Request, *api.Job) JobUsage { return f.usage }
func (f *fakeSource) History(*http.Request) History          { return f.hist }
func (f *fakeSource) CheckToken(tok string) (string, time.Time, error) {
	if u, ok := f.tokens[tok]; ok {
		return u, f.expires, nil
	}
	return "", time.Time{}, api.Errorf(api.ErrUnauthenticated, "tidectld: authentication failed: token signature is invalid")
}

// fixedNow is the fake cluster's clock.
var fixedNow = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// smallCluster is four nodes under two leaf switches of one spine, and
// jobs in every state: every kind of GPU cell appears on its map.
//
//	gpu01 (s1): job 11 (alice) holds GPUs 0-3 whole, 90 % busy; GPU 7 unhealthy
//	gpu02 (s1): 3 slices of GPU 0 (jobs 12, 13 alice; 14 bob), 60 GiB of 80 committed
//	gpu03 (s2): drained, job 15 (bob) still on GPU 0
//	gpu04 (s2): down
//
// Pending: 21 (alice, Resources, planned start), 22 (bob, Priority),
// 23 (alice, held), 24 an array of 10 tasks; finished: 31 COMPLETED,
// 32 FAILED, 33 CANCELLED.
func smallCluster(t testing.TB) *fakeSource {
	tree, err := topology.Build([]topology.SwitchConfig{
		{Name: "s1", Nodes: "gpu[01-02]"}, {Name: "s2", Nodes: "gpu[03-04]"}, {Name: "spine", Switches: "s[1-2]"},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeSource{
		who: Identity{User: "alice", Known: true, Method: "jwt"},
		cl: Cluster{Name: "it", Version: "0.1.0", Now: fixedNow, Started: fixedNow.Add(-time.Hour), Scheduler: "sched/backfill",
			Tree: tree, Partitions: []string{"gpu", "short"}},
		events:  map[uint64][]api.Event{},
		tokens:  map[string]string{"good.token.sig": "alice"},
		expires: fixedNow.Add(8 * time.Hour),
	}
	node := func(name, sw string) api.Node {
		gpus, err := gres.Fake(name, gres.FakeConfig{Count: 8, Model: "a100", MemoryMB: 81920})
		if err != nil {
			t.Fatal(err)
		}
		st := make([]gres.Status, len(gpus))
		for i := range st {
			st[i] = gres.Status{Index: i, Health: gres.Healthy}
		}
		return api.Node{Name: name, Switch: sw, State: api.NodeIdle, Responding: true, CPUs: 64, MemoryMB: 512 << 10,
			GPUs: gpus, GPUStatus: st, Partitions: []string{"gpu"}}
	}
	n1, n2, n3, n4 := node("gpu01", "s1"), node("gpu02", "s1"), node("gpu03", "s2"), node("gpu04", "s2")
	n1.State, n1.AllocGPUs, n1.AllocCPUs = api.NodeMixed, []int{0, 1, 2, 3}, 16
	for i := 0; i < 4; i++ {
		n1.GPUStatus[i].UtilPct, n1.GPUStatus[i].MemUsedMB = 90, 70000
	}
	n1.GPUs[7].Health = gres.Unhealthy
	n1.GPUStatus[7] = gres.Status{Index: 7, Health: gres.Unhealthy, Reason: "XID 79: GPU has fallen off the bus"}
	n2.State, n2.AllocGPUs, n2.AllocCPUs = api.NodeMixed, []int{0, 0, 0}, 6
	n2.SharedGPUs = []api.GPUShare{{Index: 0, Slices: 3, MemMB: 61440}}
	n2.GPUStatus[0].UtilPct = 40
	n3.State, n3.Drain, n3.Reason, n3.AllocGPUs = api.NodeMixed, true, "bad fan", []int{0}
	n4.State, n4.Responding = api.NodeDown, false
	f.nodes = api.NodeList{Nodes: []api.Node{n1, n2, n3, n4}, Now: fixedNow}

	job := func(id uint64, user string, st api.JobState) api.Job {
		uid := uint32(1000)
		if user == "bob" {
			uid = 1001
		}
		return api.Job{ID: id, JobSpec: api.JobSpec{Name: "train-" + strconv.FormatUint(id, 10), Account: "research", QOS: "batch",
			Partition: "gpu", WorkDir: "/home/" + user, Nodes: 1, Tasks: 1, GPUs: 4, TimeLimit: 3600},
			User: user, UserID: uid, State: st, SubmitTime: fixedNow.Add(-time.Duration(id) * time.Minute), EffPriority: uint32(1000 - id)}
	}
	run := func(j api.Job, alloc ...api.NodeAlloc) api.Job {
		j.Alloc, j.StartTime = alloc, fixedNow.Add(-10*time.Minute)
		return j
	}
	j11 := run(job(11, "alice", api.StateRunning), api.NodeAlloc{Node: "gpu01", CPUs: 16, MemoryMB: 65536, GPUs: []int{0, 1, 2, 3}, Tasks: 1, NUMA: []int{0}})
	j11.Placement = "best fit on gpu01 under leaf s1; link score 400 (4 GPUs, NVLink)"
	j11.Stdout = "out-%j.txt"
	slice := func(id uint64, user string) api.Job {
		j := job(id, user, api.StateRunning)
		j.GPUs, j.GPUMemMB = 1, 20480
		return run(j, api.NodeAlloc{Node: "gpu02", CPUs: 2, MemoryMB: 8192, GPUs: []int{0}, GPUMemMB: 20480, Tasks: 1})
	}
	j15 := run(job(15, "bob", api.StateRunning), api.NodeAlloc{Node: "gpu03", CPUs: 4, MemoryMB: 8192, GPUs: []int{0}, Tasks: 1})
	j21 := job(21, "alice", api.StatePending)
	j21.Reason, j21.ReasonDetail, j21.ExpectedStart = api.ReasonResources, "0/4 nodes available: 2 InsufficientGPU, 1 NodeDrained, 1 NodeDown", fixedNow.Add(50*time.Minute)
	j22 := job(22, "bob", api.StatePending)
	j22.Reason = api.ReasonPriority
	j23 := job(23, "alice", api.StatePending)
	j23.Reason, j23.HoldKind = api.ReasonJobHeldUser, api.HoldUser
	j24 := job(24, "alice", api.StatePending)
	j24.ArrayJobID, j24.ArrayPending, j24.Array, j24.Reason = 24, api.NewTaskSet([]int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}), "0-9", api.ReasonPriority
	end := func(j api.Job, code int) api.Job {
		j.StartTime, j.EndTime, j.Exit = fixedNow.Add(-30*time.Minute), fixedNow.Add(-20*time.Minute), api.ExitStatus{Code: code}
		return j
	}
	f.jobs = []api.Job{j11, slice(12, "alice"), slice(13, "alice"), slice(14, "bob"), j15, j21, j22, j23, j24,
		end(job(31, "alice", api.StateCompleted), 0), end(job(32, "bob", api.StateFailed), 1), end(job(33, "alice", api.StateCancelled), 0)}
	f.events[11] = []api.Event{
		{JobID: 11, Time: fixedNow.Add(-11 * time.Minute), Kind: api.EventSubmit, State: api.StatePending, Message: "submitted by alice", Actor: "alice"},
		{JobID: 11, Time: fixedNow.Add(-10 * time.Minute), Kind: api.EventStart, State: api.StateRunning, Message: j11.Placement + " [alloc gpu01 cpus=16 mem_mb=65536 gpus=0,1,2,3]"},
	}
	f.queues = api.QueueList{DefaultQOS: "batch", Queues: []api.QueueStatus{
		{Name: "research", Guaranteed: 8, Cap: 16, UsedGPUs: 10, BorrowedGPUs: 2, Running: 5, Pending: 13, LendLimit: -1, BorrowLimit: 8, Users: []string{"alice", "bob"}},
		{Name: "vision", Parent: "research", Guaranteed: 4, UsedGPUs: 4, LendLimit: -1, BorrowLimit: -1, Groups: []string{"cv"}},
		{Name: "prod", Guaranteed: 16, LentGPUs: 2, LendLimit: -1, BorrowLimit: -1},
	}, QOS: []api.QOSStatus{{Name: "batch", MinLevel: 1, MaxLevel: 10, DefaultLevel: 5, Mode: api.PreemptRequeue, GraceTime: 300, Open: true}}}
	for i := 0; i < 120; i++ { // an hour of 30-second samples
		at := fixedNow.Add(-time.Hour + time.Duration(i)*30*time.Second)
		f.hist.Samples = append(f.hist.Samples, Sample{Time: at, GPUs: 32, Allocated: 8 + i%10, Stranded: i % 3, UtilPct: float64(40 + i%30),
			Running: 5, Pending: 13, Queues: []QueueSample{{Name: "research", Used: 8 + i%4}, {Name: "vision", Used: 4}, {Name: "prod"}}})
	}
	f.hist.Every = 30 * time.Second
	return f
}

// bigCluster is nodes × 8 GPUs under leaves of 32 nodes, every GPU
// held by a one-GPU job, and pending jobs up to jobs in all.
func bigCluster(t testing.TB, nodes, jobs int) *fakeSource {
	var cfg []topology.SwitchConfig
	var leaves []string
	for lo := 1; lo <= nodes; lo += 32 {
		name := fmt.Sprintf("leaf%02d", len(leaves)+1)
		cfg = append(cfg, topology.SwitchConfig{Name: name, Nodes: fmt.Sprintf("gpu[%04d-%04d]", lo, min(lo+31, nodes))})
		leaves = append(leaves, name)
	}
	tree, err := topology.Build(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeSource{who: Identity{User: "root", Operator: true, Known: true, Method: "jwt"},
		cl: Cluster{Name: "big", Now: fixedNow, Tree: tree, Partitions: []string{"gpu"}}}
	id := uint64(1)
	for i := 1; i <= nodes; i++ {
		name := fmt.Sprintf("gpu%04d", i)
		gpus, _ := gres.Fake(name, gres.FakeConfig{Count: 8, Model: "h100", MemoryMB: 81920})
		n := api.Node{Name: name, Switch: tree.LeafOf(name), State: api.NodeAllocated, Responding: true, CPUs: 64, MemoryMB: 512 << 10,
			GPUs: gpus, AllocGPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}, AllocCPUs: 64, Partitions: []string{"gpu"}}
		for g := 0; g < 8; g++ {
			n.GPUStatus = append(n.GPUStatus, gres.Status{Index: g, Health: gres.Healthy, UtilPct: (i*8 + g) % 101, MemUsedMB: 40000})
			f.jobs = append(f.jobs, api.Job{ID: id, JobSpec: api.JobSpec{Name: "j", Account: "q" + strconv.Itoa(i%8), Partition: "gpu", GPUs: 1},
				User: "u" + strconv.Itoa(int(id%50)), State: api.StateRunning, StartTime: fixedNow.Add(-time.Hour),
				Alloc: []api.NodeAlloc{{Node: name, CPUs: 8, MemoryMB: 1024, GPUs: []int{g}, Tasks: 1}}})
			id++
		}
		f.nodes.Nodes = append(f.nodes.Nodes, n)
	}
	for int(id) <= jobs {
		f.jobs = append(f.jobs, api.Job{ID: id, JobSpec: api.JobSpec{Name: "p", Account: "q" + strconv.Itoa(int(id%8)), Partition: "gpu", GPUs: 1 + int(id%8)},
			User: "u" + strconv.Itoa(int(id%50)), State: api.StatePending, Reason: api.ReasonResources, EffPriority: uint32(id % 977),
			SubmitTime: fixedNow.Add(-time.Duration(id) * time.Second), Share: api.Share{ExpectedStart: fixedNow.Add(time.Duration(id) * time.Second)}})
		id++
	}
	for q := 0; q < 8; q++ {
		f.queues.Queues = append(f.queues.Queues, api.QueueStatus{Name: "q" + strconv.Itoa(q), Guaranteed: nodes, UsedGPUs: nodes, LendLimit: -1, BorrowLimit: -1})
	}
	f.hist.Every = 30 * time.Second
	for i := 0; i < 2880; i++ {
		s := Sample{Time: fixedNow.Add(-24*time.Hour + time.Duration(i)*30*time.Second), GPUs: nodes * 8, Allocated: nodes * 8, UtilPct: 50}
		for q := 0; q < 8; q++ {
			s.Queues = append(s.Queues, QueueSample{Name: "q" + strconv.Itoa(q), Used: nodes})
		}
		f.hist.Samples = append(f.hist.Samples, s)
	}
	slices.SortFunc(f.jobs, func(a, b api.Job) int { return int(a.ID) - int(b.ID) })
	return f
}
