package noded

import (
	"context"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/tide-hpc/tide/ctld/api"
)

// logRecorder keeps the daemon's log records (without the attributes
// loggers add with With), for tests of what it logs.
type logRecorder struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (h *logRecorder) Enabled(context.Context, slog.Level) bool { return true }

func (h *logRecorder) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recs = append(h.recs, r.Clone())
	return nil
}

func (h *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *logRecorder) WithGroup(string) slog.Handler      { return h }

// find returns the attributes of every record with message msg.
func (h *logRecorder) find(msg string) []map[string]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []map[string]string
	for _, r := range h.recs {
		if r.Message != msg {
			continue
		}
		attrs := map[string]string{}
		r.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value.String(); return true })
		out = append(out, attrs)
	}
	return out
}

// startLogged runs the test node's daemon as start does, with its log
// going to rec.
func (n *testNode) startLogged(t *testing.T, rec *logRecorder) {
	t.Helper()
	d, err := Setup(context.Background(), n.cfg, Options{Logger: slog.New(rec), Executable: testExe, StepdIdle: n.stepdIdle,
		Runtime: n.rt, ContainerRuntime: n.ctrRT})
	if err != nil {
		t.Fatal(err)
	}
	n.d = d
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

// TestDaemonControllerFailover: a node configured with two controllers
// moves to the second when the first becomes a standby (503), registers
// there with its running job (the new primary answers Unregistered),
// logs the move once, and stays with the new primary when the old one
// serves again.
func TestDaemonControllerFailover(t *testing.T) {
	n, rt := fakeNode(t)
	a := n.fake
	b := newFakeCtld(t, a.key)
	n.cfg.Controller = a.addr() + "," + b.addr()
	rec := &logRecorder{}
	n.startLogged(t, rec)

	wd := t.TempDir()
	job := n.spec(t, 901, "#!/bin/sh\n", wd)
	n.launch(job)
	a.waitReport(t, job.JobRef, api.NodeJobRunning)
	// The report can come before the runtime holds the job (under the
	// race detector on a loaded machine it did): rt.Exit below needs it.
	n.launchDone(t, job.JobRef)
	waitUntil(t, "job 901 started in the runtime", func() bool { return rt.Started(job.JobRef) })

	a.setDown(true) // a standby now: 503 to everything
	b.waitFor(t, "registration with the new primary", func() bool {
		return b.registrations == 1 && slices.ContainsFunc(b.lastReg.Jobs, func(r api.NodeJobReport) bool {
			return r.JobID == job.JobID && r.State == api.NodeJobRunning
		})
	})
	if err := rt.Exit(job.JobRef, api.ExitStatus{Code: 3}); err != nil {
		t.Fatal(err)
	}
	if r := b.waitReport(t, job.JobRef, api.NodeJobFinished); r.Exit.Code != 3 {
		t.Errorf("report %+v, want exit 3", r)
	}

	// The old primary serves again: the node stays with the one that
	// answered (b launches the next job).
	a.setDown(false)
	next := n.spec(t, 902, "#!/bin/sh\n", wd)
	b.queue(api.NodeSyncResponse{Launch: []api.LaunchSpec{next}})
	b.waitReport(t, next.JobRef, api.NodeJobRunning)
	a.mu.Lock()
	regs := a.registrations
	a.mu.Unlock()
	if regs != 1 {
		t.Errorf("%d registrations with the old primary, want 1", regs)
	}

	got := rec.find("controller failover")
	want := []map[string]string{{"from": a.addr(), "to": b.addr()}}
	if len(got) != 1 || got[0]["from"] != want[0]["from"] || got[0]["to"] != want[0]["to"] {
		t.Errorf("failover logged as %v, want %v", got, want)
	}
	if regs := rec.find("registered with controller"); len(regs) != 2 {
		t.Errorf("logged %d registrations, want 2", len(regs))
	}
}

// TestConfigControllers: controller takes one address or several,
// comma-separated, and a wrong element is named.
func TestConfigControllers(t *testing.T) {
	tests := []struct {
		in      string
		want    []string
		wantErr string
	}{
		{in: "ctl:6817", want: []string{"ctl:6817"}},
		{in: "ctl1:6817,ctl2:6817", want: []string{"ctl1:6817", "ctl2:6817"}},
		{in: "ctl1:6817, [::1]:6817", want: []string{"ctl1:6817", "[::1]:6817"}},
		{in: "nohost", wantErr: `controller: "nohost" is not host:port`},
		{in: "ctl:99999", wantErr: `controller: "ctl:99999" has an invalid port`},
		{in: "ctl1:6817,ctl2", wantErr: `controller: "ctl2" (in "ctl1:6817,ctl2") is not host:port`},
		{in: "ctl1:6817,ctl2:0", wantErr: `controller: "ctl2:0" (in "ctl1:6817,ctl2:0") has an invalid port`},
		{in: "ctl1:6817,", wantErr: `controller: element 2 of "ctl1:6817," is empty`},
		{in: "ctl1:6817,ctl1:6817", wantErr: `controller: "ctl1:6817,ctl1:6817" names ctl1:6817 twice`},
		{in: "", wantErr: `controller: "" is not host:port`},
	}
	for _, tt := range tests {
		c := DefaultConfig()
		c.Name, c.Controller = "n1", tt.in
		c.TLSDir, c.KeyFile = t.TempDir(), writeKey(t, t.TempDir(), 0o600, "k\n")
		err := c.Validate()
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("controller %q: Validate = %v, want %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("controller %q: %v", tt.in, err)
			continue
		}
		if got := c.Controllers(); !slices.Equal(got, tt.want) {
			t.Errorf("controller %q: Controllers = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestConfigControllersFromFlagAndEnv: the list comes through the
// file, TIDED_CONTROLLER and --controller alike.
func TestConfigControllersFromFlagAndEnv(t *testing.T) {
	c, err := Parse(strings.NewReader("version: 1\ncontroller: ctl1:6817,ctl2:6817\n"))
	if err != nil || !slices.Equal(c.Controllers(), []string{"ctl1:6817", "ctl2:6817"}) {
		t.Fatalf("file: %q, %v", c.Controllers(), err)
	}
	t.Setenv("TIDED_CONTROLLER", "ctl3:6817,ctl4:6817")
	c, err = Parse(strings.NewReader("version: 1\n"))
	if err != nil || !slices.Equal(c.Controllers(), []string{"ctl3:6817", "ctl4:6817"}) {
		t.Fatalf("env: %q, %v", c.Controllers(), err)
	}
	fs := pflag.NewFlagSet("tided", pflag.ContinueOnError)
	addConfigFlags(fs)
	if err := fs.Parse([]string{"--config", "", "--controller", "ctl5:6817,ctl6:6817"}); err != nil {
		t.Fatal(err)
	}
	c, err = LoadConfig(fs)
	if err != nil || !slices.Equal(c.Controllers(), []string{"ctl5:6817", "ctl6:6817"}) {
		t.Fatalf("flag: %q, %v", c.Controllers(), err)
	}
}

// refusedAddr returns an address nothing listens on.
func refusedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestJoinAndTLSFailover: tided join tries the controllers in order,
// and a joined node's mutual TLS client does too (the first controller
// refuses connections here).
func TestJoinAndTLSFailover(t *testing.T) {
	f := newTLSCtld(t, time.Hour)
	cfg := joinCfg(t, f, "n1")
	cfg.Controller = refusedAddr(t) + "," + f.addr
	if _, err := Join(context.Background(), cfg, f.token("n1")); err != nil {
		t.Fatalf("join with the first controller down: %v", err)
	}
	cfg.StateDir = t.TempDir()
	cfg.StepAddr = "127.0.0.1:0"
	cfg.Cgroups = CgroupsOff
	cfg.Heartbeat = time.Second
	d, err := Setup(context.Background(), cfg, Options{Logger: testLogger(), Executable: testExe})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	defer func() { cancel(); <-done }()
	waitUntil(t, "a registration over mutual TLS with the second controller", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, r := range f.requests {
			if strings.HasPrefix(r, "/api/v1/node/register cert=n1 ") {
				return true
			}
		}
		return false
	})
}
