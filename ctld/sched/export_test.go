package sched

import "github.com/tide-hpc/tide/ctld/api"

// NoShortcuts makes PolicyBackfill's plan do without the shortcuts of
// fitruns.go (cached runs, narrow's untouched nodes, the bulk-built
// plan): every search walks every node's plan, as it does for requests
// it cannot cache. Tests compare plans made both ways; they must not
// run in parallel with it. The returned func restores the shortcuts.
func NoShortcuts() (restore func()) {
	old := noShortcuts
	noShortcuts = true
	return func() { noShortcuts = old }
}

// VerifyRuns makes every use of PolicyBackfill's cached runs walk every
// node again and panic when a cached run differs from its walk (and
// narrow check every node it leaves as is), until the returned func
// restores the plain search.
func VerifyRuns() (restore func()) {
	old := verifyCache
	verifyCache = true
	return func() { verifyCache = old }
}

// NoTail makes passes decide every job of a deep queue's tail through its
// gates and request, without its class (tail.go), until the returned
// func restores it. Tests must not run in parallel with it.
func NoTail() (restore func()) {
	old := noTail
	noTail = true
	return func() { noTail = old }
}

// TailHits is the number of jobs sc's last pass decided by their class.
func (sc *Scratch) TailHits() int { return sc.tailHits }

// Retained is what f's pass still holds of the last check's submission:
// the request's job and the pass's own copy of it.
func (f *Feasibility) Retained() (reqJob *api.Job, script string, env []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.p == nil {
		return nil, "", nil
	}
	return f.p.req.Job, f.p.feasJob.Script, f.p.feasJob.Environment
}
