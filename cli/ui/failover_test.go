package ui

import (
	"testing"
	"time"

	"github.com/tide-hpc/tide/cli/clitest"
	"github.com/tide-hpc/tide/cli/cmdutil"
)

// answeringMinter is a client of several controllers: Current is the
// one that answered last.
type answeringMinter struct {
	*fakeMinter
	current string
}

func (a *answeringMinter) Current() string { return a.current }

// TestLinkSeveralControllers: with TIDE_CONTROLLER listing several
// controllers the link goes to the one that answered (the primary),
// not to the list.
func TestLinkSeveralControllers(t *testing.T) {
	m := &fakeMinter{FakeAPI: clitest.SharingCluster(), MaxLifespan: 24 * time.Hour}
	a := &answeringMinter{fakeMinter: m, current: "ctl2.example:6820"}
	m.Info.CallerUser = "alice"
	f, bufs := clitest.Factory(m.FakeAPI, map[string]string{"TIDE_CONTROLLER": "ctl1.example:6820,ctl2.example:6820", "TIDE_JWT": "a.b.c"})
	o := &Options{IO: f.IO, API: func() (cmdutil.API, error) { return a, nil }, Getenv: f.Getenv, Getwd: f.Getwd,
		Hostname: f.Hostname, Now: f.Now, TempDir: t.TempDir(), Sleep: func(time.Duration) {}}
	out, errOut, code := clitest.Run(newCmd(o), bufs, "tide ui", nil)
	want := "https://ctl2.example:6820/ui/login#token=eyJhbGciOiJIUzI1NiJ9.alice-8h0m0s.c2ln\n"
	if code != 0 || out != want {
		t.Fatalf("exit %d, stdout %q (stderr %q); want %q", code, out, errOut, want)
	}
}
