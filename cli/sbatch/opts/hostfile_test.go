package opts

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestParseHostfile(t *testing.T) {
	tests := []struct {
		name, text string
		n          int
		want       []string
		wantErr    string
	}{
		{name: "one per line", text: "gpu03\ngpu01\ngpu02\n", want: []string{"gpu03", "gpu01", "gpu02"}},
		{name: "commas, expressions, comments, repeats", text: "# ranks\ngpu[01-02],gpu01 # two on gpu01\n\ngpu04\n",
			want: []string{"gpu01", "gpu02", "gpu01", "gpu04"}},
		{name: "-n takes the first entries", text: "a\nb\nc\n", n: 2, want: []string{"a", "b"}},
		{name: "too few for -n", text: "a\nb\n", n: 3, wantErr: "Too few NodeNames in SLURM Hostfile: 2 for 3 tasks"},
		{name: "empty", text: "# nothing\n", wantErr: "no host names"},
		{name: "bad expression", text: "gpu[01-\n", wantErr: "invalid host entry"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseHostfile(tt.text, tt.n)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || !slices.Equal(got, tt.want) {
				t.Fatalf("got %v, %v; want %v", got, err, tt.want)
			}
		})
	}
	if _, err := ParseHostfile(strings.Repeat("h\n", maxHostfileTasks+1), 0); err == nil {
		t.Error("an endless host file was read")
	}
}

// TestArbitraryDistribution: -m arbitrary with SLURM_HOSTFILE asks for
// the file's nodes and a task per entry; without the variable it is
// block, and other distributions stay warned about at submission.
func TestArbitraryDistribution(t *testing.T) {
	files := map[string]string{"/home/alice/exp/hf": "gpu03\ngpu01\ngpu03\n"}
	req, err := Parse(testInput([]string{"-m", "arbitrary", "--wrap", "true"}, nil, map[string]string{"SLURM_HOSTFILE": "hf"}, files))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(req.TaskHosts, []string{"gpu03", "gpu01", "gpu03"}) || !slices.Equal(req.Spec.NodeList, []string{"gpu03", "gpu01"}) ||
		req.Spec.Nodes != 2 || req.Spec.Tasks != 3 || len(req.Warnings) != 0 {
		t.Fatalf("hosts %v nodelist %v -N%d -n%d warnings %v", req.TaskHosts, req.Spec.NodeList, req.Spec.Nodes, req.Spec.Tasks, req.Warnings)
	}
	req, err = Parse(testInput([]string{"-m", "arbitrary", "--wrap", "true"}, nil, nil, nil))
	if err != nil || req.TaskHosts != nil || req.Spec.NodeList != nil {
		t.Fatalf("without SLURM_HOSTFILE: %+v, %v", req, err)
	}
	_, err = Parse(testInput([]string{"-m", "arbitrary", "--wrap", "true"}, nil, map[string]string{"SLURM_HOSTFILE": "missing"}, nil))
	var pe *Error
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "Unable to read SLURM_HOSTFILE missing") {
		t.Fatalf("missing host file: %v", err)
	}
	req, err = Parse(testInput([]string{"-m", "cyclic", "--wrap", "true"}, nil, nil, nil))
	if err != nil || len(req.Warnings) != 1 || !strings.Contains(req.Warnings[0], "--distribution has no effect yet") {
		t.Fatalf("cyclic: %v, %v", req.Warnings, err)
	}
}
