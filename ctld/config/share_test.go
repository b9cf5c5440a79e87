package config

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/ctld/api"
)

// shareBase is a cluster of 4 nodes × 8 GPUs (32), 16 of them in
// partition half.
const shareBase = `
version: 1
nodes: [{names: "n[1-4]", gpus: 8}]
partitions:
  - {name: all, nodes: "n[1-4]"}
  - {name: half, nodes: "n[1-2]"}
`

func TestSharingConfig(t *testing.T) {
	tests := []struct {
		name, yaml string
		// check inspects a valid config; want lists error substrings.
		check func(t *testing.T, sh Sharing)
		want  []string
	}{
		{name: "defaults without queues", yaml: "", check: func(t *testing.T, sh Sharing) {
			if sh.Configured || len(sh.Queues) != 0 || sh.DefaultQOS != api.QOSBatch {
				t.Fatalf("sharing = %+v", sh)
			}
			if d := sh.QOS[api.QOSDebug]; d.Mode != api.PreemptCancel || d.MaxTime != 7200 || d.GraceTime != 10 {
				t.Fatalf("debug = %+v", d)
			}
			if tr := sh.QOS[api.QOSTraining]; tr.PreemptGap != 2 || tr.MinRuntime != 600 || tr.DefaultLevel != 5 {
				t.Fatalf("training = %+v", tr)
			}
			if diff := cmp.Diff([]string{"training", "inference", "batch", "debug"}, sh.QOSOrder); diff != "" {
				t.Fatalf("order (-want +got):\n%s", diff)
			}
		}},
		{name: "queues with percent and hierarchy", yaml: `
queues:
  - {name: org, guaranteed: "50%", cap: "75%", users: [alice], groups: [ml]}
  - {name: moba, parent: org, guaranteed: 8, cap: 16, lend_limit: 4, max_running_per_user: 2, submit_rate: 5}
  - {name: fps, partition: half, guaranteed: "50%", borrow_limit: 0}
qos:
  - {name: batch, max_level: 5, grace_time: 2m}
  - {name: urgent, min_level: 9, max_level: 10, preempt_mode: off}
default_qos: urgent
submit: {rate_per_queue: 20, buffer: 100}
`, check: func(t *testing.T, sh Sharing) {
			org, moba, fps := sh.Queue("org"), sh.Queue("moba"), sh.Queue("fps")
			if org.Guaranteed.Resolve(32) != 16 || org.Cap.Resolve(32) != 24 || org.SubmitRate != 20 || org.LendLimit != -1 {
				t.Fatalf("org = %+v", org)
			}
			if moba.LendLimit != 4 || moba.BorrowLimit != -1 || moba.SubmitRate != 5 || moba.MaxRunningPerUser != 2 {
				t.Fatalf("moba = %+v", moba)
			}
			if fps.Guaranteed.Percent != 50 || fps.BorrowLimit != 0 {
				t.Fatalf("fps = %+v", fps)
			}
			if !org.Member("alice", nil) || !org.Member("bob", []string{"ml"}) || org.Member("bob", []string{"x"}) || !moba.Member("anyone", nil) {
				t.Fatal("membership wrong")
			}
			if b := sh.QOS["batch"]; b.MaxLevel != 5 || b.MinLevel != 1 || b.GraceTime != 120 || b.Mode != api.PreemptRequeue {
				t.Fatalf("batch = %+v", b)
			}
			if u := sh.QOS["urgent"]; u.Mode != api.PreemptNever || u.DefaultLevel != 9 || u.PreemptGap != 1 {
				t.Fatalf("urgent = %+v", u)
			}
			if !sh.Configured || sh.DefaultQOS != "urgent" || sh.QOSOrder[4] != "urgent" {
				t.Fatalf("sharing = %+v", sh)
			}
		}},
		{name: "cap below guaranteed", yaml: "queues: [{name: a, guaranteed: 8, cap: 4}]\n",
			want: []string{"queues[0] (a).cap: 4 (4 GPUs) is below guaranteed 8 (8 GPUs)"}},
		{name: "bad amounts", yaml: "queues: [{name: a, guaranteed: lots, cap: \"120%\"}]\n",
			want: []string{"queues[0] (a).guaranteed", "queues[0] (a).cap", "percentage"}},
		{name: "unknown parent and partition", yaml: "queues: [{name: a, parent: b, partition: p}]\n",
			want: []string{`queue a: parent "b" is not a queue`, `queues[0] (a).partition: "p"`}},
		{name: "cycle", yaml: "queues: [{name: a, parent: b}, {name: b, parent: a}]\n",
			want: []string{"cycle"}},
		{name: "children over parent", yaml: "queues: [{name: p, guaranteed: 8}, {name: c1, parent: p, guaranteed: 6}, {name: c2, parent: p, guaranteed: 4}]\n",
			want: []string{"queue p: its children guarantee 10 GPUs, more than its own guaranteed 8"}},
		{name: "guarantees over cluster", yaml: "queues: [{name: a, guaranteed: 20}, {name: b, guaranteed: \"50%\"}]\n",
			want: []string{"top-level queues guarantee 36 GPUs, more than the cluster's 32"}},
		{name: "duplicate queue and negative limits", yaml: "queues: [{name: a, max_gpus_per_user: -1, lend_limit: -2}, {name: a}]\n",
			want: []string{"queue a defined twice", "max_gpus_per_user", "lend_limit: -2"}},
		{name: "qos levels", yaml: "qos: [{name: x, min_level: 0}, {name: y, min_level: 8, max_level: 11}, {name: z, min_level: 5, max_level: 3}, {name: debug, default_level: 9}]\n",
			want: []string{"qos[1] (y).max_level: 11", "qos[2] (z): min_level 5 is above max_level 3",
				"qos[3] (debug).default_level: 9 is not between"}},
		{name: "qos mode and default", yaml: "qos: [{name: x, preempt_mode: sometimes}]\ndefault_qos: nope\n",
			want: []string{`qos[0] (x).preempt_mode: "sometimes"`, `default_qos: "nope" is not a qos`}},
		{name: "submit and scheduler", yaml: "submit: {rate_per_queue: 0, rate_per_user: -1, buffer: -5}\nscheduler: {backfill_depth: -1}\n",
			want: []string{"submit.rate_per_queue", "submit.rate_per_user", "submit.buffer", "scheduler.backfill_depth"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse(strings.NewReader(shareBase + tt.yaml))
			if err != nil {
				t.Fatal(err)
			}
			cl, err := cfg.Validate()
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				tt.check(t, cl.Sharing)
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestSharingDefaults(t *testing.T) {
	cfg, err := Parse(strings.NewReader(shareBase))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Scheduler.StarvationAge != DefaultStarvationAge || !cfg.Scheduler.Preemption ||
		cfg.Submit.RatePerQueue != DefaultSubmitRate || cfg.Submit.Buffer != DefaultSubmitBuffer || cfg.DefaultQOS != "batch" {
		t.Fatalf("defaults: %+v %+v %q", cfg.Scheduler, cfg.Submit, cfg.DefaultQOS)
	}
}

// TestSampleSharingExample uncomments the queues and qos example of
// etc/tide.yaml: the documented example must be a valid config.
func TestSampleSharingExample(t *testing.T) {
	b, err := os.ReadFile("../../etc/tide.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	in := false
	for _, l := range strings.Split(string(b), "\n") {
		switch {
		case l == "# queues:":
			in = true
		case strings.HasPrefix(l, "# The class of jobs"):
			in = false
		}
		yaml := strings.HasPrefix(l, "#   ") || l == "# queues:" || l == "# qos:"
		if in && yaml {
			l = strings.TrimPrefix(l, "# ")
		}
		out = append(out, l)
	}
	cfg, err := Parse(strings.NewReader(strings.Join(out, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	cl, err := cfg.Validate()
	if err != nil {
		t.Fatal(err)
	}
	sh := cl.Sharing
	if len(sh.Queues) != 2 || sh.Queue("vision").Parent != "research" || !sh.Configured ||
		sh.QOS[api.QOSDebug].MaxTime != 7200 || sh.QOS[api.QOSInference].Mode != api.PreemptNever {
		t.Fatalf("example: %+v", sh)
	}
	if diff := cmp.Diff(defaultQOS(), sh.QOS); diff != "" {
		t.Fatalf("the documented classes differ from the defaults (-want +got):\n%s", diff)
	}
	if a := sh.QOSAccess[api.QOSInference]; a.All || !a.Allows("carol", []string{"serving"}, "") ||
		!a.Allows("dave", nil, "research") || a.Allows("erin", []string{"ml"}, "vision") {
		t.Fatalf("inference access: %+v", a)
	}
	if a := sh.QOSAccess[api.QOSBatch]; !a.All {
		t.Fatalf("batch access: %+v", a)
	}
}
