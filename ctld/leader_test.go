package ctld

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tide-hpc/tide/accounting"
	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/client"
)

// haTestCluster is controller name's configuration in dir, sharing the
// store at db with the others of the test.
func haTestCluster(t *testing.T, dir, db, name string) *Cluster {
	t.Helper()
	state := filepath.Join(dir, name)
	key := filepath.Join(dir, "cluster.key")
	if err := os.WriteFile(key, []byte("leader-test-key-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := ParseConfig(strings.NewReader(fmt.Sprintf(`
version: 1
cluster_name: t
state_dir: %s
store: sqlite://%s
socket: %s.sock
node_addr: 127.0.0.1:0
key_file: %s
tls: {mode: off}
ha: {controller_name: %s, lease_ttl: 1s}
allow_root_jobs: true
partitions:
  - {name: gpu, nodes: "gpu[01-02]", default: true, default_time: "10:00", max_time: "1:00:00"}
nodes:
  - {names: "gpu[01-02]", cpus: 8, memory: 64G, gpus: 8}
`, state, db, state, key, name)))
	if err != nil {
		t.Fatal(err)
	}
	cl, err := cfg.Validate()
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// runHA starts RunHA for cl and returns its stop, which waits for it.
func runHA(t *testing.T, cl *Cluster) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- RunHA(ctx, cl, slog.New(slog.NewTextHandler(io.Discard, nil)), func(*Server) (func(), error) { return func() {}, nil })
	}()
	var once bool
	var err error
	stop = func() error {
		if !once {
			once = true
			cancel()
			err = <-done
		}
		return err
	}
	t.Cleanup(func() { stop() })
	return stop
}

func waitPing(t *testing.T, sock, role string) api.PingResponse {
	t.Helper()
	c := client.NewUnix(sock)
	defer c.Close()
	var p api.PingResponse
	var err error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		p, err = c.Ping(ctx)
		cancel()
		if err == nil && p.Role == role {
			return p
		}
	}
	t.Fatalf("%s: no %s answer: last %+v, %v", sock, role, p, err)
	return p
}

// TestPrimaryAndStandby: two controllers on one store. The first is
// primary and serves; the second is a standby that answers pings and
// turns every other request away with 503 naming the primary. When the
// primary shuts down it hands the lease over, and the standby takes
// over with the state the primary stored.
func TestPrimaryAndStandby(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "shared.db")
	a, b := haTestCluster(t, dir, db, "ctl-a"), haTestCluster(t, dir, db, "ctl-b")
	stopA := runHA(t, a)
	p := waitPing(t, a.Socket, api.RolePrimary)
	e0 := p.Epoch // the store's clock in milliseconds (accounting.firstEpoch)
	if p.Name != "ctl-a" || p.Primary != "ctl-a" || e0 < 1e12 || p.Cluster != "t" {
		t.Errorf("primary's ping: %+v", p)
	}
	ca := client.NewUnix(a.Socket)
	defer ca.Close()
	ctx := context.Background()
	sub, err := ca.Submit(ctx, api.SubmitRequest{Spec: api.JobSpec{Name: "kept", Script: "#!/bin/sh\ntrue\n", Partition: "gpu", WorkDir: "/tmp"}})
	if err != nil {
		t.Fatalf("submit to the primary: %v", err)
	}

	runHA(t, b)
	p = waitPing(t, b.Socket, api.RoleStandby)
	if p.Name != "ctl-b" || p.Primary != "ctl-a" || p.Epoch != e0 {
		t.Errorf("standby's ping: %+v", p)
	}
	// Raw HTTP: the client itself would move on from a 503.
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", b.Socket)
	}}}
	resp, err := hc.Get("http://tidectld/api/v1/jobs")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || !strings.Contains(string(body), "tidectld ctl-b is a standby controller; the primary is ctl-a") {
		t.Errorf("standby answered %d %s; want 503 naming the primary", resp.StatusCode, body)
	}

	if err := stopA(); err != nil {
		t.Fatalf("primary's RunHA: %v", err)
	}
	p = waitPing(t, b.Socket, api.RolePrimary)
	if p.Name != "ctl-b" || p.Epoch != e0+1 {
		t.Errorf("new primary's ping: %+v", p)
	}
	cb := client.NewUnix(b.Socket)
	defer cb.Close()
	j, err := cb.Job(ctx, sub.JobID)
	if err != nil || j.Name != "kept" {
		t.Fatalf("job %d on the new primary: %+v, %v", sub.JobID, j.Name, err)
	}
}

// TestFencedPrimaryStepsDown: a primary whose lease another controller
// took (here by force, as after a pause) steps down at its next renewal
// or write and waits as a standby; its writes after the takeover fail.
func TestFencedPrimaryStepsDown(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "shared.db")
	a := haTestCluster(t, dir, db, "ctl-a")
	runHA(t, a)
	e0 := waitPing(t, a.Socket, api.RolePrimary).Epoch
	// Another controller takes the lease behind the primary's back: the
	// same as a standby after the primary's pause outlasted the lease.
	st, err := openStore(haTestCluster(t, dir, db, "ctl-x"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.ReleaseLease(context.Background(), e0); err != nil {
		t.Fatal(err)
	}
	l, won, err := st.AcquireLease(context.Background(), leaseBidFor("ctl-x"))
	if err != nil || !won || l.Epoch != e0+1 {
		t.Fatalf("takeover: %+v %v %v", l, won, err)
	}
	p := waitPing(t, a.Socket, api.RoleStandby)
	if p.Primary != "ctl-x" {
		t.Errorf("fenced controller's ping: %+v; want standby of ctl-x", p)
	}
	ca := client.NewUnix(a.Socket)
	defer ca.Close()
	_, err = ca.Submit(context.Background(), api.SubmitRequest{Spec: api.JobSpec{Script: "#!/bin/sh\ntrue\n", Partition: "gpu", WorkDir: "/tmp"}})
	if !errors.Is(err, api.ErrUnavailable) {
		t.Errorf("submit to the fenced controller: %v; want unavailable", err)
	}
}

func leaseBidFor(name string) accounting.LeaseBid {
	return accounting.LeaseBid{Holder: name, TTL: time.Minute}
}

// TestLapsedLeaseAnswersNothing: a primary whose lease may have lapsed
// (its validity ran out: a pause) answers every request but a ping
// with 503 until a renewal moves its validity on.
func TestLapsedLeaseAnswersNothing(t *testing.T) {
	h := newHarness(t)
	h.s.ha.name, h.s.ha.epoch, h.s.ha.valid = "ctl-a", 3, &leaseValidity{}
	handler := h.s.withPing(h.s.localHandler())
	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		return rec.Code, rec.Body.String()
	}
	h.s.ha.valid.set(time.Now().Add(time.Minute))
	if code, body := get("/api/v1/jobs"); code != 200 {
		t.Fatalf("valid lease: %d %s", code, body)
	}
	h.s.ha.valid.set(time.Now().Add(-time.Millisecond))
	if code, body := get("/api/v1/jobs"); code != 503 || !strings.Contains(body, "cannot confirm its leader lease (epoch 3)") {
		t.Errorf("lapsed lease: %d %s; want 503", code, body)
	}
	if code, body := get(api.PathPing); code != 200 || !strings.Contains(body, `"role":"primary"`) {
		t.Errorf("ping with a lapsed lease: %d %s", code, body)
	}
	h.s.ha.valid.set(time.Now().Add(time.Minute))
	if code, _ := get("/api/v1/jobs"); code != 200 {
		t.Errorf("renewed lease: %d", code)
	}
}

// TestNoAckWithoutStore: a node's report of a job's end is acknowledged
// only once the end is stored. Here every write fails (fenced: another
// controller took over): the node gets no Ack, keeps its report, and a
// controller that can store acknowledges it.
func TestNoAckWithoutStore(t *testing.T) {
	h := newHarness(t)
	h.register("gpu01")
	h.register("gpu02")
	id := h.submit(api.JobSpec{GPUs: 1})
	h.s.schedulePass()
	node := h.job(id).BatchHost()
	h.sync(node, running(id, 0))
	st := h.s.store.(*accounting.Store)
	st.SetFence(99) // the store has no lease at epoch 99: every write is fenced
	if resp := h.sync(node, finished(id, 0)); len(resp.Ack) != 0 {
		t.Fatalf("end acknowledged though it could not be stored: %+v", resp.Ack)
	}
	st.SetFence(0)
	resp := h.sync(node, finished(id, 0))
	if len(resp.Ack) != 1 || resp.Ack[0].JobID != id {
		t.Fatalf("stored end: acks %+v, want job %d", resp.Ack, id)
	}
	if j := h.job(id); j.State != api.StateCompleted {
		t.Errorf("job %s, want COMPLETED", j.State)
	}
}
