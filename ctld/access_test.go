package ctld

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/tide-hpc/tide/ctld/api"
)

// accessConfig has a partition open to all, one for the group "daemon"
// only, one that takes queue vision's jobs only and refuses class
// debug, and classes with access lists: inference keeps its default
// (operators only), training is granted to bob and to queue nlp.
const accessConfig = testConfigHeader + `
partitions:
  - {name: gpu, nodes: "gpu[01-02]", default: true, default_time: "1:00:00", max_time: "10:00:00"}
  - {name: staff, nodes: "gpu01", allow_groups: [daemon]}
  - {name: vis, nodes: "gpu02", allow_accounts: [vision], deny_qos: [debug]}
nodes:
  - {names: "gpu[01-02]", cpus: 8, memory: 64G, gpus: 8}
queues:
  - {name: vision, users: [alice, daemon]}
  - {name: nlp, users: [bob, alice]}
qos:
  - {name: training, users: [bob], accounts: [nlp]}
submit: {rate_per_queue: 1000}
`

// daemonUser is Debian's user daemon (uid 1, group daemon), present on
// every test machine: a real member of a real group for NSS lookups.
var daemonUser = caller{uid: 1, gid: 1, user: "daemon", known: true}

func TestAccessPolicy(t *testing.T) {
	op := caller{uid: 500, gid: 500, user: "operator", admin: true, known: true}
	tests := []struct {
		name     string
		as       caller
		spec     api.JobSpec
		errClass error
		errHas   string
	}{
		{name: "inference is for operators by default", spec: api.JobSpec{QOS: api.QOSInference},
			errClass: api.ErrPermissionDenied, errHas: "Invalid qos specification: user alice may not use qos inference (open to operators only)"},
		{name: "an operator may use inference", as: op, spec: api.JobSpec{QOS: api.QOSInference}},
		{name: "training granted to a user", as: bob, spec: api.JobSpec{QOS: api.QOSTraining}},
		{name: "training granted to a queue", spec: api.JobSpec{QOS: api.QOSTraining, Account: "nlp"}},
		{name: "training not granted in another queue", spec: api.JobSpec{QOS: api.QOSTraining, Account: "vision"},
			errClass: api.ErrPermissionDenied, errHas: "open to users bob; queues nlp"},
		{name: "allow_groups refuses a non-member", spec: api.JobSpec{Partition: "staff"},
			errClass: api.ErrPermissionDenied, errHas: "User's group not permitted to use this partition"},
		{name: "allow_groups admits a member", as: daemonUser, spec: api.JobSpec{Partition: "staff"}},
		{name: "operators pass allow_groups", as: op, spec: api.JobSpec{Partition: "staff", Account: "vision"}},
		{name: "allow_accounts refuses another queue", spec: api.JobSpec{Partition: "vis", Account: "nlp"},
			errClass: api.ErrPermissionDenied, errHas: "Invalid account or account/partition combination specified (partition vis does not take jobs of account \"nlp\")"},
		{name: "allow_accounts admits its queue", spec: api.JobSpec{Partition: "vis", Account: "vision"}},
		{name: "deny_qos refuses the class", spec: api.JobSpec{Partition: "vis", Account: "vision", QOS: api.QOSDebug},
			errClass: api.ErrPermissionDenied, errHas: "Invalid qos specification (partition vis does not take jobs of qos debug)"},
		{name: "operators are held to allow_accounts too", as: op, spec: api.JobSpec{Partition: "vis", Account: "nlp"},
			errClass: api.ErrPermissionDenied, errHas: "account/partition combination"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarnessWith(t, accessConfig)
			as := tt.as
			if as.user == "" {
				as = h.alice
			}
			resp, err := h.submitAs(as, tt.spec)
			if tt.errClass == nil {
				if err != nil {
					t.Fatal(err)
				}
				if j := h.job(resp.JobID); j.UserID != as.uid {
					t.Fatalf("job of uid %d", j.UserID)
				}
				return
			}
			if err == nil || !errors.Is(err, tt.errClass) || !strings.Contains(err.Error(), tt.errHas) {
				t.Fatalf("error %v, want class %v with %q", err, tt.errClass, tt.errHas)
			}
		})
	}
}

// TestUpdateCannotBypassPolicy: scontrol update of the queue or the
// partition is checked like a submission; an operator may move jobs
// where the lists allow.
func TestUpdateCannotBypassPolicy(t *testing.T) {
	h := newHarnessWith(t, accessConfig)
	h.register("gpu01")
	h.register("gpu02")
	id := h.submit(api.JobSpec{Account: "vision", Hold: true})
	str := func(s string) *string { return &s }
	update := func(c caller, u api.JobUpdate) string {
		u.IDs, u.Action = []uint64{id}, "update"
		resp, err := h.s.updateJobs(c, u)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Results[0].Error
	}
	if msg := update(h.alice, api.JobUpdate{Partition: str("staff")}); !strings.Contains(msg, "User's group not permitted") {
		t.Fatalf("move to a group's partition: %q", msg)
	}
	if msg := update(h.alice, api.JobUpdate{Account: str("ops")}); !strings.Contains(msg, "ops is not a queue") {
		t.Fatalf("move to an unknown queue: %q", msg)
	}
	carol := caller{uid: 1002, gid: 1002, user: "carol", known: true}
	h.s.mu.Lock()
	h.s.jobs[id].UserID, h.s.jobs[id].User = carol.uid, carol.user
	h.s.mu.Unlock()
	if msg := update(carol, api.JobUpdate{Account: str("nlp")}); !strings.Contains(msg, "carol may not submit to queue nlp") {
		t.Fatalf("move to a queue of others: %q", msg)
	}
	if msg := update(carol, api.JobUpdate{Partition: str("vis")}); msg != "" {
		t.Fatalf("allowed move refused: %q", msg)
	}
	if msg := update(carol, api.JobUpdate{Partition: str("nowhere")}); !strings.Contains(msg, "Invalid partition") {
		t.Fatalf("move to an unknown partition: %q", msg)
	}
	op := caller{uid: 500, gid: 500, user: "operator", admin: true, known: true}
	if msg := update(op, api.JobUpdate{Account: str("nlp")}); !strings.Contains(msg, "partition vis does not take jobs of account") {
		t.Fatalf("operator moved the job out of the partition's accounts: %q", msg)
	}
	if msg := update(op, api.JobUpdate{Account: str("nlp"), Partition: str("gpu")}); msg != "" {
		t.Fatalf("operator's move refused: %q", msg)
	}
	if j := h.job(id); j.Account != "nlp" || j.Partition != "gpu" {
		t.Fatalf("job in %s/%s", j.Account, j.Partition)
	}
}

func TestDefaultQOSMustBeOpen(t *testing.T) {
	cfg, err := ParseConfig(strings.NewReader(testConfig + "default_qos: inference\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "default class must be open to everyone") {
		t.Fatalf("validate: %v", err)
	}
	cfg, _ = ParseConfig(strings.NewReader(testConfig + "default_qos: inference\nqos: [{name: inference, users: [ALL]}]\n"))
	if _, err := cfg.Validate(); err != nil {
		t.Fatalf("inference opened to ALL: %v", err)
	}
	cfg, _ = ParseConfig(strings.NewReader(strings.Replace(testConfig, `max_time: "1:00:00"}`,
		`max_time: "1:00:00", allow_accounts: [a], deny_accounts: [b]}`, 1)))
	if _, err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "allow_accounts or deny_accounts, not both") {
		t.Fatalf("validate: %v", err)
	}
}

// TestSubmitAsAnotherUser: --uid/--gid from root make the job the
// user's; from anybody else they are refused; operators other than root
// may not become root or pick a group the user is not in.
func TestSubmitAsAnotherUser(t *testing.T) {
	rootC := caller{uid: 0, gid: 0, user: "root", admin: true, known: true}
	op := caller{uid: 500, gid: 500, user: "operator", admin: true, known: true}
	tests := []struct {
		name        string
		as          caller
		user, group string
		allowRoot   bool
		wantUID     uint32
		wantGID     uint32
		errHas      string
	}{
		{name: "root as nobody", as: rootC, user: "nobody", allowRoot: true, wantUID: 65534, wantGID: 65534},
		{name: "root by number", as: rootC, user: "1", allowRoot: true, wantUID: 1, wantGID: 1},
		{name: "root as a user and any group", as: rootC, user: "daemon", group: "0", allowRoot: true, wantUID: 1, wantGID: 0},
		{name: "root as a user even when root jobs are refused", as: rootC, user: "daemon", wantUID: 1, wantGID: 1},
		{name: "an ordinary user may not", as: caller{uid: 1000, gid: 1000, user: "alice", known: true}, user: "nobody",
			errHas: "only root and operators may submit jobs as another user"},
		{name: "an ordinary user may name themself", as: daemonUser, user: "daemon", wantUID: 1, wantGID: 1},
		{name: "an operator as a user", as: op, user: "daemon", wantUID: 1, wantGID: 1},
		{name: "an operator may not become root", as: op, user: "root", allowRoot: true, errHas: "only root may submit jobs as root"},
		{name: "an operator may not pick a foreign group", as: op, user: "daemon", group: "root",
			errHas: "user daemon is not a member of group root"},
		{name: "unknown user", as: rootC, user: "no-such-user-x", errHas: "Invalid user id: no-such-user-x"},
		{name: "unknown group", as: rootC, user: "daemon", group: "no-such-group-x", errHas: "Invalid group id: no-such-group-x"},
		{name: "an operator without --uid submits as itself", as: op, wantUID: 500, wantGID: 500},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig
			if tt.allowRoot {
				cfg += "allow_root_jobs: true\n"
			}
			h := newHarnessWith(t, cfg)
			resp, err := h.s.submit(context.Background(), tt.as, api.SubmitRequest{User: tt.user, Group: tt.group,
				Spec: api.JobSpec{Script: "#!/bin/sh\ntrue\n", WorkDir: "/tmp"}})
			if tt.errHas != "" {
				if err == nil || !strings.Contains(err.Error(), tt.errHas) {
					t.Fatalf("error %v, want %q", err, tt.errHas)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			j := h.job(resp.JobID)
			if j.UserID != tt.wantUID || j.GroupID != tt.wantGID {
				t.Fatalf("job of uid %d gid %d, want %d %d", j.UserID, j.GroupID, tt.wantUID, tt.wantGID)
			}
			ev, _ := h.s.store.Events(context.Background(), resp.JobID)
			if tt.user != "" && tt.wantUID != tt.as.uid && !strings.Contains(ev[0].Message, tt.as.user+" as ") {
				t.Fatalf("trail says %q", ev[0].Message)
			}
		})
	}
	// Without allow_root_jobs, root may not submit as root (itself).
	h := newHarness(t)
	if _, err := h.s.submit(context.Background(), rootC, api.SubmitRequest{User: "root",
		Spec: api.JobSpec{Script: "#!/bin/sh\ntrue\n", WorkDir: "/tmp"}}); err == nil || !strings.Contains(err.Error(), "root jobs are not allowed") {
		t.Fatalf("root job accepted: %v", err)
	}
}
