package integration

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// TestSprioMultifactor: under the default policy tide (no queues)
// sprio prints Slurm's multifactor layout from the controller's
// factors: the job with the shorter time limit has the higher length
// factor and priority, the job-size column shows (its default weight
// is negative: wide jobs first), -w prints the weights in force (the defaults:
// the harness's configuration has its own scheduler settings), --json
// carries the factors.
func TestSprioMultifactor(t *testing.T) {
	c := newClusterOpts(t, clusterOpts{nodes: 1})
	busy := c.submit("#!/bin/sh\nsleep 300\n", "--gpus=8")
	c.waitState(busy, api.StateRunning, 20*time.Second)
	long := c.submit("#!/bin/sh\ntrue\n", "--gpus=8", "-t", "50:00")
	short := c.submit("#!/bin/sh\ntrue\n", "--gpus=8", "-t", "2:00")

	r := c.cli("sprio")
	if r.code != 0 {
		t.Fatalf("sprio: exit %d: %s%s", r.code, r.out, r.err)
	}
	lines := strings.Split(strings.TrimSpace(r.out), "\n")
	if got, want := strings.Fields(lines[0]), []string{"JOBID", "PARTITION", "PRIORITY", "SITE", "AGE", "FAIRSHARE", "JOBSIZE", "LENGTH"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("header %v, want %v:\n%s", got, want, r.out)
	}
	prio := map[string]int{}
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		p, err := strconv.Atoi(f[2])
		if err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		prio[f[0]] = p
	}
	if len(prio) != 2 || !(prio[fmt.Sprint(short)] > prio[fmt.Sprint(long)]) {
		t.Errorf("priorities %v: want job %d (2 minutes) above job %d (50 minutes)", prio, short, long)
	}

	r = c.cli("sprio", "-w", "-h")
	if f := strings.Fields(r.out); r.code != 0 || strings.Join(f, " ") != "Weights 1 1500 500 -400 3000" {
		t.Errorf("sprio -w -h: exit %d, %q; want the weights line of policy tide's defaults", r.code, r.out)
	}

	r = c.cli("sprio", "--json", fmt.Sprint(short))
	var rows []struct {
		JobID       string `json:"job_id"`
		Multifactor *struct {
			Priority, Length float64
		} `json:"multifactor"`
	}
	if err := json.Unmarshal([]byte(r.out), &rows); err != nil || len(rows) != 1 || rows[0].Multifactor == nil ||
		rows[0].Multifactor.Length <= 0 {
		t.Errorf("sprio --json: %v, %s", err, r.out)
	}
}
