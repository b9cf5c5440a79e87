package integration

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/internal/stepcred"
	"github.com/tide-hpc/tide/internal/stepio"
)

// clusterKey is the key newClusterOpts writes: what every node holds,
// and what signed step grants before issue 21.
const clusterKey = "integration-test-key-0123456789"

// stepAttempt connects to a node's step listener as srun does and
// returns the node's error ("" when the step started) and, for a started
// step, its output.
func stepAttempt(t *testing.T, cl *cluster, node, addr string, sg api.SignedGrant) (nodeErr, out string) {
	t.Helper()
	c := cl.dialStep(t, addr, node)
	defer c.Close()
	hf, err := stepio.JSON(stepio.Hello, 0, stepio.HelloMsg{Grant: sg, StdinMode: stepio.StdinNone})
	if err != nil {
		t.Fatal(err)
	}
	if err := stepio.WriteFrame(c, hf); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(60 * time.Second))
	f, err := stepio.ReadFrame(c)
	if err != nil {
		t.Fatalf("no answer from %s: %v", addr, err)
	}
	if f.Type == stepio.Error {
		return string(f.Payload), ""
	}
	if f.Type != stepio.Ready {
		t.Fatalf("%s answered %s %q", addr, f.Type, f.Payload)
	}
	var b strings.Builder
	for {
		f, err := stepio.ReadFrame(c)
		if err != nil {
			return "", b.String()
		}
		if f.Type == stepio.Stdout || f.Type == stepio.Stderr {
			b.Write(f.Payload)
		}
	}
}

// hmacGrant is a grant as anyone with the cluster key could sign it
// before issue 21.
func hmacGrant(t *testing.T, g *api.StepGrant) api.SignedGrant {
	t.Helper()
	body, err := json.Marshal(g)
	if err != nil {
		t.Fatal(err)
	}
	m := hmac.New(sha256.New, []byte(clusterKey))
	m.Write(body)
	return api.SignedGrant{Body: body, Cred: hex.EncodeToString(m.Sum(nil))}
}

// TestStepGrants (issue 21): srun runs steps in batch jobs and
// allocations as before, with grants signed by the controller's own
// key; grants forged with the cluster key, signed for jobs that do not
// run on the node or for another user, tampered with or replayed start
// nothing on a real tided.
func TestStepGrants(t *testing.T) {
	c := stepCluster(t)

	t.Run("srun in a two-node batch job", func(t *testing.T) {
		j, out := c.batchOutput("#!/bin/sh\nsrun -l printenv SLURMD_NODENAME | sort\n", "-N2")
		if j.State != api.StateCompleted || out != "0: gpu01\n1: gpu02\n" {
			t.Fatalf("job %s %s, output:\n%s", j.State, j.Exit, out)
		}
	})
	t.Run("srun allocation on two nodes", func(t *testing.T) {
		r := c.cli("srun", "-N2", "-l", "printenv", "SLURMD_NODENAME")
		lines := strings.Split(strings.TrimSpace(r.out), "\n")
		sort.Strings(lines)
		if r.code != 0 || strings.Join(lines, "|") != "0: gpu01|1: gpu02" {
			t.Fatalf("srun exit %d, output %q, stderr %q", r.code, r.out, r.err)
		}
	})
	t.Run("srun inside salloc", func(t *testing.T) {
		out, code := c.salloc(t, fmt.Sprintf("%s/srun -l printenv SLURMD_NODENAME | sort; exit\n", binDir), "-N2")
		if code != 0 || !regexp.MustCompile(`0: gpu01\r?\n1: gpu02\r?\n`).MatchString(out) {
			t.Fatalf("salloc exit %d, terminal:\n%q", code, out)
		}
	})

	t.Run("forged, foreign, tampered and replayed grants start nothing", func(t *testing.T) {
		id := c.submit("#!/bin/sh\nsleep 300\n", "-N2")
		job := c.waitState(id, api.StateRunning, 30*time.Second)
		addr := nodeStepAddr(t, c, "gpu02")
		if addr == "" {
			t.Fatal("gpu02 registered no step listener")
		}
		mark := filepath.Join(c.workDir(), "forged-step-ran")
		cmd := []string{"/bin/sh", "-c", "echo ran >> " + mark}
		now := time.Now()
		grant := func(edit func(*api.StepGrant)) *api.StepGrant {
			g := &api.StepGrant{JobID: job.ID, StepID: 1000, JobName: job.Name, UserID: job.UserID, GroupID: job.GroupID, User: job.User,
				Issued: now, Expires: now.Add(time.Minute), JobEnd: now.Add(time.Hour), JobNodes: job.NodeNames(), NTasks: 1,
				Nodes: []api.StepNode{{Name: "gpu02", Addr: addr, Ranks: []int{0}, CPUs: 1}},
				Argv:  cmd, Cwd: c.workDir(), Env: []string{"PATH=/usr/bin:/bin"}}
			if edit != nil {
				edit(g)
			}
			return g
		}
		// The controller's own key, read from its state directory (what
		// only the controller's host holds), signs grants that are
		// genuine but for jobs or users that do not run on gpu02.
		key, err := stepcred.LoadKey(filepath.Join(c.dir, "ctld", "step_key.pem"))
		if err != nil {
			t.Fatal(err)
		}
		ctldSigned := func(g *api.StepGrant) api.SignedGrant {
			sg, err := stepcred.NewSigner(key).Sign(g)
			if err != nil {
				t.Fatal(err)
			}
			return sg
		}
		tampered := ctldSigned(grant(nil))
		tampered.Body = []byte(strings.Replace(string(tampered.Body), `"step_id":1000`, `"step_id":1001`, 1))

		tests := []struct {
			name string
			sg   api.SignedGrant
			want string
		}{
			{name: "cluster key, root, a job that does not exist",
				sg: hmacGrant(t, grant(func(g *api.StepGrant) { g.JobID, g.UserID, g.GroupID, g.User = 999999, 0, 0, "root" })), want: "invalid step credential"},
			{name: "cluster key, the running job", sg: hmacGrant(t, grant(nil)), want: "invalid step credential"},
			{name: "controller's key, tampered", sg: tampered, want: "invalid step credential"},
			{name: "controller's key, a job that does not run here",
				sg: ctldSigned(grant(func(g *api.StepGrant) { g.JobID = 999999 })), want: "job 999999 (run 0) does not run on this node"},
			{name: "controller's key, another user",
				sg: ctldSigned(grant(func(g *api.StepGrant) { g.UserID, g.GroupID = 12345, 12345 })), want: "not as the grant's uid 12345"},
			{name: "controller's key, expired",
				sg: ctldSigned(grant(func(g *api.StepGrant) { g.Expires = now.Add(-time.Second) })), want: "step credential expired"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				nodeErr, _ := stepAttempt(t, c, "gpu02", addr, tt.sg)
				if !strings.Contains(nodeErr, "gpu02: ") || !strings.Contains(nodeErr, tt.want) {
					t.Fatalf("node answered %q, want an error containing %q", nodeErr, tt.want)
				}
			})
		}
		if b, err := os.ReadFile(mark); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("a refused step ran: %q %v", b, err)
		}

		// A grant the controller gave works once on a node; used again
		// (captured off the wire, say) it starts nothing.
		resp, err := c.api.CreateStep(context.Background(), id, api.StepRequest{Argv: cmd, Cwd: c.workDir(), Nodes: 2})
		if err != nil {
			t.Fatal(err)
		}
		if nodeErr, _ := stepAttempt(t, c, "gpu02", addr, resp.Grant); nodeErr != "" {
			t.Fatalf("genuine grant refused: %s", nodeErr)
		}
		nodeErr, _ := stepAttempt(t, c, "gpu02", addr, resp.Grant)
		if !strings.Contains(nodeErr, "already started on this node") {
			t.Fatalf("replayed grant: node answered %q", nodeErr)
		}
		if b, _ := os.ReadFile(mark); string(b) != "ran\n" {
			t.Fatalf("marks %q, want the genuine step's one", b)
		}
		c.cli("scancel", fmt.Sprint(id))
		c.waitTerminal(id, 30*time.Second)
	})
}
