package ctld

import (
	"strings"
	"testing"

	"github.com/tide-hpc/tide/ctld/client"
	"github.com/tide-hpc/tide/internal/munge"
	"github.com/tide-hpc/tide/internal/munge/mungetest"
)

// TestAPIWithRealMunge runs the user API over TCP with a private munged
// on each side (one key, as on a cluster): the identity is what munged
// vouches for; a credential replayed, made under another key, or none
// at all is refused and changes nothing.
func TestAPIWithRealMunge(t *testing.T) {
	ctlMunged := mungetest.Start(t)
	login := mungetest.StartWithKey(t, ctlMunged.Key) // the login node's munged
	stranger := mungetest.Start(t)                    // another cluster's key
	a := serveAPI(t, "munge: {socket: "+ctlMunged.Socket+"}\nallow_root_jobs: true\n")

	c := client.NewRemote(a.api, client.Munge{Socket: login.Socket})
	defer c.Close()
	info, err := c.Cluster(tctx(t))
	if err != nil || info.CallerUID != 0 || !info.CallerAdmin {
		t.Fatalf("MUNGE caller (the test runs as root): %+v, %v", info, err)
	}
	r, err := c.Submit(tctx(t), submitSpec())
	if err != nil {
		t.Fatal(err)
	}
	if ev, err := a.local(t).Events(tctx(t), r.JobID); err != nil || len(ev) == 0 || !strings.Contains(ev[0].Message, "(munge, 127.0.0.1)") {
		t.Fatalf("trail: %+v, %v", ev, err)
	}

	cred, err := munge.Encode(tctx(t), login.Socket, nil)
	if err != nil {
		t.Fatal(err)
	}
	if code, _, _ := rawAPI(t, a.api, "GET", "/api/v1/jobs", "", "MUNGE "+cred); code != 200 {
		t.Fatalf("fresh credential: %d", code)
	}
	before := len(a.h.s.jobs)
	if code, eb, _ := rawAPI(t, a.api, "POST", "/api/v1/jobs", `{"spec":{"script":"#!/bin/sh\ntrue\n","work_dir":"/tmp"}}`, "MUNGE "+cred); code != 401 ||
		!strings.Contains(eb.Error.Message, "MUNGE credential refused") || !strings.Contains(strings.ToLower(eb.Error.Message), "replayed") {
		t.Fatalf("replayed credential: %d %+v", code, eb.Error)
	}
	other, err := munge.Encode(tctx(t), stranger.Socket, nil)
	if err != nil {
		t.Fatal(err)
	}
	if code, eb, _ := rawAPI(t, a.api, "POST", "/api/v1/jobs", `{"spec":{"script":"#!/bin/sh\ntrue\n","work_dir":"/tmp"}}`, "MUNGE "+other); code != 401 ||
		!strings.Contains(eb.Error.Message, "MUNGE credential refused") {
		t.Fatalf("credential of another key: %d %+v", code, eb.Error)
	}
	if code, _, _ := rawAPI(t, a.api, "POST", "/api/v1/jobs", `{"spec":{"script":"#!/bin/sh\ntrue\n","work_dir":"/tmp"}}`); code != 401 {
		t.Fatalf("no credential: %d", code)
	}
	if code, eb, _ := rawAPI(t, a.api, "POST", "/api/v1/jobs", `{"spec":{"script":"#!/bin/sh\ntrue\n","work_dir":"/tmp"}}`, "MUNGE MUNGE:AwQDAACqZ7yPZr8:"); code != 401 ||
		!strings.Contains(eb.Error.Message, "MUNGE credential refused") {
		t.Fatalf("garbage credential: %d %+v", code, eb.Error)
	}
	a.h.s.mu.Lock()
	after := len(a.h.s.jobs)
	a.h.s.mu.Unlock()
	if after != before {
		t.Fatalf("refused requests made %d jobs", after-before)
	}

	// A stopped controller munged is 503 (try again), not 401.
	ctlMunged.Stop()
	_, err = c.Cluster(tctx(t))
	if err == nil || !strings.Contains(err.Error(), "cannot check MUNGE credentials now") {
		t.Fatalf("munged down: %v", err)
	}
}
