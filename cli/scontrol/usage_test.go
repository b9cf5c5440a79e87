package scontrol

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tide-hpc/tide/cli/clitest"
	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/cli/scontrol/scontroltest"
	"github.com/tide-hpc/tide/ctld/api"
)

// usageAPI is the fake controller with the usage series of some jobs.
type usageAPI struct {
	*clitest.FakeAPI
	usage []api.JobUsage
	err   error
	// asked records the ids of each JobUsages call.
	asked [][]uint64
}

func (u *usageAPI) JobUsages(_ context.Context, ids []uint64) ([]api.JobUsage, error) {
	u.asked = append(u.asked, ids)
	if u.err != nil {
		return nil, u.err
	}
	var out []api.JobUsage
	for _, x := range u.usage {
		if len(ids) == 0 || ids[0] == x.JobID {
			out = append(out, x)
		}
	}
	return out, nil
}

func runUsage(t *testing.T, fake *usageAPI, args ...string) result {
	t.Helper()
	f, buf := clitest.Factory(fake.FakeAPI, nil)
	f.API = func() (cmdutil.API, error) { return fake, nil }
	out, errOut, code := clitest.Run(newCmd(f, time.UTC), buf, "scontrol", args)
	return result{out: out, errOut: errOut, code: code}
}

// TestShowJobUsage: -d adds the job's latest usage, its series' mean and
// peaks and its idle-GPU flag as a Tide line; without -d, or for a job
// whose series is of an earlier incarnation, nothing is asked or shown;
// a controller that cannot answer leaves the line out.
func TestShowJobUsage(t *testing.T) {
	at := scontroltest.Now.Add(-time.Minute)
	gpuJob := api.JobUsage{JobID: 101, UserID: 1000, GPUs: 2, GPUUtilMean: 71.25, GPUMemMax: 40 << 30, RSSMax: 3 << 30,
		Last:      &api.UsageSample{Time: at, GPU: true, GPUUtil: 2.5, GPUMem: 30000 << 20, CPU: true, CPUs: 3.2, RSS: 1536 << 20},
		IdleSince: at.Add(-time.Hour), IdleFlagged: at}
	fake := &usageAPI{FakeAPI: scontroltest.Cluster(), usage: []api.JobUsage{gpuJob}}
	r := runUsage(t, fake, "-d", "show", "job", "101")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.errOut)
	}
	golden(t, "show-job-d-usage", r.out)
	if len(fake.asked) != 1 || len(fake.asked[0]) != 1 || fake.asked[0][0] != 101 {
		t.Errorf("asked for %v, want job 101", fake.asked)
	}

	// One-liner: the line's fields are tokens among the others.
	r = runUsage(t, fake, "-d", "-o", "show", "job", "101")
	if !strings.Contains(r.out, " Tide:GPUUtil=2.5 AveGPUUtil=71.2 GPUMem=30000M MaxGPUMem=40G CPUs=3.20 RSS=1.50G MaxRSS=3G ") {
		t.Errorf("one-liner lacks the usage fields:\n%s", r.out)
	}

	// All jobs: one request for every series.
	fake.asked = nil
	r = runUsage(t, fake, "-d", "show", "job")
	if len(fake.asked) != 1 || fake.asked[0] != nil || strings.Count(r.out, "Tide:GPUUtil=") != 1 {
		t.Errorf("show job -d for all: asked %v, %d usage lines", fake.asked, strings.Count(r.out, "Tide:GPUUtil="))
	}

	fake.asked = nil
	if r := runUsage(t, fake, "show", "job", "101"); strings.Contains(r.out, "GPUUtil") || len(fake.asked) != 0 {
		t.Errorf("without -d: asked %v, output\n%s", fake.asked, r.out)
	}
	requeued := gpuJob
	requeued.Restart = 1
	fake.usage = []api.JobUsage{requeued}
	if r := runUsage(t, fake, "-d", "show", "job", "101"); strings.Contains(r.out, "GPUUtil") {
		t.Errorf("an earlier incarnation's usage shown:\n%s", r.out)
	}
	fake.err = errors.New("no such API call")
	if r := runUsage(t, fake, "-d", "show", "job", "101"); r.code != 0 || strings.Contains(r.out, "GPUUtil") {
		t.Errorf("with a failing usage call: exit %d (%s)\n%s", r.code, r.errOut, r.out)
	}
}
