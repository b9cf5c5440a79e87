package opts

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/hostlist"
)

// directiveSeeds are #SBATCH lines of the table tests plus hostile
// values for every option with a parser of its own.
var directiveSeeds = []string{
	"#SBATCH -p dir", "#SBATCH --array=1,3,5-9", "#SBATCH --container-image=tide-test/bb",
	"#SBATCH --container-mounts=/data:/data:ro", "#SBATCH --exclusive", "#SBATCH --export=NONE", "#SBATCH --foo=1",
	"#SBATCH --gres=gpu:a100:1", "#SBATCH --gres=shard:4", "#SBATCH --mem=1G --mem-per-gpu=1G", "#SBATCH --mem=8G",
	"#SBATCH --no-requeue", "#SBATCH --priority=4", "#SBATCH --queue", "#SBATCH --queue=fps", "#SBATCH --requeue",
	"#SBATCH --wrap=true", "#SBATCH -J named --mem=4G", "#SBATCH -J", "#SBATCH -N 1 two", "#SBATCH -N 1", "#SBATCH -t soon",
	"#SBATCH -t 999999999-0", "#SBATCH -t 36500-0:0:1", "#SBATCH --time-min=2 -t 1", "#SBATCH --mem=9223372036854775807K",
	"#SBATCH --mem-per-cpu=9223372036854775807", "#SBATCH --gpu-mem=0", "#SBATCH --gpu-mem=9223372036854775807T",
	"#SBATCH --gpus=2147483648", "#SBATCH --gpus-per-node=h100:2147483647", "#SBATCH --gpus-per-task=1 -n 2",
	"#SBATCH --gres=gpu:2147483647,gpu:2147483647", "#SBATCH --gres=mps:60,mps:60", "#SBATCH --gpu-compute=101%",
	"#SBATCH --signal=B:USR1@65535", "#SBATCH --signal=RR:1", "#SBATCH --signal=64@99999999999999999999",
	"#SBATCH --switches=2@99999999999", "#SBATCH --switches=99999999999999999999",
	"#SBATCH --begin=now+999999999weeks", "#SBATCH --begin=now-999999999weeks", "#SBATCH --begin=9999-12-31T23:59:59",
	"#SBATCH --deadline=0229", "#SBATCH --export=A=\"a,b\",B,ALL", "#SBATCH --export=\"", "#SBATCH --export=1A=x",
	"#SBATCH --array=3-4:9223372036854775806", "#SBATCH --array=0-4000001", "#SBATCH --array=0-9%99999999999999999999",
	"#SBATCH --dependency=afterok:1:2?afterany:3", "#SBATCH --dependency=afterok:0", "#SBATCH -d singleton",
	"#SBATCH -w n[0-99999999999]", "#SBATCH -w n[0-999999,0-999999,0-999999]", "#SBATCH -x gpu[01-04],login",
	"#SBATCH -w ./hosts", "#SBATCH --nodefile=hosts", "#SBATCH --container-mounts=a:/b", "#SBATCH --container-mounts=/a:/",
	"#SBATCH --nodes=1k-2m", "#SBATCH --nodes=2147483647", "#SBATCH --nodes=3-2", "#SBATCH -N 0",
	"#SBATCH --nice=-2147483646", "#SBATCH --nice", "#SBATCH --ntasks=99999999999999999999", "#SBATCH --chdir=''",
	"#SBATCH --constraint=[a|b]&c", "#SBATCH --open-mode=a", "#SBATCH --mail-type=END,FAIL,bogus",
	"#SBATCH \"unterminated", "#SBATCH 'a b' c\\ d # comment", "#SBATCH hetjob", "#SBATCH\t-p\tx", "#SBATCH -p \x00",
	"#SBATCH -p \xff", "#SBATCH --get-user-env=10L", "#SBATCH --cpu-freq=low-high:ondemand", "#SBATCH --distribution=plane=0",
	"#SBATCH --gpu-bind=per_task:", "#SBATCH --licenses=a:0", "#SBATCH --uid= ", "#SBATCH --comm=model",
	"#SBATCH -" + strings.Repeat("H", 1000), "#SBATCH --" + strings.Repeat("x", 1000), "#SBATCH --m", "#SBATCH --",
}

// testInputFor builds an Input for FuzzParse: the script job.sh starts
// with "#!/bin/sh" and then body; args come one per line, env as K=V
// lines. ./hosts is a node file.
func testInputFor(body, args, env string) Input {
	in := testInput(nil, nil, nil, map[string]string{"/home/alice/exp/job.sh": "#!/bin/sh\n" + body + "\nsrun hostname\n"})
	for _, a := range strings.Split(args, "\n") {
		if a != "" {
			in.Args = append(in.Args, a)
		}
	}
	in.Args = append(in.Args, "job.sh")
	vars := map[string]string{}
	for _, kv := range strings.Split(env, "\n") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			vars[k] = v
		}
	}
	in.Getenv = func(k string) string { return vars[k] }
	return in
}

// FuzzParse runs sbatch's whole parse over fuzzed #SBATCH directives,
// command-line words and SBATCH_* variables. Every error must be an
// *Error of class ErrInvalidArgument (ErrNotFound for a missing script
// or node file), and every job it accepts must carry values the
// controller's checks take: limits in range, counts not negative, and
// the --array, --dependency and host lists in forms that parse again.
func FuzzParse(f *testing.F) {
	for _, d := range directiveSeeds {
		f.Add(d, "", "")
	}
	f.Add("", "--mem=1G\n--mem-per-cpu=1G", "")
	f.Add("#SBATCH --mem=1G", "--mem-per-cpu=1G", "SBATCH_MEM_PER_GPU=1G")
	f.Add("", "-t\n0", "SBATCH_TIMELIMIT=99999999999")
	f.Add("", "--wrap=hostname", "")
	f.Add("", "--gres=gpu:2\n--gpus-per-node=h100:1\n--gres=shard:2", "SBATCH_GPUS=a100:1")
	f.Add("", "-HJname\n-w\nn[1-2]", "SBATCH_EXPORT=NONE")
	f.Add("", "--help", "")
	f.Add("", "--begin", "")
	f.Fuzz(func(t *testing.T, body, args, env string) {
		in := testInputFor(body, args, env)
		req, err := Parse(in)
		if err != nil {
			var pe *Error
			if !errors.As(err, &pe) || len(pe.Lines) == 0 {
				t.Fatalf("Parse: error %T %v is not an *Error with lines", err, err)
			}
			if !errors.Is(err, api.ErrInvalidArgument) && !errors.Is(err, api.ErrNotFound) {
				t.Fatalf("Parse: error %v is neither ErrInvalidArgument nor ErrNotFound", err)
			}
			return
		}
		if req.Action != ActionSubmit {
			return
		}
		checkSpec(t, &req.Spec)
	})
}

// checkSpec fails on a JobSpec value sbatch should never send.
func checkSpec(t *testing.T, s *api.JobSpec) {
	t.Helper()
	for _, l := range []struct {
		name string
		secs int64
	}{{"time limit", s.TimeLimit}, {"time-min", s.TimeMin}} {
		if err := api.CheckTimeLimit(l.secs); err != nil {
			t.Fatalf("%s %d: %v", l.name, l.secs, err)
		}
	}
	for _, c := range []struct {
		name string
		n    int64
	}{
		{"nodes", int64(s.Nodes)}, {"max nodes", int64(s.MaxNodes)}, {"tasks", int64(s.Tasks)},
		{"gpus", int64(s.GPUs)}, {"gpus per node", int64(s.GPUsPerNode)}, {"gpus per task", int64(s.GPUsPerTask)},
		{"mem per cpu", s.MemPerCPUMB}, {"mem per gpu", s.MemPerGPUMB}, {"gpu mem", s.GPUMemMB},
		{"gpu shards", int64(s.GPUShards)}, {"switches", int64(s.Switches)}, {"switch wait", s.SwitchWait},
	} {
		if c.n < 0 {
			t.Fatalf("%s %d is negative", c.name, c.n)
		}
	}
	if s.MemPerNodeMB < 0 && s.MemPerNodeMB != MemWholeNode {
		t.Fatalf("mem %d", s.MemPerNodeMB)
	}
	if s.MaxNodes != 0 && s.MaxNodes <= s.Nodes || s.GPUComputePct < 0 || s.GPUComputePct > 100 {
		t.Fatalf("nodes %d-%d, gpu compute %d%%", s.Nodes, s.MaxNodes, s.GPUComputePct)
	}
	if s.Signal != nil && (s.Signal.Signal < 1 || s.Signal.Signal > api.MaxSignal || s.Signal.Seconds < 0 || s.Signal.Seconds > api.MaxSignalSeconds) {
		t.Fatalf("signal %+v", *s.Signal)
	}
	if s.Array != "" {
		if _, err := api.ParseArraySpec(s.Array, 0); err != nil {
			t.Fatalf("array %q does not parse: %v", s.Array, err)
		}
	}
	for _, hs := range [][]string{s.NodeList, s.Exclude} {
		if len(hs) > hostlist.MaxHosts {
			t.Fatalf("%d hosts", len(hs))
		}
		for _, h := range hs {
			if h == "" || strings.ContainsAny(h, "[], \t\n") {
				t.Fatalf("host name %q", h)
			}
		}
	}
	if s.ContainerImage != "" {
		if img, err := api.NormalizeImage(s.ContainerImage); err != nil || img != s.ContainerImage {
			t.Fatalf("container image %q normalises to %q, %v", s.ContainerImage, img, err)
		}
	}
	if s.BeginTime.Year() < 0 || s.BeginTime.Year() > 10000 {
		t.Fatalf("begin time %v", s.BeginTime)
	}
	for _, e := range s.Environment {
		if k, _, ok := strings.Cut(e, "="); !ok || k == "" {
			t.Fatalf("environment entry %q", e)
		}
	}
	if s.GPUs > math.MaxInt32 || s.GPUsPerNode > math.MaxInt32 || s.GPUsPerTask > math.MaxInt32 || s.GPUShards > math.MaxInt32 {
		t.Fatalf("GPU counts %d/%d/%d, shards %d beyond 32 bits", s.GPUs, s.GPUsPerNode, s.GPUsPerTask, s.GPUShards)
	}
}

// FuzzGetopt checks getopt_long's contract over sbatch's table: matches
// in order of the words they came from, valid table indices, values only
// for options that take them, and operands that are the tail of the
// arguments (less a "--" that ended the options).
func FuzzGetopt(f *testing.F) {
	for _, a := range []string{
		"-p\ngpu\njob.sh", "--part=gpu", "--p", "--mem", "-HJname", "-J", "--\n-p", "--exclusive=user", "--exclusive\nx",
		"--no-requeue=1", "--nic=5", "--ni", "-", "--", "-\x00", "--=x", "--mem=\xff", "-k\n-", "--array=1\n--array",
		"--help\n--bogus", "-Q-Q", "--usage=1",
	} {
		f.Add(a)
	}
	g := newTableGetopt()
	n := len(table())
	f.Fuzz(func(t *testing.T, words string) {
		args := strings.Split(words, "\n")
		ms, operands, err := parseArgs(g, args)
		pos := 0
		for _, m := range ms {
			if m.Index < 0 || m.Index >= n || m.Pos < pos || m.Pos >= len(args) {
				t.Fatalf("match %+v of %q", m, args)
			}
			pos = m.Pos
			if table()[m.Index].Arg == NoArg && m.HasValue {
				t.Fatalf("match %+v of %q: a value for an option without one", m, args)
			}
		}
		if err != nil {
			var ge *GetoptError
			if !errors.As(err, &ge) || ge.Pos < 0 || ge.Pos >= len(args) || operands != nil {
				t.Fatalf("error %v (%T), operands %q, for %q", err, err, operands, args)
			}
			return
		}
		if len(operands) > len(args) {
			t.Fatalf("operands %q of %q", operands, args)
		}
		tail := args[len(args)-len(operands):]
		if strings.Join(tail, "\x00") != strings.Join(operands, "\x00") {
			t.Fatalf("operands %q are not the tail of %q", operands, args)
		}
	})
}

// FuzzSplitDirective checks the shell-like splitting of #SBATCH lines:
// words escaped back (a backslash before each special byte, "" for an
// empty word) and joined with spaces split into the same words.
func FuzzSplitDirective(f *testing.F) {
	for _, s := range []string{
		" -p gpu", " 'a b' c\\ d # comment", " \"a'b\" 'c\"d'", " a\\", " \"", " '", " \\#x #y", " a\"\"b", " \"\"",
		" \t\r\v\f", " \x00 \xff", " a#b", " 'a\\'b'",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		words, err := splitDirective(s)
		if err != nil {
			if !errors.Is(err, api.ErrInvalidArgument) {
				t.Fatalf("splitDirective(%q): %v is not ErrInvalidArgument", s, err)
			}
			return
		}
		var b strings.Builder
		for _, w := range words {
			b.WriteByte(' ')
			if w == "" {
				b.WriteString(`""`)
			}
			for i := 0; i < len(w); i++ {
				if isSpace(w[i]) || strings.IndexByte(`"'\#`, w[i]) >= 0 {
					b.WriteByte('\\')
				}
				b.WriteByte(w[i])
			}
		}
		back, err := splitDirective(b.String())
		if err != nil || strings.Join(back, "\x00") != strings.Join(words, "\x00") || len(back) != len(words) {
			t.Fatalf("splitDirective(%q) = %q, escaped as %q splits to %q, %v", s, words, b.String(), back, err)
		}
		// As a line of a script: one line that starts with a space, and
		// does not start a heterogeneous job.
		body := "#!/bin/sh\n#SBATCH" + s + "\n"
		if s != "" && isSpace(s[0]) && !strings.Contains(s, "\n") && checkScript(body) == nil &&
			(len(words) == 0 || words[0] != "hetjob" && words[0] != "packjob") {
			ws, err := directiveWords("job.sh", body)
			if err != nil || len(ws) != len(words) {
				t.Fatalf("directiveWords(%q) = %d words, %v; splitDirective gave %d", body, len(ws), err, len(words))
			}
		}
	})
}
