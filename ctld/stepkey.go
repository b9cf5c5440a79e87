package ctld

// The controller's step key (issue 21): an Ed25519 key of its own that
// signs srun's step grants. It is generated in state_dir at the first
// start, kept across restarts and never sent anywhere; its public half
// goes to every node daemon in the registration answer, and the nodes
// pin it. Unlike the cluster key, which every node holds, it cannot be
// used to forge a grant from a node or a captured node request.

import (
	"fmt"
	"path/filepath"
	"sync"

	"github.com/tide-hpc/tide/internal/stepcred"
)

// StepKeyFile is the step key's file name in state_dir.
const StepKeyFile = "step_key.pem"

// stepKeyEntry is the step key as loaded (or why it could not be).
type stepKeyEntry struct {
	once   sync.Once
	signer *stepcred.Signer
	err    error
}

// stepSigner returns the signer of s's state directory, loading the key
// or, at the first start, creating it, once per Server. tidectld calls
// it at start, so that a key file others may read stops the controller
// there; a failure is kept and returned again.
func (s *Server) stepSigner() (*stepcred.Signer, error) {
	e := &s.stepKey
	e.once.Do(func() {
		dir, err := filepath.Abs(s.cl.StateDir)
		if err != nil {
			e.err = fmt.Errorf("step key: %w", err)
			return
		}
		path := filepath.Join(dir, StepKeyFile)
		key, created, err := stepcred.LoadOrCreateKey(path)
		if err != nil {
			e.err = fmt.Errorf("%w (the controller's key for srun step grants; see docs/operations.md)", err)
			return
		}
		e.signer = stepcred.NewSigner(key)
		what := "step key loaded"
		if created {
			what = "step key created"
		}
		s.log.Info(what, "path", path, "fingerprint", stepcred.Fingerprint(e.signer.Public()))
	})
	return e.signer, e.err
}

// stepKeyWire is the public step key as registration answers carry it
// ("" when the controller has none, which the node logs and then
// refuses every grant).
func (s *Server) stepKeyWire() string {
	sg, err := s.stepSigner()
	if err != nil {
		s.log.Error("no step key for the node's registration: srun steps will fail", "err", err)
		return ""
	}
	return stepcred.EncodePublic(sg.Public())
}

// CheckStepKey loads or creates the controller's step key; tidectld
// calls it at start and refuses to run without one.
func (s *Server) CheckStepKey() error {
	_, err := s.stepSigner()
	return err
}
