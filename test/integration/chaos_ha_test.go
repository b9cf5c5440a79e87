package integration

import (
	"syscall"
	"time"
)

// haLeaseTTL is the lease TTL of the chaos test's controllers when it
// runs several (TIDE_CHAOS_CONTROLLERS): the default, as operators run.
const haLeaseTTL = 6 * time.Second

// pausePrimary stops the primary controller with SIGSTOP for longer
// than its lease (plus extra), so that a standby takes over while it
// is frozen, then resumes it: it must step down without acting, as a
// primary that lost its lease to a long pause must.
func (r *chaosRun) pausePrimary(extra time.Duration) {
	name := r.c.primaryName()
	if name == "" {
		r.note("pause: no controller answers as primary")
		return
	}
	cmd := r.c.controllerCmd(name)
	d := haLeaseTTL + time.Second + extra
	r.note("SIGSTOP %s (pid %d, primary) for %s", name, cmd.Process.Pid, d.Round(time.Millisecond))
	_ = cmd.Process.Signal(syscall.SIGSTOP)
	r.mu.Lock()
	r.counts["pause_primary"]++
	r.mu.Unlock()
	time.Sleep(d)
	_ = cmd.Process.Signal(syscall.SIGCONT)
	r.note("SIGCONT %s; primary now: %s", name, r.c.primaryName())
}
