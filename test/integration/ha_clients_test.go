package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestClientsFollowFailover: with TIDE_CONTROLLER and the nodes'
// controller naming all three controllers, kill -9 of the primary (the
// first in both lists) leaves the CLI and the nodes working without
// help: commands move on past the dead one, each node logs the move
// once and registers with the new primary, a job submitted through
// the list runs, and scontrol ping shows the dead controller DOWN and
// the new primary UP.
func TestClientsFollowFailover(t *testing.T) {
	h := newHACluster(t)
	r := h.cli("scontrol", "ping")
	want := "Slurmctld(primary) at 127.0.0.1 is UP\nSlurmctld(backup) at 127.0.0.1 is UP\nSlurmctld(backup) at 127.0.0.1 is UP\n"
	if r.code != 0 || r.out != want {
		t.Fatalf("scontrol ping: exit %d\n%s%s", r.code, r.out, r.err)
	}
	if h.primary() != 0 {
		t.Fatalf("primary %d, want ctl1", h.primary())
	}
	_ = h.ctls[0].cmd.Process.Kill()
	_ = h.ctls[0].cmd.Wait()
	h.eventually(30*time.Second, "a standby becomes primary", func() bool { return h.primary() > 0 })
	p := h.primary()
	h.eventually(30*time.Second, "both nodes idle with the new primary", func() bool {
		r := h.cli("sinfo", "-h", "-N", "-o", "%N %t")
		return r.code == 0 && strings.Count(r.out, " idle") == haNodes
	})
	r = h.cli("sbatch", "--parsable", "-c", "1", "--wrap", "true")
	if r.code != 0 {
		t.Fatalf("sbatch after the failover: exit %d %q", r.code, r.err)
	}
	id := strings.TrimSpace(r.out)
	h.eventually(60*time.Second, "the job completes", func() bool {
		r := h.cli("sacct", "-X", "-n", "-P", "-j", id, "-o", "State")
		return strings.TrimSpace(r.out) == "COMPLETED"
	})

	r = h.cli("scontrol", "ping")
	lines := strings.Split(strings.TrimSpace(r.out), "\n")
	if r.code != 0 || len(lines) < 3 || lines[0] != "Slurmctld(backup) at 127.0.0.1 is DOWN" ||
		lines[p] != "Slurmctld(primary) at 127.0.0.1 is UP" || strings.Count(r.out, "(primary)") != 1 {
		t.Errorf("scontrol ping after the kill: exit %d\n%s%s", r.code, r.out, r.err)
	}
	r = h.cli("scontrol", "--json", "ping")
	var doc struct {
		Pings []struct{ Pinged, Mode string } `json:"pings"`
	}
	if err := json.Unmarshal([]byte(r.out), &doc); err != nil || len(doc.Pings) != 3 || doc.Pings[0].Pinged != "DOWN" ||
		doc.Pings[p].Mode != "primary" || doc.Pings[p].Pinged != "UP" {
		t.Errorf("scontrol --json ping: %v\n%s", err, r.out)
	}

	for i := 1; i <= haNodes; i++ {
		name := fmt.Sprintf("gpu%02d", i)
		b, _ := os.ReadFile(filepath.Join(h.dir, name+".log"))
		if n := strings.Count(string(b), `msg="controller failover"`); n != 1 {
			t.Errorf("%s logged %d failovers, want 1:\n%s", name, n, logTail(string(b), 3000))
		}
		if !strings.Contains(string(b), "from="+h.ctls[0].nodeAddr) {
			t.Errorf("%s: no failover from %s in its log", name, h.ctls[0].nodeAddr)
		}
	}
}

// logTail is the end of a log, at most n bytes.
func logTail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
