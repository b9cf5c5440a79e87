package squeue

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/cli/slurmfmt/slurmfmttest"
)

// orderedKeys returns the keys of a JSON object in the order written.
func orderedKeys(t *testing.T, raw json.RawMessage) []string {
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

// TestJSONLayoutMatchesSlurm checks squeue --json against what Slurm
// 22.05 printed (testdata/slurm/squeue.json): the same meta, and every
// job with the same keys in the same order, running or pending; Tide
// adds only the top-level "warnings" of later releases.
func TestJSONLayoutMatchesSlurm(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "slurm", "squeue.json"))
	if err != nil {
		t.Fatal(err)
	}
	var slurm struct {
		Meta json.RawMessage
		Jobs []json.RawMessage
	}
	if err := json.Unmarshal(raw, &slurm); err != nil {
		t.Fatal(err)
	}
	out, _, err := exec(t, slurmfmttest.Reference(false), nil, "--json")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"meta", "errors", "warnings", "jobs"}, orderedKeys(t, json.RawMessage(out))); diff != "" {
		t.Errorf("top-level keys (-want +got):\n%s", diff)
	}
	var tide struct {
		Meta json.RawMessage
		Jobs []json.RawMessage
	}
	if err := json.Unmarshal([]byte(out), &tide); err != nil {
		t.Fatal(err)
	}
	var sm, tm any
	_ = json.Unmarshal(slurm.Meta, &sm)
	_ = json.Unmarshal(tide.Meta, &tm)
	if diff := cmp.Diff(sm, tm); diff != "" {
		t.Errorf("meta (-slurm +tide):\n%s", diff)
	}
	// Slurm prints job_resources only for allocated jobs.
	withRes, without := orderedKeys(t, slurm.Jobs[0]), []string(nil)
	for _, k := range withRes {
		if k != "job_resources" {
			without = append(without, k)
		}
	}
	for _, j := range tide.Jobs {
		got := orderedKeys(t, j)
		want := without
		for _, k := range got {
			if k == "job_resources" {
				want = withRes
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("job keys (-slurm +tide):\n%s", diff)
		}
	}
}
