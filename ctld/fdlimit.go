package ctld

import (
	"fmt"
	"syscall"
)

// raiseNoFile raises the soft RLIMIT_NOFILE to the hard limit (the Go
// runtime does so at start on Linux too; a controller started with a
// lower soft limit by its caller gets the same) and returns the soft
// limit now in force.
func raiseNoFile() (uint64, error) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, fmt.Errorf("read RLIMIT_NOFILE: %w", err)
	}
	if rl.Cur < rl.Max {
		want := rl
		want.Cur = rl.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err != nil {
			return rl.Cur, fmt.Errorf("raise RLIMIT_NOFILE from %d to %d: %w", rl.Cur, rl.Max, err)
		}
		rl = want
	}
	return rl.Cur, nil
}

// fdShare is the part of the file descriptor limit the listeners'
// connection caps may take together; the rest is for the database,
// logs, spool files and the listeners themselves, with room to spare.
const (
	fdShareNum, fdShareDen = 3, 4
	// fdFloor is the least left for everything else.
	fdFloor = 64
)

// fitConnLimits lowers the caps of lims (one per listener) so that
// their totals together stay within fdShare of nofile, keeping each
// listener's caps consistent (per peer and unauthenticated caps within
// the total). It reports whether it lowered anything. nofile 0 (or an
// unlimited one) leaves lims as they are.
func fitConnLimits(lims []*connLimits, nofile uint64) bool {
	if nofile == 0 || nofile > 1<<40 {
		return false
	}
	budget := int64(nofile) * fdShareNum / fdShareDen
	budget = min(budget, int64(nofile)-fdFloor)
	sum := int64(0)
	for _, l := range lims {
		sum += int64(l.total)
	}
	if sum <= budget {
		return false
	}
	for _, l := range lims {
		total := max(int(int64(l.total)*max(budget, int64(len(lims)))/sum), 1)
		l.fit(total)
	}
	return true
}

// fit lowers l's caps to a total of n connections.
func (l *connLimits) fit(n int) {
	if n >= l.total {
		return
	}
	scale := func(v int) int { return int(int64(v) * int64(n) / int64(l.total)) }
	if l.unauth > 0 {
		l.unauth = min(max(scale(l.unauth), 1), max(n-1, 1))
		l.unauthPerPeer = min(max(scale(l.unauthPerPeer), 1), l.unauth)
	}
	l.reserve = min(scale(l.reserve), max(n-1, 0))
	l.perPeer = min(max(scale(l.perPeer), 1), n)
	l.total = n
}
