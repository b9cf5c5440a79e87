package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/gres"
)

// envScript prints the job's GPU variables, one per line, then waits to
// be cancelled so that jobs overlap.
const envScript = `#!/bin/sh
#SBATCH -o env-%%j.txt
#SBATCH -t 5:00
%s
echo "CVD=$CUDA_VISIBLE_DEVICES"
echo "JOBGPUS=$SLURM_JOB_GPUS"
echo "MPSMEM=$CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"
echo "MPSPCT=$CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"
echo "NVD=$NVIDIA_VISIBLE_DEVICES"
exec sleep 300
`

// envOf waits for job id's env file and returns its KEY=VALUE lines.
func (c *cluster) envOf(id uint64) map[string]string {
	c.t.Helper()
	path := filepath.Join(c.workDir(), fmt.Sprintf("env-%d.txt", id))
	var b []byte
	c.eventually(20*time.Second, fmt.Sprintf("job %d writes its environment", id), func() bool {
		b, _ = os.ReadFile(path)
		return strings.Count(string(b), "\n") >= 5
	})
	out := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		k, v, _ := strings.Cut(l, "=")
		out[k] = v
	}
	return out
}

// cancelAll cancels every job and waits for the node to be idle.
func (c *cluster) cancelAll() {
	c.t.Helper()
	if ids := strings.Fields(c.cli("squeue", "-h", "-o", "%i").out); len(ids) > 0 {
		c.cli(append([]string{"scancel"}, ids...)...)
	}
	c.waitIdle()
}

// TestGPUSlicesOnLocalCluster runs the GPU slice acceptance on one real
// node with eight fake 80 GB GPUs (ratio 1.0): whole and sliced jobs side
// by side with their variables, packing, whole GPUs never shared, an
// oversized slice refused at submit, and reclaim over the watermark
// driven through the fake's usage file.
func TestGPUSlicesOnLocalCluster(t *testing.T) {
	c := newCluster(t, 1)

	t.Run("4-GPU job and 8G slice run together with their variables", func(t *testing.T) {
		defer c.cancelAll()
		whole := c.submit(fmt.Sprintf(envScript, "#SBATCH --gpus=4"))
		slice := c.submit(fmt.Sprintf(envScript, "#SBATCH --gpu-mem=8G --gpu-compute=10"))
		c.waitState(whole, api.StateRunning, 20*time.Second)
		c.waitState(slice, api.StateRunning, 20*time.Second)
		we, se := c.envOf(whole), c.envOf(slice)
		wg, sg := strings.Split(we["CVD"], ","), strings.Split(se["CVD"], ",")
		if len(wg) != 4 || len(sg) != 1 || slices.Contains(wg, sg[0]) {
			t.Fatalf("whole job GPUs %q, slice GPU %q: want 4 and 1 other", we["CVD"], se["CVD"])
		}
		if we["MPSMEM"] != "" || we["MPSPCT"] != "" || len(strings.Split(we["NVD"], ",")) != 4 {
			t.Errorf("whole job variables %v: no MPS limits, four UUIDs", we)
		}
		if se["MPSMEM"] != "0=8192M" || se["MPSPCT"] != "10" || se["JOBGPUS"] != se["CVD"] || !strings.HasPrefix(se["NVD"], "GPU-") {
			t.Errorf("slice variables %v: want MPS limits 0=8192M and 10%%", se)
		}
	})

	t.Run("twelve 8G slices fill one GPU before a second, whole GPUs never share", func(t *testing.T) {
		defer c.cancelAll()
		var ids []uint64
		for range 12 {
			ids = append(ids, c.submit("#!/bin/sh\nexec sleep 300\n", "--gpu-mem=8G", "-t", "5:00"))
		}
		per := map[int]int{}
		for _, id := range ids {
			j := c.waitState(id, api.StateRunning, 20*time.Second)
			per[j.Alloc[0].GPUs[0]]++
		}
		var counts []int
		for _, n := range per {
			counts = append(counts, n)
		}
		slices.Sort(counts)
		if fmt.Sprint(counts) != "[2 10]" {
			t.Fatalf("slices per GPU %v, want 10 on one GPU and 2 on a second", per)
		}
		show := c.cli("scontrol", "show", "node", "gpu01").out
		if !strings.Contains(show, "GPUTot=8 GPUWhole=0 GPUShared=2 GPUFree=6") || !strings.Contains(show, "slices:10,mem:80G/80G") {
			t.Errorf("scontrol show node:\n%s", show)
		}
		six := c.submit("#!/bin/sh\nexec sleep 300\n", "--gpus=6", "-t", "5:00")
		j := c.waitState(six, api.StateRunning, 20*time.Second)
		for _, g := range j.Alloc[0].GPUs {
			if per[g] > 0 {
				t.Fatalf("6-GPU job got shared GPU %d (%v)", g, j.Alloc[0].GPUs)
			}
		}
		// Both shared GPUs still have room for slices, but a whole GPU
		// never lands on them.
		one := c.submit("#!/bin/sh\ntrue\n", "--gpus=1", "-t", "5:00")
		c.eventually(10*time.Second, "1-GPU job waits for Resources", func() bool {
			j := c.job(one)
			return j.State == api.StatePending && j.Reason == api.ReasonResources
		})
		out := c.cli("sinfo", "-h", "-N", "-p", "gpu", "-O", "GPUsShared:14")
		if got := strings.TrimSpace(out.out); got != "6/2/0/8" {
			t.Errorf("sinfo GPUS(W/S/I/T) = %q, want 6/2/0/8", got)
		}
	})

	t.Run("oversized slice is refused at submit", func(t *testing.T) {
		f := filepath.Join(c.workDir(), "big.sh")
		os.WriteFile(f, []byte("#!/bin/sh\ntrue\n"), 0o755)
		r := c.cli("sbatch", "--gpu-mem=96G", f)
		if r.code != 1 || !strings.Contains(r.err, "Requested node configuration is not available") || !strings.Contains(r.err, "96G") {
			t.Fatalf("sbatch --gpu-mem=96G: exit %d, stderr %q", r.code, r.err)
		}
	})

	t.Run("reclaim grows a lone slice, then preempts the newer of two", func(t *testing.T) {
		defer c.cancelAll()
		usage := filepath.Join(c.dir, "nodes", "gpu01", gres.FakeUsageFile)
		defer os.Remove(usage)
		setUsage := func(gpu int, mb int64) {
			t.Helper()
			body := fmt.Sprintf(`{"gpus": [{"index": %d, "mem_used_mb": %d}]}`, gpu, mb)
			if err := os.WriteFile(usage, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		a := c.submit("#!/bin/sh\nexec sleep 300\n", "--gpu-mem=8G", "-t", "5:00")
		g := c.waitState(a, api.StateRunning, 20*time.Second).Alloc[0].GPUs[0]
		// 78G in use on the GPU of a lone 8G slice: it is charged with all
		// of it and grows into the free memory.
		setUsage(g, 78*1024)
		c.eventually(30*time.Second, "the lone slice grows to 78G", func() bool {
			return c.job(a).Alloc[0].GPUMemMB == 78*1024
		})
		b := c.submit("#!/bin/sh\nexec sleep 300\n", "--gpu-mem=1G", "-t", "5:00")
		if jb := c.waitState(b, api.StateRunning, 20*time.Second); jb.Alloc[0].GPUs[0] != g {
			t.Fatalf("1G slice on GPU %d, want best fit onto shared GPU %d", jb.Alloc[0].GPUs[0], g)
		}
		// Use beyond both slices' 79G, not attributable to either: the
		// newer slice (same priority) is preempted and requeued.
		setUsage(g, 80*1024)
		c.eventually(30*time.Second, "the newer slice is preempted", func() bool {
			return c.job(b).Restarts >= 1
		})
		setUsage(g, 0)
		if ja := c.job(a); ja.Restarts != 0 || !ja.State.Active() {
			t.Fatalf("older slice %s restarts %d: it must keep running", ja.State, ja.Restarts)
		}
		evs, err := c.api.Events(context.Background(), b)
		if err != nil {
			t.Fatal(err)
		}
		var kinds []string
		for _, e := range evs {
			kinds = append(kinds, e.Kind+"/"+e.Reason)
		}
		if !slices.Contains(kinds, "reclaim/GPUMemReclaim") || !slices.Contains(kinds, "requeue/GPUMemReclaim") {
			t.Errorf("events of the preempted job: %v", kinds)
		}
		r := c.cli("tide", "events", fmt.Sprint(a))
		if !strings.Contains(r.out, "grown to 78G") {
			t.Errorf("tide events %d:\n%s%s", a, r.out, r.err)
		}
	})
}
