package integration

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// TestPrivateData: a cluster with every private_data word, as nobody
// (a regular user) and root (an operator), through the real commands:
// nobody sees only their own jobs, queues and trails, no nodes; root
// sees everything; acting on root's job by id stays refused.
func TestPrivateData(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root: the test runs commands as nobody")
	}
	c := newClusterOpts(t, clusterOpts{nodes: 1, ctldYAML: `private_data: [jobs, usage, nodes, events]
queues:
  - {name: ml, users: [nobody, root]}
  - {name: ops, users: [daemon]}
submit: {rate_per_queue: 10000}
`})
	asNobody := func(args ...string) result { return c.cliAs(nobodyCred, c.workDir(), args...) }
	asRoot := func(args ...string) result { return c.cli(args...) }
	// lines is the ids a listing printed, sorted.
	lines := func(r result) []string {
		t.Helper()
		if r.code != 0 {
			t.Fatalf("exit %d: %s%s", r.code, r.out, r.err)
		}
		ids := strings.Fields(r.out)
		slices.Sort(ids)
		return ids
	}

	theirs := c.submitAs(nobodyCred, "#!/bin/sh\nsleep 300\n", "-A", "ml")
	mine := c.submit("#!/bin/sh\nsleep 300\n", "-A", "ml", "--hold")
	c.waitState(theirs, api.StateRunning, 20*time.Second)
	own, other := fmt.Sprint(theirs), fmt.Sprint(mine)
	both := []string{own, other}
	slices.Sort(both)

	// squeue and sacct: nobody's job only, whatever they ask for.
	for _, tt := range []struct {
		args   []string
		nobody []string
	}{
		{args: []string{"squeue", "-h", "-o", "%i"}, nobody: []string{own}},
		{args: []string{"squeue", "-h", "-o", "%i", "-u", "root"}, nobody: nil},
		{args: []string{"squeue", "-h", "-o", "%i", "-t", "all"}, nobody: []string{own}},
		{args: []string{"sacct", "-a", "-X", "-n", "-P", "--format=JobID"}, nobody: []string{own}},
		{args: []string{"sacct", "-X", "-n", "-P", "--format=JobID", "-j", other}, nobody: nil},
	} {
		got := lines(asNobody(tt.args...))
		if !slices.Equal(got, tt.nobody) {
			t.Errorf("nobody: %v printed %v, want %v", tt.args, got, tt.nobody)
		}
	}
	if got := lines(asRoot("squeue", "-h", "-o", "%i")); !slices.Equal(got, both) {
		t.Errorf("root: squeue printed %v, want %v", got, both)
	}
	if got := lines(asRoot("sacct", "-a", "-X", "-n", "-P", "--format=JobID")); !slices.Equal(got, both) {
		t.Errorf("root: sacct -a printed %v, want %v", got, both)
	}
	// sprio lists pending jobs: root's held one, for root only.
	for _, tt := range []struct {
		run  func(...string) result
		want []string
	}{{asNobody, nil}, {asRoot, []string{other}}} {
		var ids []string
		for _, l := range strings.Split(strings.TrimSpace(tt.run("sprio", "-h").out), "\n") {
			if f := strings.Fields(l); len(f) > 0 {
				ids = append(ids, f[0])
			}
		}
		if !slices.Equal(ids, tt.want) {
			t.Errorf("sprio printed jobs %v, want %v", ids, tt.want)
		}
	}

	// Another user's job does not exist for nobody's scontrol and
	// events; acting on it by id is refused and changes nothing.
	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"scontrol", "show", "job", other}, 1, "slurm_load_jobs error: Invalid job id specified"},
		{[]string{"tide", "events", other}, 1, "Invalid job id specified"},
		{[]string{"scancel", other}, 1, "Access/permission denied"},
		{[]string{"scontrol", "release", other}, 1, "Access/permission denied"},
		{[]string{"sinfo"}, 1, "Access/permission denied: node information is for operators on this cluster (private_data: nodes)"},
		{[]string{"scontrol", "show", "node"}, 1, "Access/permission denied"},
		{[]string{"tide", "audit"}, 1, "the audit log is for operators"},
	} {
		r := asNobody(tt.args...)
		if r.code != tt.code || !strings.Contains(r.err, tt.want) || strings.Contains(r.out, "root") {
			t.Errorf("nobody: %v: exit %d, out %q, err %q; want exit %d with %q", tt.args, r.code, r.out, r.err, tt.code, tt.want)
		}
	}
	if j := c.job(mine); j.State != api.StatePending || j.HoldKind == api.HoldNone {
		t.Errorf("root's job after nobody: %s hold %q", j.State, j.HoldKind)
	}
	for _, args := range [][]string{
		{"scontrol", "show", "job", own}, {"tide", "events", own}, {"scontrol", "-d", "show", "job", own},
	} {
		if r := asNobody(args...); r.code != 0 || !strings.Contains(r.out, own) {
			t.Errorf("nobody: %v of their own job: exit %d, %s%s", args, r.code, r.out, r.err)
		}
	}
	// The operator sees it all.
	for _, args := range [][]string{
		{"scontrol", "show", "job", own}, {"tide", "events", own}, {"sinfo"}, {"scontrol", "show", "node"},
	} {
		if r := asRoot(args...); r.code != 0 || r.out == "" {
			t.Errorf("root: %v: exit %d, %s%s", args, r.code, r.out, r.err)
		}
	}

	// Queues (usage): nobody sees the queue they may submit to.
	queues := func(r result) []string {
		var names []string
		for _, l := range strings.Split(strings.TrimSpace(r.out), "\n") {
			names = append(names, strings.SplitN(l, "|", 2)[0])
		}
		return names
	}
	if got := queues(asNobody("tide", "queues", "-n", "-P")); !slices.Equal(got, []string{"ml"}) {
		t.Errorf("nobody: tide queues: %v, want [ml]", got)
	}
	if got := queues(asRoot("tide", "queues", "-n", "-P")); !slices.Equal(got, []string{"ml", "ops"}) {
		t.Errorf("root: tide queues: %v, want [ml ops]", got)
	}

	// scontrol show config says so, as Slurm's does.
	r := asNobody("scontrol", "show", "config")
	if !strings.Contains(r.out, "PrivateData             = events,jobs,nodes,usage\n") {
		t.Errorf("show config lacks PrivateData:\n%s", r.out)
	}
}
