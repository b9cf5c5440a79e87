package integration

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/gres"
)

// Issue 25's acceptance on the local cluster's fake GPUs: sstat and
// sacct show the GPU utilisation and memory of a job (the fakes simulate
// a load on the GPUs jobs hold), and a job whose GPUs read idle (the
// node's usage file lists them) is flagged within the configured time.

// idleAfter and usageEvery are the controller's job_usage settings here.
// idleAfter is longer than a fake GPU's reading period (5 s) plus a
// heartbeat: a busy job's first reading may be taken before its launch
// ended (its GPUs still idle), and must not be enough to flag it.
const (
	idleAfter  = 10 * time.Second
	usageEvery = time.Second
)

// tresValue is a TRES usage string's value for name ("" when absent).
func tresValue(tres, name string) string {
	for _, kv := range strings.Split(tres, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			return v
		}
	}
	return ""
}

func TestJobGPUUsage(t *testing.T) {
	c := newClusterOpts(t, clusterOpts{nodes: 1, nodeYAML: "acct_gather_frequency: 1s\n",
		ctldYAML: fmt.Sprintf("job_usage: {interval: %s, idle_gpu_after: %s, idle_gpu_threshold: 5}\n", usageEvery, idleAfter)})
	// Each job waits for a file of its own in the work dir.
	script := func(name string) string {
		return fmt.Sprintf("#!/bin/sh\nwhile [ ! -e stop-%s ]; do sleep 0.2; done\n", name)
	}
	busy := c.submit(script("busy"), "--gpus=2", "-o", "/dev/null")
	defer c.writeWork("stop-busy", "")
	c.waitState(busy, api.StateRunning, 60*time.Second)
	sbusy := strconv.FormatUint(busy, 10)

	t.Run("sstat shows the running job's GPU use", func(t *testing.T) {
		defer c.as(t)()
		var tres string
		c.eventually(40*time.Second, "sstat with gres/gpuutil and gres/gpumem", func() bool {
			r := c.cli("sstat", "-n", "-P", "-j", sbusy+".batch", "-o", "JobID,TRESUsageInMax")
			f := strings.Split(strings.TrimSpace(r.out), "|")
			if r.code != 0 || len(f) != 2 {
				return false
			}
			tres = f[1]
			// The first samples may come before the GPUs' first
			// reading with the job's load.
			u, m := tresValue(tres, "gres/gpuutil"), tresValue(tres, "gres/gpumem")
			return u != "" && u != "0" && m != "" && m != "0"
		})
		t.Logf("sstat TRESUsageInMax: %s", tres)
		// Two GPUs of the simulated 49-96 % each, summed as Slurm does;
		// each 35-79 % of 80 GiB full.
		if u, err := strconv.Atoi(tresValue(tres, "gres/gpuutil")); err != nil || u < 98 || u > 192 {
			t.Errorf("gres/gpuutil %q, want the two GPUs' sum within 98-192", tresValue(tres, "gres/gpuutil"))
		}
		if m := parseSize(t, tresValue(tres, "gres/gpumem")); m < 2*0.35*80*(1<<30) || m > 2*0.79*80*(1<<30) {
			t.Errorf("gres/gpumem %q, want 35-79 %% of two 80 GiB GPUs", tresValue(tres, "gres/gpumem"))
		}
	})

	t.Run("the controller's series and scontrol show job -d", func(t *testing.T) {
		defer c.as(t)()
		var u api.JobUsage
		c.eventually(30*time.Second, "a series with GPU readings of the job's load", func() bool {
			var err error
			u, err = c.api.JobUsage(context.Background(), busy)
			return err == nil && u.Last != nil && u.Last.GPU && u.Last.GPUUtil > 0 && len(u.Points) >= 2
		})
		if u.GPUs != 2 || u.Last.GPUUtil < 49 || u.Last.GPUUtil > 96 || u.Last.GPUMem == 0 || !u.IdleFlagged.IsZero() {
			t.Errorf("series %+v, last %+v", u, u.Last)
		}
		r := c.cli("scontrol", "-d", "show", "job", sbusy)
		if !regexp.MustCompile(`Tide:GPUUtil=\d+\.\d AveGPUUtil=\d+\.\d GPUMem=\S+ MaxGPUMem=\S+ `).MatchString(r.out) {
			t.Errorf("scontrol -d show job %d:\n%s%s", busy, r.out, r.err)
		}
		m := c.metrics()
		if !regexp.MustCompile(`tide_job_gpu_utilization\{job_id="` + sbusy + `",queue="",user="[^"]+"\} \d`).MatchString(m) {
			t.Errorf("no tide_job_gpu_utilization of job %d in:\n%s", busy, grepLines(m, "tide_job_gpu"))
		}
	})

	t.Run("an idle job is flagged in time", func(t *testing.T) {
		defer c.as(t)()
		idle := c.submit(script("idle"), "--gpus=1", "-o", "/dev/null")
		defer c.writeWork("stop-idle", "")
		g := c.waitState(idle, api.StateRunning, 60*time.Second).Alloc[0].GPUs[0]
		// The job uses its GPU first (the fake's simulated load), as a
		// job that then stops using it.
		c.eventually(30*time.Second, "the job's GPU read busy", func() bool {
			u, err := c.api.JobUsage(context.Background(), idle)
			return err == nil && u.Last != nil && u.Last.GPU && u.Last.GPUUtil > 0
		})
		// The knob: the node's usage file lists the job's GPU as idle.
		usage := filepath.Join(c.dir, "nodes", "gpu01", gres.FakeUsageFile)
		if err := os.WriteFile(usage, []byte(fmt.Sprintf(`{"gpus": [{"index": %d}]}`, g)), 0o644); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(usage)
		idleFrom := time.Now()
		// The node reads its GPUs at most every 5 s and sends the reading
		// with its next sync (heartbeat 2 s); the controller samples every
		// second and flags at its first sample idleAfter after the first
		// idle one: about 18 s here. The wait allows a loaded machine
		// far more; what is checked is the controller's own account.
		var flag api.Event
		c.eventually(idleAfter+60*time.Second, "the idle_gpu event", func() bool {
			evs, err := c.api.Events(context.Background(), idle)
			if err != nil {
				return false
			}
			for _, e := range evs {
				if e.Kind == api.EventIdleGPU {
					flag = e
					return true
				}
			}
			return false
		})
		t.Logf("flagged %s after the GPU went idle: %s", flag.Time.Sub(idleFrom).Round(time.Millisecond), flag.Message)
		// Flagged no earlier than idleAfter after the GPU went idle, and
		// at the first samples once its idle stretch (from the first
		// idle sample) reached idleAfter.
		if took := flag.Time.Sub(idleFrom); took < idleAfter {
			t.Errorf("flagged %s after the GPU went idle, before idle_gpu_after %s", took, idleAfter)
		}
		u, err := c.api.JobUsage(context.Background(), idle)
		if err != nil {
			t.Fatal(err)
		}
		if stretch := u.IdleFlagged.Sub(u.IdleSince); u.IdleSince.Before(idleFrom) || stretch < idleAfter || stretch > idleAfter+3*usageEvery {
			t.Errorf("idle since %s (the GPU went idle at %s), flagged %s later: want idle_gpu_after %s to %s",
				u.IdleSince, idleFrom, stretch, idleAfter, idleAfter+3*usageEvery)
		}
		if want := fmt.Sprintf("GPUs idle: 1 GPU(s) on gpu01 GPU %d at 0.0%% utilisation, under 5%% for ", g); !strings.HasPrefix(flag.Message, want) {
			t.Errorf("event %q, want it to start %q", flag.Message, want)
		}
		r := c.cli("tide", "events", strconv.FormatUint(idle, 10))
		if !strings.Contains(r.out, "idle_gpu") || !strings.Contains(r.out, "GPUs idle:") {
			t.Errorf("tide events %d:\n%s%s", idle, r.out, r.err)
		}
		r = c.cli("scontrol", "-d", "show", "job", strconv.FormatUint(idle, 10))
		if !strings.Contains(r.out, "IdleGPUFlagged=") {
			t.Errorf("scontrol -d show job %d lacks IdleGPUFlagged:\n%s", idle, r.out)
		}
		if m := c.metrics(); !strings.Contains(m, "\ntide_jobs_idle_gpu 1\n") || !strings.Contains(m, "\ntide_gpus_idle_reserved 1\n") {
			t.Errorf("idle metrics:\n%s", grepLines(m, "idle"))
		}
		// The busy job is never flagged.
		evs, _ := c.api.Events(context.Background(), busy)
		for _, e := range evs {
			if e.Kind == api.EventIdleGPU {
				t.Errorf("the busy job was flagged: %s", e.Message)
			}
		}
	})

	t.Run("sacct shows the finished job's GPU use", func(t *testing.T) {
		defer c.as(t)()
		c.writeWork("stop-busy", "")
		if j := c.waitTerminal(busy, 60*time.Second); j.State != api.StateCompleted {
			t.Fatalf("job %d %s %s", busy, j.State, j.Exit)
		}
		var batch map[string]string
		c.eventually(20*time.Second, "the batch step's usage in sacct", func() bool {
			batch = c.sacctRows(busy, "JobID,TRESUsageInMax,TRESUsageInTot")[sbusy+".batch"]
			return batch != nil && batch["TRESUsageInMax"] != ""
		})
		t.Logf("sacct batch: %v", batch)
		for _, f := range []string{"TRESUsageInMax", "TRESUsageInTot"} {
			tres := batch[f]
			if u, err := strconv.Atoi(tresValue(tres, "gres/gpuutil")); err != nil || u < 98 || u > 192 {
				t.Errorf("%s gres/gpuutil in %q, want 98-192", f, tres)
			}
			if m := parseSize(t, tresValue(tres, "gres/gpumem")); m < 2*0.35*80*(1<<30) {
				t.Errorf("%s gres/gpumem in %q, want at least 35 %% of two 80 GiB GPUs", f, tres)
			}
		}
	})
}

// metrics is the controller's /metrics, read on its unix socket.
func (c *cluster) metrics() string {
	c.t.Helper()
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", c.socket)
		}}}
	resp, err := hc.Get("http://tide/metrics")
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return string(b)
}

// grepLines keeps the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
