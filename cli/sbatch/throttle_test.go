package sbatch

import (
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/tide-hpc/tide/cli/clitest"
	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/ctld/client"
)

// TestThrottledByTheRealClient submits through the real client to a
// controller whose buffer is full once: sbatch says so once, waits the
// Retry-After (one second, the least a controller sends) and submits.
func TestThrottledByTheRealClient(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "ctld.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if calls.Add(1) == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			fmt.Fprint(w, `{"error":{"code":"too_many_requests","message":"Batch job submission failed: queue prod's submission buffer is full"}}`)
			return
		}
		fmt.Fprint(w, `{"job_id":31}`)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	c := client.NewUnix(sock)
	defer c.Close()
	got := runSbatch(t, &clitest.FakeAPI{}, cmdutil.API(c), "", "--queue=prod", "job.sh")
	want := result{out: "Submitted batch job 31\n", err: "sbatch: submission throttled by the controller (queue buffer full); retrying in 1s\n"}
	if got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("%d submissions reached the controller, want 2", n)
	}
}
