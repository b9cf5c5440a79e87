package sacct

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func orderedKeys(t *testing.T, raw []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not an object: %s", raw)
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

// The key order of Slurm 22.05's dbv0.0.38 job and step: the order in
// which its parser (src/plugins/openapi/dbv0.0.38/parse.c, parse_job and
// parse_job_step) first writes each top-level key.
var (
	slurmJobKeys = []string{"account", "comment", "allocation_nodes", "array", "association", "cluster",
		"constraints", "container", "derived_exit_code", "time", "exit_code", "flags", "group", "het",
		"job_id", "name", "mcs", "nodes", "partition", "priority", "qos", "required", "kill_request_user",
		"reservation", "state", "steps", "tres", "user", "wckey", "working_directory"}
	slurmStepKeys = []string{"time", "exit_code", "nodes", "tasks", "pid", "CPU", "kill_request_user",
		"state", "statistics", "step", "task", "tres"}
)

// TestJSONLayout checks sacct --json against Slurm 22.05's layout.
func TestJSONLayout(t *testing.T) {
	r := run(t, 1000, nil, "--json", "-j", "101,91,103")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.errOut)
	}
	if diff := cmp.Diff([]string{"meta", "errors", "warnings", "jobs"}, orderedKeys(t, []byte(r.out))); diff != "" {
		t.Errorf("top-level keys (-want +got):\n%s", diff)
	}
	var doc struct {
		Meta struct {
			Plugin struct{ Type, Name string }
		}
		Jobs []struct {
			Steps []json.RawMessage
		}
	}
	if err := json.Unmarshal([]byte(r.out), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Meta.Plugin.Type != "openapi/dbv0.0.38" || doc.Meta.Plugin.Name != "Slurm OpenAPI DB v0.0.38" {
		t.Errorf("meta.plugin = %+v", doc.Meta.Plugin)
	}
	var raw struct{ Jobs []json.RawMessage }
	_ = json.Unmarshal([]byte(r.out), &raw)
	if len(raw.Jobs) != 3 {
		t.Fatalf("%d jobs, want 3", len(raw.Jobs))
	}
	steps := 0
	for i, j := range raw.Jobs {
		if diff := cmp.Diff(slurmJobKeys, orderedKeys(t, j)); diff != "" {
			t.Errorf("job keys (-slurm +tide):\n%s", diff)
		}
		for _, s := range doc.Jobs[i].Steps {
			steps++
			if diff := cmp.Diff(slurmStepKeys, orderedKeys(t, s)); diff != "" {
				t.Errorf("step keys (-slurm +tide):\n%s", diff)
			}
		}
	}
	if steps == 0 {
		t.Error("no steps to check")
	}
}
