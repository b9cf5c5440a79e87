package ctld

import "time"

// After a restart (or a standby's takeover) the controller holds its
// first scheduling pass until the nodes are back, for at most
// recoveryGrace. Until a node re-registers it is not responding, so a
// pass then would give every pending job a new reason ("nodes not
// responding" instead of the stored "Resources") and rewrite every job
// record and trail to say so, then rewrite them all back once the nodes
// return: at 100,000 pending jobs two full rewrites under the lock,
// while the restarted controller should be answering its clients. Nothing
// could start meanwhile anyway: a node that has not registered takes no
// job.

// recoveryGraceMax bounds the wait; timeouts.node bounds it further
// (a node silent that long is down in any case).
const recoveryGraceMax = 10 * time.Second

// armRecoveryGrace starts the wait, from now; called by recover when it
// found jobs. Called with mu held (or before the server runs).
func (s *Server) armRecoveryGrace(now time.Time) {
	s.graceUntil = now.Add(min(recoveryGraceMax, s.cl.Timeouts.Node))
}

// passHeld reports how much longer the first pass after recovery waits
// (0: it may run): until every node an operator has not taken down has
// registered, or the grace runs out. Called with mu held.
func (s *Server) passHeld(now time.Time) time.Duration {
	if s.graceUntil.IsZero() {
		return 0
	}
	if left := s.graceUntil.Sub(now); left > 0 {
		for _, n := range s.nodes {
			if !n.registered && !n.adminDown {
				return left
			}
		}
	}
	s.graceUntil = time.Time{}
	return 0
}
