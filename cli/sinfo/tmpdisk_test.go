package sinfo

import (
	"encoding/json"
	"testing"

	"github.com/tide-hpc/tide/cli/slurmfmt/slurmfmttest"
)

// TestTmpDisk: %d (TMP_DISK) prints the nodes' TmpDisk, the smallest
// with a "+" when a row's nodes differ, one row per size with -e; --json
// carries each node's temporary_disk.
func TestTmpDisk(t *testing.T) {
	fake := slurmfmttest.Cluster()
	for i, mb := range []int64{2048, 2048, 4096, 4096} {
		fake.NodeRecs[i].TmpDiskMB = mb
		fake.NodeRecs[i].Drain = false // one state: one row without -e
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{name: "grouped", args: []string{"-h", "-p", "gpu", "-o", "%d %N"}, want: "2048+ gpu[01-04]\n"},
		{name: "exact", args: []string{"-h", "-e", "-p", "gpu", "-o", "%d %N"}, want: "2048 gpu[01-02]\n4096 gpu[03-04]\n"},
		{name: "header", args: []string{"-p", "debug", "-o", "%.8d"}, want: "TMP_DISK\n    2048\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, err := exec(t, fake, tt.args...)
			if err != nil || out != tt.want {
				t.Errorf("sinfo %v = %q (%v, %s), want %q", tt.args, out, err, errOut, tt.want)
			}
		})
	}
	out, _, err := exec(t, fake, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Nodes []struct {
			Name string `json:"name"`
			Tmp  int64  `json:"temporary_disk"`
		} `json:"nodes"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || len(doc.Nodes) != 4 || doc.Nodes[0].Tmp != 2048 || doc.Nodes[3].Tmp != 4096 {
		t.Errorf("--json nodes %+v, %v", doc.Nodes, err)
	}
}
