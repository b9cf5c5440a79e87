package cmdutil

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/tide-hpc/tide/ctld/api"
)

// TestPrintError checks that error messages, which echo values from
// other users through the controller, are printed on one escaped line.
func TestPrintError(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{name: "nil prints nothing", err: nil, want: ""},
		{name: "silent prints nothing", err: &SilentError{Code: 3}, want: ""},
		{name: "plain", err: errors.New("slurm_load_jobs error: Invalid job id specified"),
			want: "squeue: error: slurm_load_jobs error: Invalid job id specified\n"},
		{name: "controller message echoing a hostile value",
			err:  fmt.Errorf("slurm_update error: %w", api.Errorf(api.ErrInvalidArgument, "Invalid account %s", "ml\x1b[8m\nsqueue: error: forged")),
			want: `squeue: error: slurm_update error: Invalid account ml\x1b[8m\nsqueue: error: forged` + "\n"},
		{name: "C1 bidi and invalid bytes", err: errors.New("job \u009b2J\u202etxt.exe\xff"),
			want: `squeue: error: job \u009b2J\u202etxt.exe\xff` + "\n"},
		{name: "printable unicode kept", err: errors.New("no job named 训练任务"),
			want: "squeue: error: no job named 训练任务\n"},
		{name: "usage hint on its own line", err: &UsageError{Msg: "unknown flag: --\x1b[2J", Hint: `Try "squeue --help" for more information`},
			want: "squeue: error: unknown flag: --\\x1b[2J\nTry \"squeue --help\" for more information\n"},
		{name: "wrapped usage error keeps its hint", err: fmt.Errorf("parse: %w", &UsageError{Msg: "bad", Hint: "hint"}),
			want: "squeue: error: parse: bad\nhint\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			PrintError(&b, "squeue", tt.err)
			if got := b.String(); got != tt.want {
				t.Errorf("PrintError(%v) = %q, want %q", tt.err, got, tt.want)
			}
		})
	}
}

func TestFailfErrorfWarnf(t *testing.T) {
	var b bytes.Buffer
	err := Failf(&b, "sacct", "job %s: %s", "x\ny", "gone")
	Errorf(&b, "scancel", "Kill job error on job id %d: %s", 5, "name\x1b]0;t\a")
	Warnf(&b, "checkpoint-done", "cannot touch %s", "/tmp/a\rb")
	want := "sacct: error: job x\\ny: gone\n" +
		"scancel: error: Kill job error on job id 5: name\\x1b]0;t\\x07\n" +
		"checkpoint-done: warning: cannot touch /tmp/a\\rb\n"
	if b.String() != want {
		t.Errorf("got\n%q\nwant\n%q", b.String(), want)
	}
	if ExitCode(err) != ExitError {
		t.Errorf("Failf exit code = %d, want %d", ExitCode(err), ExitError)
	}
	var s *SilentError
	if !errors.As(err, &s) {
		t.Errorf("Failf returned %T, want *SilentError", err)
	}
}

// TestWriteJSON checks that WriteJSON prints what json.Encoder with a
// two-space indent prints, except that C1, DEL and bidi controls are \u
// escapes, and that the values read back exactly.
func TestWriteJSON(t *testing.T) {
	v := map[string]string{"name": "x\x1b[2J\u009b\u202e\x7f训练", "plain": "a<b>&c"}
	var got, want bytes.Buffer
	if err := WriteJSON(&got, v); err != nil {
		t.Fatal(err)
	}
	enc := json.NewEncoder(&want)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	wantText := strings.NewReplacer("\u009b", `\u009b`, "\u202e", `\u202e`, "\x7f", `\u007f`).Replace(want.String())
	if got.String() != wantText {
		t.Errorf("WriteJSON =\n%s\nwant\n%s", got.String(), wantText)
	}
	var back map[string]string
	if err := json.Unmarshal(got.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if back["name"] != v["name"] || back["plain"] != v["plain"] {
		t.Errorf("read back %q, want %q", back, v)
	}
}
