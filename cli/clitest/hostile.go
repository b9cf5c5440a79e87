package clitest

import (
	"strings"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/gres"
	"github.com/tide-hpc/tide/internal/termsafe"
)

// Strings a user (or a careless operator) can put into fields that
// every other user's squeue, scontrol, sacct and sinfo print. The golden
// tests of those commands show them escaped; their JSON keeps them
// exact.
const (
	// HostileName clears the screen, retitles the terminal and forges
	// a line (the name of issue 20's example).
	HostileName = "x\x1b[2J\x1b]0;pwned\a\nFAKE LINE"
	// HostileComment returns the cursor, sends a C1 CSI, reverses the
	// text after it, tabs and ends in an invalid byte.
	HostileComment = "ok\r\u009b2J\u202eexe.txt\ttab\xff"
	// HostileAccount hides the rest of the line (SGR 8, conceal).
	HostileAccount = "ml\x1b[8m"
	// HostileWorkDir is an OSC 8 hyperlink that points somewhere else.
	HostileWorkDir = "/home/mallory/\x1b]8;;http://evil.example/\x07exp"
	// HostileConstraint carries a bidi isolate and a DEL.
	HostileConstraint = "a100\u2066\x7f"
	// HostileFinishedName forges a whole sacct row.
	HostileFinishedName = "done\n999 FAKE COMPLETED"
	// HostileReason is a node reason that forges a sinfo row.
	HostileReason = "bad psu\x1b[2J\ngpu09 idle"
	// ChineseName is printable Unicode, printed as it is.
	ChineseName = "训练任务"
)

// HostileNow is the controller's clock in HostileCluster.
var HostileNow = time.Date(2026, 11, 29, 19, 31, 17, 0, time.UTC)

func hat(h, m, s int) time.Time { return time.Date(2026, 11, 29, h, m, s, 0, time.UTC) }

// HostileJobs are mallory's running job 301 (every hostile string), her
// finished job 303 (HostileFinishedName) and alice's pending job 302
// with a Chinese name whose diagnosis echoes mallory's constraint.
func HostileJobs() []api.Job {
	j301 := api.Job{
		ID: 301,
		JobSpec: api.JobSpec{
			Name: HostileName, Account: HostileAccount, Partition: "gpu", QOS: "normal",
			Comment: HostileComment, WorkDir: HostileWorkDir, SubmitDir: HostileWorkDir,
			SubmitHost: "login1", Stdout: "out\n%j.log", TimeLimit: 3600,
			Constraint: HostileConstraint, GPUsPerNode: 1,
		},
		UserID: 1666, GroupID: 1666, User: "mallory", Group: "mallory",
		State: api.StateRunning, Reason: api.ReasonNone, Cluster: "tide",
		SubmitTime: hat(19, 0, 0), EligibleTime: hat(19, 0, 0), StartTime: hat(19, 1, 0),
		Alloc: []api.NodeAlloc{{Node: "gpu01", CPUs: 4, MemoryMB: 16000, GPUs: []int{0}, Tasks: 1}},
	}
	j302 := api.Job{
		ID: 302,
		JobSpec: api.JobSpec{
			Name: ChineseName, Account: "ml", Partition: "gpu", WorkDir: "/home/alice/exp",
			SubmitDir: "/home/alice/exp", SubmitHost: "login1", TimeLimit: 3600,
			Constraint: HostileConstraint, GPUsPerNode: 1,
		},
		UserID: 1000, GroupID: 100, User: "alice", Group: "users",
		State: api.StatePending, Reason: api.ReasonResources, Cluster: "tide",
		ReasonDetail: "0/2 nodes available: 2 constraint " + HostileConstraint + " unmatched",
		SubmitTime:   hat(19, 10, 0), EligibleTime: hat(19, 10, 0),
	}
	j303 := api.Job{
		ID: 303,
		JobSpec: api.JobSpec{
			Name: HostileFinishedName, Account: "ml", Partition: "gpu", WorkDir: "/home/mallory",
			SubmitDir: "/home/mallory", SubmitHost: "login1", TimeLimit: 600,
		},
		UserID: 1666, GroupID: 1666, User: "mallory", Group: "mallory",
		State: api.StateCompleted, Reason: api.ReasonNone, Cluster: "tide",
		SubmitTime: hat(18, 0, 0), EligibleTime: hat(18, 0, 0), StartTime: hat(18, 1, 0), EndTime: hat(18, 5, 0),
		Alloc: []api.NodeAlloc{{Node: "gpu01", CPUs: 1, MemoryMB: 4000, Tasks: 1}},
	}
	return []api.Job{j301, j302, j303}
}

// HostileNodes are gpu01 (busy with job 301) and gpu02, drained with
// HostileReason.
func HostileNodes() []api.Node {
	node := func(name string) api.Node {
		devs, err := gres.Fake(name, gres.FakeConfig{Count: 2, Model: "a100", MemoryMB: 81920})
		if err != nil {
			panic(err)
		}
		return api.Node{
			Name: name, Addr: "10.0.0." + name[len(name)-1:], Hostname: name,
			State: api.NodeIdle, Responding: true, CPUs: 16, MemoryMB: 128000, GPUs: devs,
			Features: []string{"a100"}, Partitions: []string{"gpu"},
			BootTime: hat(8, 0, 0), Registered: hat(8, 0, 5), LastSeen: hat(19, 31, 15),
		}
	}
	n1 := node("gpu01")
	n1.State, n1.AllocCPUs, n1.AllocMemMB, n1.AllocGPUs = api.NodeMixed, 4, 16000, []int{0}
	n2 := node("gpu02")
	n2.Drain = true
	n2.Reason, n2.ReasonUser, n2.ReasonTime = HostileReason, "root", hat(18, 0, 0)
	return []api.Node{n1, n2}
}

// HostileTrail is job 301's trail, whose messages quote its name and
// comment as the controller's do.
func HostileTrail() map[uint64][]api.Event {
	return map[uint64][]api.Event{
		301: {
			{Time: hat(19, 0, 0), Kind: api.EventSubmit, State: api.StatePending, Message: "name " + HostileName, Actor: "mallory"},
			{Time: hat(19, 0, 30), Kind: api.EventUpdate, State: api.StatePending, Message: "Comment=" + HostileComment, Actor: "mallory"},
			{Time: hat(19, 1, 0), Kind: api.EventStart, State: api.StateRunning, Message: "on gpu01"},
		},
	}
}

// HostileCluster is a fake controller holding HostileJobs (303 as a
// finished accounting record), HostileNodes, one partition "gpu" and
// HostileTrail, at HostileNow.
func HostileCluster() *FakeAPI {
	jobs := HostileJobs()
	return &FakeAPI{
		Now: HostileNow, JobRecs: jobs[:2], Finished: jobs[2:], NodeRecs: HostileNodes(),
		Partitions: []api.Partition{{Name: "gpu", NodesExpr: "gpu[01-02]", Nodes: []string{"gpu01", "gpu02"},
			Default: true, DefaultTime: api.Infinite, MaxTime: api.Infinite, State: "UP"}},
		Trail: HostileTrail(),
		AuditLog: []api.AuditRecord{{Time: hat(19, 0, 30), UID: 1666, User: "mallory", Action: "update",
			Target: "job 301", Detail: "Comment=" + HostileComment}},
	}
}

// CheckTerminalSafe fails t when out holds anything a terminal acts on
// besides the newlines that end its lines, or when it has other than
// lines lines (a forged line would add one).
func CheckTerminalSafe(t testing.TB, out string, lines int) {
	t.Helper()
	got := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	for i, l := range got {
		if !termsafe.IsSafe(l) {
			t.Errorf("line %d of the output is not terminal-safe: %q", i+1, l)
		}
	}
	if len(got) != lines {
		t.Errorf("output has %d lines, want %d:\n%s", len(got), lines, out)
	}
}
