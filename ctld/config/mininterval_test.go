package config

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestSchedulerMinInterval(t *testing.T) {
	const head = "version: 1\nnodes: [{names: n1}]\npartitions: [{name: a, nodes: n1}]\n"
	tests := []struct {
		name, yaml string
		want       time.Duration
		err        string // a piece of the error, or none
	}{
		{name: "default", want: DefaultMinInterval},
		{name: "set", yaml: "scheduler: {min_interval: 50ms}", want: 50 * time.Millisecond},
		{name: "off", yaml: "scheduler: {min_interval: 0s}", want: 0},
		{name: "the bound", yaml: "scheduler: {min_interval: 1s}", want: time.Second},
		{name: "too long", yaml: "scheduler: {min_interval: 2s}", err: "scheduler.min_interval: 2s is not between 0 (no throttle) and 1s"},
		{name: "negative", yaml: "scheduler: {min_interval: -5ms}", err: "scheduler.min_interval: -5ms"},
		{name: "not a duration", yaml: "scheduler: {min_interval: soon}", err: "min_interval"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse(strings.NewReader(head + tt.yaml + "\n"))
			var cl *Cluster
			if err == nil {
				cl, err = cfg.Validate()
			}
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want one with %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := cl.Scheduler.MinInterval; got != tt.want {
				t.Errorf("min_interval = %s, want %s", got, tt.want)
			}
		})
	}
}

// tidectld config dump prints it as a duration, like scheduler.interval.
func TestSchedulerMinIntervalDump(t *testing.T) {
	c := Default().Scheduler
	c.MinInterval = 35 * time.Millisecond
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"min_interval":"35ms"`) {
		t.Errorf("dump %s lacks \"min_interval\":\"35ms\"", b)
	}
}
