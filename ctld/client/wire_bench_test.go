package client

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// BenchmarkNodeSyncTransport compares, for tided's traffic (a sync with
// its reports, answered with a launch), the small HTTP/1.1 client of
// wire.go with net/http's, on kept-alive loopback connections, plain
// and over TLS. The controller's stand-in runs in a process of its own
// (this test binary again, see TestBenchSyncServer), so that besides
// wall time per exchange the benchmark reports the client's own CPU per
// exchange (cpu-ns/op: this process's, net/http's goroutines included).
func BenchmarkNodeSyncTransport(b *testing.B) {
	req := benchSyncRequest()
	for _, mode := range []string{"tcp", "tls"} {
		addr := startSyncServer(b, mode)
		var cfg *tls.Config
		if mode == "tls" {
			// httptest's servers all present the same test certificate:
			// an unstarted one's client trusts the child's.
			ts := httptest.NewTLSServer(http.NotFoundHandler())
			cfg = ts.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
			cfg.ServerName = "127.0.0.1" // in the test certificate's names
			ts.Close()
		}
		scheme := "http://"
		if cfg != nil {
			scheme = "https://"
		}
		b.Run(mode+"/wire", func(b *testing.B) {
			c := NewTCP(addr, "k")
			if cfg != nil {
				c = NewTLS(addr, cfg, "")
			}
			defer c.Close()
			benchExchanges(b, func(ctx context.Context) error {
				_, err := c.Sync(ctx, req)
				return err
			})
		})
		b.Run(mode+"/net-http", func(b *testing.B) {
			tr := &http.Transport{TLSClientConfig: cfg, MaxIdleConnsPerHost: maxIdle}
			hc := &http.Client{Transport: tr}
			defer tr.CloseIdleConnections()
			url := scheme + addr + "/api/v1/node/sync"
			benchExchanges(b, func(ctx context.Context) error {
				_, err := netHTTPSync(ctx, hc, url, &req)
				return err
			})
		})
	}
}

// syncServerEnv, set, makes TestBenchSyncServer the benchmark's server:
// "tcp" or "tls".
const syncServerEnv = "TIDE_BENCH_SYNC_SERVER"

// startSyncServer starts the benchmark's server in a child process and
// returns its address; the child ends with the benchmark.
func startSyncServer(b *testing.B, mode string) string {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestBenchSyncServer$")
	cmd.Env = append(os.Environ(), syncServerEnv+"="+mode)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		stdin.Close() // the child's signal to stop
		cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		b.Fatalf("benchmark server: %v", err)
	}
	return strings.TrimSpace(line)
}

// TestBenchSyncServer is BenchmarkNodeSyncTransport's server when the
// benchmark starts this binary with syncServerEnv set: it answers every
// request with a launch, prints its address and serves until its stdin
// closes. Otherwise it does nothing.
func TestBenchSyncServer(t *testing.T) {
	mode := os.Getenv(syncServerEnv)
	if mode == "" {
		t.Skip("the benchmark's server, started by BenchmarkNodeSyncTransport")
	}
	answer, err := benchSyncResponse().AppendJSON(nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(answer)))
		w.Write(answer)
	}))
	if mode == "tls" {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	defer srv.Close()
	fmt.Println(srv.Listener.Addr().String())
	io.Copy(io.Discard, os.Stdin)
}

// netHTTPSync is Client.Sync's work done with net/http: the same
// encoder, headers and decoder.
func netHTTPSync(ctx context.Context, hc *http.Client, url string, req *api.NodeSyncRequest) (api.NodeSyncResponse, error) {
	var r api.NodeSyncResponse
	body, err := req.AppendJSON(nil)
	if err != nil {
		return r, err
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return r, err
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set(KeyHeader, "k")
	resp, err := hc.Do(hr)
	if err != nil {
		return r, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return r, err
	}
	err = api.DecodeNodeSyncResponse(data, &r)
	return r, err
}

func benchExchanges(b *testing.B, exchange func(context.Context) error) {
	ctx := context.Background()
	if err := exchange(ctx); err != nil { // the connection, outside the count
		b.Fatal(err)
	}
	b.ReportAllocs()
	cpu0 := processCPU(b)
	b.ResetTimer()
	for b.Loop() {
		if err := exchange(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
}

func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchSyncRequest is a busy node's heartbeat: eight running jobs, one
// just finished.
func benchSyncRequest() api.NodeSyncRequest {
	start := time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)
	r := api.NodeSyncRequest{Name: "gpu07", CPULoad: 6.37, FreeMemMB: 412337, Seq: 77}
	for i := range 8 {
		r.Jobs = append(r.Jobs, api.NodeJobReport{JobID: 19270 + uint64(i), State: api.NodeJobRunning,
			StartTime: start.Add(time.Duration(i) * time.Second)})
	}
	r.Jobs[0].State, r.Jobs[0].EndTime = api.NodeJobFinished, start.Add(time.Minute)
	return r
}

// benchSyncResponse carries one launch of sbatch --wrap with a login
// shell's environment.
func benchSyncResponse() *api.NodeSyncResponse {
	env := []string{"SHELL=/bin/bash", "USER=alice", "HOME=/home/alice", "LANG=en_US.UTF-8",
		"PATH=/home/alice/.local/bin:/opt/tide/bin:/usr/local/bin:/usr/bin:/usr/local/sbin:/usr/sbin",
		"LD_LIBRARY_PATH=/usr/local/cuda-12.4/lib64:/opt/nccl/lib", "CUDA_HOME=/usr/local/cuda-12.4",
		"PWD=/home/alice/projects/llm-finetune", "CONDA_PREFIX=/home/alice/miniconda3/envs/finetune",
		"HF_HOME=/scratch/alice/hf-cache", "OMP_NUM_THREADS=8", "SLURM_JOB_ID=19278", "SLURM_JOB_NAME=wrap"}
	for i := range 20 {
		env = append(env, "EXTRA_VAR_"+strconv.Itoa(i)+"=/some/moderately/long/value/for/the/environment")
	}
	return &api.NodeSyncResponse{Ack: []api.JobRef{{JobID: 19277}}, Launch: []api.LaunchSpec{{
		JobRef: api.JobRef{JobID: 19278}, Name: "wrap", UserID: 1000, GroupID: 1000, User: "alice",
		Partition: "gpu", Cluster: "tide", WorkDir: "/home/alice/projects/llm-finetune",
		SubmitDir: "/home/alice/projects/llm-finetune", SubmitHost: "login01", Env: env,
		Script: "#!/bin/sh\n# This script was created by sbatch --wrap.\n\npython train.py --epochs 3\n",
		Stdout: "/home/alice/projects/llm-finetune/slurm-%j.out", TimeLimit: 14400,
		StartTime: time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC), KillWait: 30,
		Alloc:    []api.NodeAlloc{{Node: "gpu07", CPUs: 8, MemoryMB: 32768, GPUs: []int{2, 3}, Tasks: 1}},
		NumTasks: 1, CPUsPerTask: 8,
	}}}
}
