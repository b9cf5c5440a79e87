package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// The chaos test's faults: SIGKILL of tidectld and of the tided, each
// started again after a short while, as a crash and a supervisor's
// restart would. The cluster's shared job supervisors (tide-stepd) are
// left alone: they are what keeps jobs running through tided crashes.

// ctldName names the controller among the daemons.
const ctldName = "tidectld"

// chaosReady bounds how long a restarted controller may take to answer.
const chaosReady = 60 * time.Second

// cmdOf returns the running command of a daemon (nil when not started).
func (r *chaosRun) cmdOf(name string) *exec.Cmd {
	if name == ctldName {
		return r.c.ctld
	}
	if sb := r.c.standby(name); sb != nil {
		return sb.cmd
	}
	return r.c.tided[name]
}

// daemons lists the controllers and every node.
func (r *chaosRun) daemons() []string {
	return append(r.c.controllerNames(), r.c.nodes...)
}

// crash kills a daemon with SIGKILL and reaps it.
func (r *chaosRun) crash(name string) {
	cmd := r.cmdOf(name)
	r.note("kill -9 %s (pid %d)", name, cmd.Process.Pid)
	kill(cmd, syscall.SIGKILL)
	r.mu.Lock()
	r.kills[name]++
	r.mu.Unlock()
}

// launch starts a daemon again on its config and log, as the harness
// does, without failing the test from this goroutine.
func (r *chaosRun) launch(name string) (*exec.Cmd, error) {
	c := r.c
	log, err := os.OpenFile(filepath.Join(c.dir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer log.Close()
	bin, cfg, host := "tided", filepath.Join(c.dir, name+".yaml"), name
	sb := c.standby(name)
	switch {
	case name == ctldName:
		bin, cfg, host = "tidectld", filepath.Join(c.dir, "tide.yaml"), "ctl"
	case sb != nil:
		bin, cfg, host = "tidectld", sb.cfg, "ctl"
	}
	cmd := c.onHost(host, nil, filepath.Join(binDir, bin), "--config", cfg)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	switch {
	case name == ctldName:
		c.ctld = cmd
	case sb != nil:
		sb.cmd = cmd
	default:
		c.tided[name] = cmd
	}
	r.mu.Lock()
	r.restarts[name]++
	r.mu.Unlock()
	r.note("started %s (pid %d)", name, cmd.Process.Pid)
	return cmd, nil
}

// start launches a daemon; a controller must answer within chaosReady
// (with standby controllers: some controller must, as primary).
func (r *chaosRun) start(name string) error {
	cmd, err := r.launch(name)
	if err != nil || !r.c.isController(name) {
		return err
	}
	t0 := time.Now()
	for time.Since(t0) < chaosReady {
		if !pidAlive(cmd.Process.Pid) {
			return fmt.Errorf("%s (pid %d) exited while starting (see %s.log)", name, cmd.Process.Pid, name)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := r.api.Cluster(ctx)
		cancel()
		if err == nil {
			r.note("%s started; the controllers answer after %s", name, time.Since(t0).Round(time.Millisecond))
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s (pid %d) started and no controller answered within %s", name, cmd.Process.Pid, chaosReady)
}

// revive starts every daemon that is not running, reporting those that
// exited without being killed by the test: a daemon must not die of the
// others' crashes.
func (r *chaosRun) revive() {
	for _, name := range r.daemons() {
		cmd := r.cmdOf(name)
		if cmd != nil && cmd.ProcessState == nil && pidAlive(cmd.Process.Pid) {
			continue
		}
		if cmd != nil && cmd.ProcessState == nil {
			_ = cmd.Wait() // a zombie: reap it to learn how it ended
			r.mu.Lock()
			r.violate("daemon", 0, fmt.Sprintf("%s (pid %d) exited by itself: %s (see %s.log)", name, cmd.Process.Pid, cmd.ProcessState, name))
			r.mu.Unlock()
		}
		if err := r.start(name); err != nil {
			r.mu.Lock()
			r.violate("daemon", 0, err.Error())
			r.mu.Unlock()
		}
	}
}

// runKiller crashes random daemons until ctx ends: every 2 to 8 s one
// daemon (now and then two at once), down for 0 to 3 s; a controller
// is sometimes killed again while it recovers.
func (r *chaosRun) runKiller(ctx context.Context) *sync.WaitGroup {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(r.cfg.seed, 0))
		all := r.daemons()
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Duration(2000+rng.IntN(6000)) * time.Millisecond):
			}
			r.revive()
			targets := []string{all[rng.IntN(len(all))]}
			if rng.IntN(6) == 0 {
				if other := all[rng.IntN(len(all))]; other != targets[0] {
					targets = append(targets, other)
				}
			}
			if r.c.standbys != nil && rng.IntN(3) == 0 {
				// With standby controllers: the primary paused past its
				// lease (a long GC, a stalled VM), then resumed.
				r.pausePrimary(time.Duration(rng.IntN(3000)) * time.Millisecond)
				continue
			}
			for _, name := range targets {
				r.crash(name)
			}
			if down := rng.IntN(4); down > 0 {
				time.Sleep(time.Duration(down*1000-rng.IntN(1000)) * time.Millisecond)
			}
			for _, name := range targets {
				if r.c.isController(name) && rng.IntN(6) == 0 {
					// A crash during recovery: killed again before, or
					// just as, it answers.
					if _, err := r.launch(name); err == nil {
						time.Sleep(time.Duration(rng.IntN(400)) * time.Millisecond)
						r.crash(name)
					}
				}
				if err := r.start(name); err != nil {
					r.mu.Lock()
					r.violate("daemon", 0, err.Error())
					r.mu.Unlock()
				}
			}
		}
	}()
	return &wg
}
