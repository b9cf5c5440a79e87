package steps

// Who may start a step here (issue 21). A grant must be signed by the
// controller's step key, which this node pins, and name a job that runs
// on this node under the grant's uid and gid: a batch job tided launched,
// or one the controller says this node hosts (api.HostedJob: allocations
// and the other nodes of multi-node jobs). A step starts once per node
// (a replayed grant starts nothing), and only with a grant issued while
// this tided runs, since the memory of started steps goes with it.
//
// The pin: the controller's public key comes with every registration
// answer. The first one is written to state_dir/controller_step_key.pem
// and from then on is the only key this node takes, across tided
// restarts: a controller (or a forger holding the cluster key, who can
// answer a registration) presenting another key is logged as an error
// at every registration and its grants are refused, until an operator
// removes the file and restarts tided. An operator may also put the
// file there before tided first starts (the controller's public key,
// `openssl pkey -in step_key.pem -pubout`), so that nothing is learnt
// from the network at all.

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/internal/stepcred"
)

// PinnedKeyFile is the controller's public step key as this node
// pinned it, in state_dir.
const PinnedKeyFile = "controller_step_key.pem"

// hostedWait bounds how long a grant for a job this node does not know
// waits for the controller to tell of it: the job's start and srun's
// connection race (a node hears of a new allocation in the sync answer
// the start wakes, srun may be quicker).
const hostedWait = 5 * time.Second

// stepKeys is the node's pinned controller key and what it heard since.
type stepKeys struct {
	mu sync.Mutex
	// pub is the pinned key (nil before the first registration).
	pub ed25519.PublicKey
	// offered is a different key the controller presented, kept to
	// explain refusals.
	offered ed25519.PublicKey
	path    string
}

// loadPin reads the pinned key, if any, at the listener's start.
func (s *Server) loadPin() error {
	s.keys.path = filepath.Join(s.cfg.StateDir, PinnedKeyFile)
	pub, err := stepcred.ReadPublicFile(s.keys.path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		s.log.Info("no controller step key pinned yet: the first registration brings it", "path", s.keys.path)
		return nil
	case err != nil:
		return fmt.Errorf("pinned controller step key: %w (remove the file to pin the controller's key again)", err)
	}
	s.keys.pub = pub
	s.log.Info("controller step key pinned", "path", s.keys.path, "fingerprint", stepcred.Fingerprint(pub))
	return nil
}

// LearnKey takes the controller's step key of a registration or sync
// answer (wire form, stepcred.EncodePublic): pins it when none is, and
// reports loudly a key other than the pinned one.
func (s *Server) LearnKey(wire string) {
	pub, err := stepcred.ParsePublic(wire)
	if err != nil {
		s.log.Error("controller sent a bad step key: steps are refused", "err", err)
		return
	}
	k := &s.keys
	k.mu.Lock()
	defer k.mu.Unlock()
	switch {
	case k.pub == nil:
		err := stepcred.WritePublicFile(k.path, pub)
		if errors.Is(err, os.ErrExist) {
			// Put there since the start (an operator): that is the pin.
			if k.pub, err = stepcred.ReadPublicFile(k.path); err != nil {
				s.log.Error("pinned controller step key unreadable: steps are refused", "path", k.path, "err", err)
				return
			}
			if !k.pub.Equal(pub) {
				k.offered = pub
				s.logKeyChange(pub)
			}
			return
		}
		if err != nil {
			// Pinned for this run only; the next tided pins again.
			s.log.Warn("cannot write the pinned controller step key", "path", k.path, "err", err)
		}
		k.pub = pub
		s.log.Info("controller step key pinned", "path", k.path, "fingerprint", stepcred.Fingerprint(pub))
	case k.pub.Equal(pub):
		k.offered = nil
	default:
		k.offered = pub
		s.logKeyChange(pub)
	}
}

// logKeyChange reports a controller key other than the pinned one.
// Called with keys.mu held.
func (s *Server) logKeyChange(offered ed25519.PublicKey) {
	s.log.Error("THE CONTROLLER'S STEP KEY CHANGED: every srun step is refused on this node until an operator checks it. "+
		"If the controller's state_dir (its step_key.pem) was replaced on purpose, remove the pinned key and restart tided",
		"pinned", stepcred.Fingerprint(s.keys.pub), "offered", stepcred.Fingerprint(offered), "path", s.keys.path)
}

// PinnedKey returns the controller key this node pinned (nil before the
// first registration).
func (s *Server) PinnedKey() ed25519.PublicKey {
	pub, _ := s.pinnedKey()
	return pub
}

// pinnedKey returns the pinned key and, when the controller offered
// another, a hint for refusals ("" otherwise).
func (s *Server) pinnedKey() (ed25519.PublicKey, string) {
	k := &s.keys
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.offered != nil {
		return k.pub, fmt.Sprintf(" (the controller's step key changed from the %s this node pinned to %s; an operator must remove %s and restart tided if that is right)",
			stepcred.Fingerprint(k.pub), stepcred.Fingerprint(k.offered), k.path)
	}
	return k.pub, ""
}

// stepID names one step of one job incarnation.
type stepID struct {
	ref  api.JobRef
	step uint32
}

// errRefused marks a grant that verified but may not start here.
var errRefused = errors.New("step refused")

// admit decides whether grant g, verified, may start its step here: the
// grant was issued while this tided runs, its job runs here under the
// grant's uid and gid, and the step did not start here before. It
// records the step as started.
func (s *Server) admit(g *api.StepGrant) error {
	if g.Issued.Before(s.since) {
		return fmt.Errorf("%w: the grant of step %s was issued at %s, before this node's tided started (%s): run srun again",
			errRefused, g.ID(), g.Issued.UTC().Format(time.RFC3339), s.since.UTC().Format(time.RFC3339))
	}
	if err := s.jobRunsHere(g); err != nil {
		return err
	}
	id := stepID{api.JobRef{JobID: g.JobID, Restart: g.Restart}, g.StepID}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, exp := range s.started {
		if !now.Before(exp) {
			delete(s.started, k) // its grant is refused as expired now
		}
	}
	if _, ok := s.started[id]; ok {
		return fmt.Errorf("%w: step %s already started on this node (a grant starts its step once)", errRefused, g.ID())
	}
	s.started[id] = g.Expires
	return nil
}

// jobRunsHere checks that g's job runs on this node as g's uid and gid,
// waiting up to hostedWait for the controller to tell of a job it does
// not know yet.
func (s *Server) jobRunsHere(g *api.StepGrant) error {
	ref := api.JobRef{JobID: g.JobID, Restart: g.Restart}
	s.mu.Lock()
	deadline := time.Now().Add(s.hostedWait)
	s.mu.Unlock()
	asked := false
	for {
		uid, gid, ok, changed := s.host.JobUser(ref)
		switch {
		case ok && (uid != g.UserID || gid != g.GroupID):
			return fmt.Errorf("%w: job %d runs on this node as uid %d gid %d, not as the grant's uid %d gid %d",
				errRefused, g.JobID, uid, gid, g.UserID, g.GroupID)
		case ok:
			return nil
		case !time.Now().Before(deadline):
			return fmt.Errorf("%w: job %d (run %d) does not run on this node", errRefused, g.JobID, g.Restart)
		}
		if !asked {
			// Have the controller's newest list now rather than at the
			// next heartbeat.
			s.host.Wake()
			asked = true
		}
		t := time.NewTimer(min(100*time.Millisecond, time.Until(deadline)))
		select {
		case <-changed:
		case <-t.C: // a launch of the job lands in the job table
		}
		t.Stop()
	}
}
