package root

import (
	"bytes"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/cli/clitest"
	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/gres"
)

// completionCluster is the controller the completion tests ask: three
// partitions, H100 and A100 nodes, two queues and the four job classes,
// and jobs of the caller (uid 1000) in several states beside another
// user's.
func completionCluster() *clitest.FakeAPI {
	gpus := func(model string, n int) []gres.Device {
		out := make([]gres.Device, n)
		for i := range out {
			out[i] = gres.Device{Index: i, Model: model}
		}
		return out
	}
	job := func(id uint64, name string, uid uint32, user string, st api.JobState) api.Job {
		return api.Job{ID: id, JobSpec: api.JobSpec{Name: name}, UserID: uid, User: user, State: st}
	}
	arrayTask := job(104, "sweep", 1000, "alice", api.StateRunning)
	arrayTask.ArrayJobID, arrayTask.ArrayTaskID = 103, 1
	arrayMeta := job(103, "sweep", 1000, "alice", api.StatePending)
	arrayMeta.ArrayJobID, arrayMeta.ArrayPending = 103, api.NewTaskSet([]int{2, 3})
	return &clitest.FakeAPI{
		Info: api.ClusterInfo{Name: "tide"},
		Partitions: []api.Partition{
			{Name: "gpu", Nodes: []string{"gpu01", "gpu02"}, Default: true},
			{Name: "cpu", Nodes: []string{"cpu01"}},
			{Name: "debug", Nodes: []string{"gpu02"}},
		},
		NodeRecs: []api.Node{
			{Name: "gpu01", State: "IDLE", GPUs: gpus("nvidia h100 80gb hbm3", 8)},
			{Name: "gpu02", State: "MIXED", GPUs: gpus("nvidia a100-sxm4-80gb", 4)},
			{Name: "cpu01", State: "IDLE"},
		},
		Sharing: clitest.SharingQueues(),
		JobRecs: []api.Job{
			job(101, "train", 1000, "alice", api.StateRunning),
			job(102, "eval", 1000, "alice", api.StatePending),
			arrayMeta,
			arrayTask,
			job(105, "old", 1000, "alice", api.StateCompleted),
			job(201, "other", 1001, "bob", api.StateRunning),
		},
	}
}

// completeLine runs the engine on a command line (up to the cursor) as
// the bash adapter reads it.
func completeLine(t *testing.T, f *cmdutil.Factory, line string) compResult {
	t.Helper()
	words, _ := shellWords(line)
	spec := slurmSpec(filepath.Base(words[0]))
	if spec == nil {
		t.Fatalf("no completion for %q", words[0])
	}
	c, cancel := newCompleter(f)
	defer cancel()
	return spec.complete(c, words[1:len(words)-1], words[len(words)-1])
}

func candWords(r compResult) []string {
	out := []string{}
	for _, c := range r.Cands {
		out = append(out, c.Word)
	}
	return out
}

func TestCompletionEngine(t *testing.T) {
	tests := []struct {
		name, line string
		want       []string // exactly these candidates, in order
		has        []string // or at least these
		not        []string // and none of these
		kind       compKind
		prefix     string
		partial    string
		noSpace    bool
	}{
		{name: "long option prefix", line: "sbatch --gp",
			has: []string{"--gpus=", "--gpus-per-node=", "--gpus-per-task=", "--gpu-bind="}, not: []string{"--gres="}},
		{name: "hidden spellings not offered", line: "sbatch --tas", want: []string{}},
		{name: "flag without argument", line: "sbatch --hol", want: []string{"--hold"}},
		{name: "lone dash lists long options", line: "squeue -", has: []string{"--partitions=", "--me", "--start"}},
		{name: "one option with argument keeps the cursor", line: "sbatch --partit", want: []string{"--partition="}, noSpace: true},
		{name: "partition after =", line: "sbatch --partition=", want: []string{"--partition=gpu", "--partition=cpu", "--partition=debug"}},
		{name: "partition list", line: "sbatch --partition=gpu,", want: []string{"--partition=gpu,cpu", "--partition=gpu,debug"}},
		{name: "partition as next word", line: "sbatch -p d", want: []string{"debug"}},
		{name: "abbreviated long option", line: "sbatch --part=c", want: []string{"--part=cpu"}},
		{name: "attached short argument", line: "sbatch -pg", want: []string{"-pgpu"}},
		{name: "short option cluster ending in one that takes an argument", line: "sbatch -Hp ", want: []string{"gpu", "cpu", "debug"}},
		{name: "complete short option", line: "sbatch -p", want: []string{"-p"}},
		{name: "queue", line: "sbatch --queue=r", want: []string{"--queue=research"}},
		{name: "account is the queue", line: "sbatch -A ", has: []string{"research", "prod", "moba", "fps"}},
		{name: "job classes", line: "sbatch --qos=", has: []string{"--qos=training", "--qos=inference", "--qos=batch", "--qos=debug"}},
		{name: "GPU types", line: "sbatch --gpus=", want: []string{"--gpus=a100:", "--gpus=h100:"}, noSpace: true},
		{name: "GPU count is free", line: "sbatch --gpus-per-node=h100:", want: []string{}},
		{name: "gres kinds", line: "sbatch --gres=", want: []string{"--gres=gpu:", "--gres=shard:", "--gres=mps:"}, noSpace: true},
		{name: "gres GPU types", line: "sbatch --gres=gpu:h", want: []string{"--gres=gpu:h100:"}, noSpace: true},
		{name: "dependency kinds", line: "sbatch -d afterok", want: []string{"afterok:"}, noSpace: true},
		{name: "dependency job ids", line: "sbatch --dependency=afterok:10",
			want: []string{"--dependency=afterok:101", "--dependency=afterok:102", "--dependency=afterok:103",
				"--dependency=afterok:103_1", "--dependency=afterok:105"}},
		{name: "words from the argument's name", line: "sbatch --comm=", want: []string{"--comm=model", "--comm=data"}},
		{name: "words from the table", line: "sbatch --gres-flags=d", want: []string{"--gres-flags=disable-binding"}},
		{name: "mail types list", line: "sbatch --mail-type=BEGIN,E", want: []string{"--mail-type=BEGIN,END"}},
		{name: "output file", line: "sbatch --output=lo", want: []string{}, kind: compFiles, prefix: "--output=", partial: "lo"},
		{name: "output file attached", line: "sbatch -olo", want: []string{}, kind: compFiles, prefix: "-o", partial: "lo"},
		{name: "working directory", line: "sbatch -D ", want: []string{}, kind: compDirs},
		{name: "script", line: "sbatch --hold ", want: []string{}, kind: compFiles},
		{name: "script arguments are the script's", line: "sbatch job.sh --gp", want: []string{}, kind: compFiles, partial: "--gp"},
		{name: "after --", line: "scancel -- --si", want: []string{}},
		{name: "mistyped option skipped", line: "squeue --bogus -p c", want: []string{"cpu"}},
		{name: "srun command", line: "srun -N2 hostn", want: []string{}, kind: compCommands, partial: "hostn"},
		{name: "srun command's arguments", line: "srun hostname -", want: []string{}, kind: compFiles, partial: "-"},
		{name: "salloc has salloc's options", line: "salloc --wait-all", want: []string{"--wait-all-nodes="}, noSpace: true},
		{name: "srun's own options", line: "srun --lab", want: []string{"--label"}},
		{name: "scancel own active jobs", line: "scancel ", want: []string{"101", "102", "103", "103_1"}},
		{name: "scancel leaves out ids given", line: "scancel 101 ", want: []string{"102", "103", "103_1"}},
		{name: "scancel options after operands", line: "scancel 101 --sig", want: []string{"--signal="}, noSpace: true},
		{name: "scancel signal", line: "scancel --signal=US", want: []string{"--signal=USR1", "--signal=USR2"}},
		{name: "scancel user", line: "scancel -u ", want: []string{"alice", "bob"}},
		{name: "squeue job states", line: "squeue -t PENDING,R", want: []string{"PENDING,RUNNING"}},
		{name: "squeue optional argument", line: "squeue --jobs=10", want: []string{"--jobs=101", "--jobs=102", "--jobs=103", "--jobs=103_1", "--jobs=105"}},
		{name: "squeue node list", line: "squeue -w gpu01,", want: []string{"gpu01,gpu02", "gpu01,cpu01"}},
		{name: "squeue cluster", line: "squeue -M ", want: []string{"tide", "all"}},
		{name: "sinfo node states", line: "sinfo -t dr", want: []string{"drained", "draining", "drain"}},
		{name: "sinfo nodes", line: "sinfo -n gpu", want: []string{"gpu01", "gpu02"}},
		{name: "sacct partition is -r", line: "sacct -r ", want: []string{"gpu", "cpu", "debug"}},
		{name: "sstat running jobs", line: "sstat -j ", want: []string{"101", "103", "103_1"}},
		{name: "sprio pending jobs", line: "sprio ", want: []string{"102", "103"}},
		{name: "scontrol commands", line: "scontrol re", want: []string{"release", "requeue", "reconfigure"}},
		{name: "scontrol show", line: "scontrol show ", has: []string{"job", "node", "partition"}},
		{name: "scontrol show job", line: "scontrol -d show job ", want: []string{"101", "102", "103", "103_1", "105"}},
		{name: "scontrol show node", line: "scontrol show node g", want: []string{"gpu01", "gpu02"}},
		{name: "scontrol show partition", line: "scontrol show part d", want: []string{"debug"}},
		{name: "scontrol hold", line: "scontrol hold ", want: []string{"102", "103"}},
		{name: "scontrol update keys", line: "scontrol update ", want: []string{"JobId=", "NodeName="}, noSpace: true},
		{name: "scontrol update job ids", line: "scontrol update JobId=10", has: []string{"JobId=101", "JobId=102"}},
		{name: "scontrol update job fields", line: "scontrol update JobId=101 Par", want: []string{"Partition="}, noSpace: true},
		{name: "scontrol update partition", line: "scontrol update JobId=101 Partition=c", want: []string{"Partition=cpu"}},
		{name: "scontrol update node state", line: "scontrol update NodeName=gpu01 State=D", want: []string{"State=DRAIN", "State=DOWN"}},
		{name: "scontrol update node fields", line: "scontrol update NodeName=gpu01 ", want: []string{"State=", "Reason="}, noSpace: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, _ := clitest.Factory(completionCluster(), nil)
			r := completeLine(t, f, tt.line)
			got := candWords(r)
			if tt.want != nil {
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("%q: candidates (-want +got):\n%s", tt.line, diff)
				}
			}
			for _, w := range tt.has {
				if !slices.Contains(got, w) {
					t.Errorf("%q: %q not among %q", tt.line, w, got)
				}
			}
			for _, w := range tt.not {
				if slices.Contains(got, w) {
					t.Errorf("%q: %q among %q", tt.line, w, got)
				}
			}
			if r.Kind != tt.kind || r.Prefix != tt.prefix || r.Partial != tt.partial {
				t.Errorf("%q: kind %d prefix %q partial %q, want %d %q %q", tt.line, r.Kind, r.Prefix, r.Partial, tt.kind, tt.prefix, tt.partial)
			}
			if noSpace(r) != tt.noSpace {
				t.Errorf("%q: no space %v, want %v", tt.line, noSpace(r), tt.noSpace)
			}
		})
	}
}

// TestCompletionWithoutController: options still complete, values the
// controller would give are simply absent.
func TestCompletionWithoutController(t *testing.T) {
	fake := completionCluster()
	fake.Err = errors.New("dial unix /run/tide/tidectld.sock: connect: no such file or directory")
	f, _ := clitest.Factory(fake, nil)
	if got := candWords(completeLine(t, f, "sbatch --gpus-per-n")); !slices.Equal(got, []string{"--gpus-per-node="}) {
		t.Errorf("options: %q", got)
	}
	for _, line := range []string{"scancel ", "sbatch -p ", "sbatch --gpus=", "scontrol show node "} {
		if got := candWords(completeLine(t, f, line)); len(got) != 0 {
			t.Errorf("%q: %q without a controller", line, got)
		}
	}
	// Words that need no controller are still there.
	if got := candWords(completeLine(t, f, "squeue -t PEN")); !slices.Equal(got, []string{"PENDING"}) {
		t.Errorf("states: %q", got)
	}
}

func TestShellWords(t *testing.T) {
	tests := []struct {
		line     string
		words    []string
		lastRaw  string
		wantLast string
	}{
		{line: "sbatch --gp", words: []string{"sbatch", "--gp"}, lastRaw: "--gp"},
		{line: "sbatch ", words: []string{"sbatch", ""}, lastRaw: ""},
		{line: `sbatch --wrap="echo  hi" -p g`, words: []string{"sbatch", "--wrap=echo  hi", "-p", "g"}, lastRaw: "g"},
		{line: `sbatch -J 'a b' --comm=`, words: []string{"sbatch", "-J", "a b", "--comm="}, lastRaw: "--comm="},
		{line: `sbatch -J a\ b`, words: []string{"sbatch", "-J", "a b"}, lastRaw: `a\ b`},
		{line: `sbatch -o "out`, words: []string{"sbatch", "-o", "out"}, lastRaw: `"out`},
	}
	for _, tt := range tests {
		words, last := shellWords(tt.line)
		if !slices.Equal(words, tt.words) || last != tt.lastRaw {
			t.Errorf("shellWords(%q) = %q, %q; want %q, %q", tt.line, words, last, tt.words, tt.lastRaw)
		}
	}
}

// TestBashCompletionProtocol checks what __complete-bash prints: the
// candidates cut where bash's word breaks cut the word.
func TestBashCompletionProtocol(t *testing.T) {
	const breaks = " \t\n\"'><=;|&(:"
	tests := []struct {
		line string
		want string
	}{
		{line: "sbatch --partition=g", want: "words 0 0\n\n\ngpu\n"},
		{line: "sbatch --gres=gpu:h", want: "words 1 0\n\n\nh100:\n"},
		{line: "sbatch --gpus-per-n", want: "words 1 0\n\n\n--gpus-per-node=\n"},
		{line: "sbatch --output=lo", want: "files 0 0\n\nlo\n"},
		{line: "sbatch -olo", want: "files 0 0\n-o\nlo\n"},
		{line: "sbatch --output=a:b", want: "files 0 2\n\na:b\n"},
		{line: "srun ho", want: "commands 0 0\n\nho\n"},
		{line: "scancel 10", want: "words 0 0\n\n\n101\n102\n103\n103_1\n"},
		{line: "scontrol update NodeName=gpu01 State=D", want: "words 0 0\n\n\nDRAIN\nDOWN\n"},
		{line: `sbatch --wrap="x" -p d`, want: "words 0 0\n\n\ndebug\n"},
		{line: `sbatch -J "a:b`, want: ""},
		{line: "sbatch", want: ""},
		{line: "ls -l", want: ""},
	}
	for _, tt := range tests {
		f, _ := clitest.Factory(completionCluster(), nil)
		var b bytes.Buffer
		writeBashCompletion(&b, f, breaks, tt.line)
		if b.String() != tt.want {
			t.Errorf("%q:\n got %q\nwant %q", tt.line, b.String(), tt.want)
		}
	}
}

// TestCobraCompletion: "tide __complete sbatch ..." (zsh's links, and
// "tide batch ..." in every shell) answers from the same engine, in
// cobra's format.
func TestCobraCompletion(t *testing.T) {
	tests := []struct {
		args []string
		want []string // lines of stdout
	}{
		{args: []string{"sbatch", "--gpus-per-n"}, want: []string{"--gpus-per-node=\tnumber of GPUs required per allocated node ([type:]n)", ":6"}},
		{args: []string{"batch", "--partition=g"}, want: []string{"gpu\t2 nodes, default", ":4"}},
		{args: []string{"cancel", ""}, want: []string{"101\ttrain RUNNING", "102\teval PENDING", "103\tsweep (array)", "103_1\tsweep RUNNING", ":4"}},
		{args: []string{"sbatch", "-o", "x"}, want: []string{":0"}},
		{args: []string{"events", "10"}, want: []string{"101\ttrain RUNNING", "102\teval PENDING", "103\tsweep (array)", "103_1\tsweep RUNNING", "105\told COMPLETED", ":4"}},
		{args: []string{"queues", "--l"}, want: []string{"--long\talso show limits: lend and borrow limits, per-user limits, submit rate, members", ":4"}},
		{args: []string{"queues", "p"}, want: []string{"prod\tqueue", ":4"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			f, bufs := clitest.Factory(completionCluster(), nil)
			code := Main(append([]string{"tide", "__complete"}, tt.args...), f)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, bufs.Err.String())
			}
			got := strings.Split(strings.TrimSuffix(bufs.Out.String(), "\n"), "\n")
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestCompletionScripts checks that the bash and zsh scripts cover the
// links, and that the zsh script's surgery on cobra's found its marks.
func TestCompletionScripts(t *testing.T) {
	names := strings.Join(SlurmNames(), " ")
	for _, tt := range []struct {
		shell string
		has   []string
	}{
		{shell: "bash", has: []string{"bash completion V2 for tide", "__start_tide", "_tide_complete_slurm()",
			"complete -F _tide_complete_slurm " + names + "\n"}},
		{shell: "zsh", has: []string{"#compdef tide " + names + "\n", "_tide()", "_tide_slurm()",
			"compdef _tide_slurm " + names + "\n", "(" + strings.ReplaceAll(names, " ", "|") + ") _tide_slurm ;;"}},
	} {
		f, bufs := clitest.Factory(completionCluster(), nil)
		if code := Main([]string{"tide", "completion", tt.shell}, f); code != 0 {
			t.Fatalf("%s: exit %d: %s", tt.shell, code, bufs.Err.String())
		}
		out := bufs.Out.String()
		for _, h := range tt.has {
			if !strings.Contains(out, h) {
				t.Errorf("%s script lacks %q", tt.shell, h)
			}
		}
		if tt.shell == "zsh" && strings.Count(out, `if [ "$funcstack[1]" = "_tide" ]`) != 1 {
			t.Errorf("zsh script runs _tide from more than one place")
		}
	}
}
