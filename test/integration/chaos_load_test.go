package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The chaos test's load: a few workers that act like a busy cluster's
// users, each through the real CLI binaries (so sbatch's retries while
// the controller is down are exercised), recording every submission and
// what became of it for the checks at the end.

// chaosUser is one submitting user; cred is nil for the test's own uid.
type chaosUser struct {
	name string
	uid  uint32
	cred *syscall.Credential
}

// chaosUsers are root, nobody and daemon when the test runs as root
// (Debian has all three), else the test's own user only.
func chaosUsers() []*chaosUser {
	if os.Getuid() != 0 {
		return []*chaosUser{{name: "self", uid: uint32(os.Getuid())}}
	}
	return []*chaosUser{
		{name: "root", uid: 0},
		{name: "nobody", uid: 65534, cred: &syscall.Credential{Uid: 65534, Gid: 65534}},
		{name: "daemon", uid: 1, cred: &syscall.Credential{Uid: 1, Gid: 1}},
	}
}

// Kinds of submissions. Every kind but chaosFail exits 0 when it runs
// to its end.
const (
	chaosShort  = "short"  // sleeps under two seconds
	chaosLong   = "long"   // sleeps 8 to 25 seconds
	chaosFail   = "fail"   // exits 3
	chaosSrun   = "srun"   // srun steps inside the batch job
	chaosSrun2  = "srun2"  // srun steps over two nodes
	chaosArray  = "array"  // --array with a throttle
	chaosHeld   = "held"   // submitted held (-H), released later by the load
	chaosDep    = "dep"    // afterok on an earlier job of the same user
	chaosOrphan = "orphan" // leaves a background child when it exits
)

// chaosSub is one sbatch the load ran.
type chaosSub struct {
	seq  int
	name string // -J, unique: maps records back to submissions
	kind string
	user *chaosUser
	args []string
	// tasks is the array's task count (0 for other kinds).
	tasks int
	at    time.Time
	took  time.Duration
	// id is what sbatch printed (0 when it failed); failure says how it
	// failed.
	id      uint64
	failure string
	// retried: sbatch said it was retrying (the controller was down).
	retried bool
	// cancelled, requeued, held: the load's later actions on the job
	// that the CLI reported as done.
	cancelled, requeued, held bool
}

// chaosResult is one CLI run.
type chaosResult struct {
	out, err string
	code     int
	timedOut bool
	took     time.Duration
}

// chaosCLITimeout bounds a CLI command other than sbatch; chaosSbatchTimeout
// bounds sbatch, which retries for up to TIDE_SUBMIT_RETRY (60 s by
// default) while the controller is unreachable.
const (
	chaosCLITimeout    = 60 * time.Second
	chaosSbatchTimeout = 180 * time.Second
)

// cli runs a CLI command as u in the work dir, with the run's marker in
// its environment (jobs inherit it: the process scan finds them by it).
func (r *chaosRun) cli(u *chaosUser, timeout time.Duration, args ...string) chaosResult {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var cred *syscall.Credential
	if u != nil {
		cred = u.cred
	}
	cmd := r.c.commandContext(ctx, cred, args...)
	cmd.Dir = r.work
	cmd.Env = r.env
	cmd.WaitDelay = 5 * time.Second
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	t0 := time.Now()
	err := cmd.Run()
	res := chaosResult{out: out.String(), err: errb.String(), took: time.Since(t0), timedOut: ctx.Err() != nil}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		res.code = ee.ExitCode()
	case err != nil:
		res.code = -1
		res.err += err.Error()
	}
	return res
}

// count adds one to a load counter ("scancel ok", "sbatch retried").
func (r *chaosRun) count(key string) {
	r.mu.Lock()
	r.counts[key]++
	r.mu.Unlock()
}

// runLoad runs workers until ctx ends, then waits for the commands they
// have started: a submission in flight must finish to be judged.
func (r *chaosRun) runLoad(ctx context.Context, workers int) *sync.WaitGroup {
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(r.cfg.seed, uint64(w)+1))
			for ctx.Err() == nil {
				r.act(rng)
				select {
				case <-ctx.Done():
				case <-time.After(time.Duration(150+rng.IntN(600)) * time.Millisecond):
				}
			}
		}()
	}
	return &wg
}

// act does one random thing a user would do.
func (r *chaosRun) act(rng *rand.Rand) {
	r.mu.Lock()
	full := r.backlog > chaosMaxBacklog
	r.mu.Unlock()
	switch p := rng.IntN(100); {
	case p < 55 && full:
		r.count("submit paused")
		r.query(rng)
	case p < 55:
		r.submit(rng, pickKind(rng))
	case p < 63:
		r.cancel(rng)
	case p < 70:
		r.requeue(rng)
	case p < 76:
		r.hold(rng)
	case p < 84:
		r.release(rng)
	default:
		r.query(rng)
	}
}

// pickKind weighs the submission kinds.
func pickKind(rng *rand.Rand) string {
	kinds := []struct {
		kind   string
		weight int
	}{
		{chaosShort, 26}, {chaosLong, 10}, {chaosFail, 10}, {chaosSrun, 14}, {chaosSrun2, 5},
		{chaosArray, 10}, {chaosHeld, 10}, {chaosDep, 8}, {chaosOrphan, 7},
	}
	total := 0
	for _, k := range kinds {
		total += k.weight
	}
	n := rng.IntN(total)
	for _, k := range kinds {
		if n < k.weight {
			return k.kind
		}
		n -= k.weight
	}
	return chaosShort
}

// script returns the batch script of a kind and its sbatch options
// (besides -J).
func (r *chaosRun) script(rng *rand.Rand, kind string, u *chaosUser) (string, []string, int) {
	path := "export PATH=" + binDir + ":$PATH\n"
	sleep := func(lo, hi int) string { // milliseconds
		ms := lo + rng.IntN(hi-lo+1)
		return fmt.Sprintf("sleep %d.%03d\n", ms/1000, ms%1000)
	}
	cpus := []string{"1", "2", "4", "8", "16", "32"}[rng.IntN(6)]
	gpus := []string{"0", "0", "1", "1", "2", "4", "8"}[rng.IntN(7)]
	args := []string{"-t", "3", "-c", cpus, "--gpus=" + gpus}
	if rng.IntN(3) == 0 {
		args = append(args, fmt.Sprintf("--mem=%dG", 1<<rng.IntN(7)))
	}
	tasks := 0
	var body string
	switch kind {
	case chaosShort, chaosHeld:
		body = sleep(100, 1900)
		if kind == chaosHeld {
			args = append(args, "-H")
		}
	case chaosLong:
		body = sleep(8000, 25000)
	case chaosFail:
		body = sleep(200, 2000) + "echo failing on purpose >&2\nexit 3\n"
	case chaosSrun:
		body = path + "srun hostname\nsrun -n 2 sh -c 'echo step $SLURM_PROCID of $SLURM_NTASKS on $SLURMD_NODENAME'\n" + "srun " + sleep(200, 3000)
		args = append(args, "-n", "2")
	case chaosSrun2:
		body = path + "srun -l hostname\nsrun -l " + sleep(200, 2000)
		args = []string{"-t", "3", "-N", "2", "--ntasks-per-node=1", "-c", cpus}
		if g := rng.IntN(3); g > 0 {
			args = append(args, fmt.Sprintf("--gpus-per-node=%d", g))
		}
	case chaosArray:
		tasks = 2 + rng.IntN(6)
		args = append(args, fmt.Sprintf("--array=0-%d%%%d", tasks-1, 1+rng.IntN(3)))
		body = sleep(100, 3000)
	case chaosDep:
		if dep := r.recentOf(rng, u); dep != 0 {
			args = append(args, fmt.Sprintf("--dependency=afterok:%d", dep))
		}
		body = sleep(100, 1500)
	case chaosOrphan:
		// The background sleep outlives the script unless the node kills
		// what the job leaves behind.
		body = "sleep 300 &\n" + sleep(100, 1500)
	}
	return "#!/bin/sh\n" + body + "exit 0\n", args, tasks
}

// recentOf returns one of u's latest acknowledged jobs, 0 if none.
func (r *chaosRun) recentOf(rng *rand.Rand, u *chaosUser) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ids []uint64
	for i := len(r.subs) - 1; i >= 0 && len(ids) < 5; i-- {
		if s := r.subs[i]; s.user == u && s.id != 0 && s.kind != chaosArray {
			ids = append(ids, s.id)
		}
	}
	if len(ids) == 0 {
		return 0
	}
	return ids[rng.IntN(len(ids))]
}

// submit runs one sbatch of kind as a random user and records it.
func (r *chaosRun) submit(rng *rand.Rand, kind string) {
	u := r.users[rng.IntN(len(r.users))]
	script, args, tasks := r.script(rng, kind, u)
	r.mu.Lock()
	r.seq++
	s := &chaosSub{seq: r.seq, kind: kind, user: u, tasks: tasks, at: time.Now()}
	s.name = fmt.Sprintf("chaos-%d-%s", s.seq, kind)
	r.subs = append(r.subs, s)
	r.mu.Unlock()

	file := filepath.Join(r.work, s.name+".sh")
	if err := os.WriteFile(file, []byte(script), 0o755); err != nil {
		r.fail(s, "write script: "+err.Error())
		return
	}
	s.args = append([]string{"sbatch", "--parsable", "-J", s.name}, args...)
	res := r.cli(u, chaosSbatchTimeout, append(s.args, file)...)
	r.mu.Lock()
	defer r.mu.Unlock()
	s.took = res.took
	s.retried = strings.Contains(res.err, "retrying")
	if s.retried {
		r.counts["sbatch retried"]++
	}
	id, err := strconv.ParseUint(strings.TrimSpace(strings.SplitN(res.out, ";", 2)[0]), 10, 64)
	switch {
	case res.timedOut:
		s.failure = fmt.Sprintf("sbatch still running after %s (killed): %s", chaosSbatchTimeout, oneLine(res.err))
	case res.code != 0:
		s.failure = fmt.Sprintf("sbatch exited %d after %s: %s", res.code, res.took.Round(time.Millisecond), oneLine(res.err))
	case err != nil || id == 0:
		s.failure = fmt.Sprintf("sbatch exited 0 but printed %q (stderr %q)", res.out, oneLine(res.err))
	default:
		s.id = id
		r.byID[id] = s
		r.counts["sbatch ok"]++
		return
	}
	r.counts["sbatch failed"]++
}

func (r *chaosRun) fail(s *chaosSub, why string) {
	r.mu.Lock()
	s.failure = why
	r.counts["sbatch failed"]++
	r.mu.Unlock()
}

// pick returns a random acknowledged submission among the latest 40
// matching ok, nil if none.
func (r *chaosRun) pick(rng *rand.Rand, ok func(*chaosSub) bool) *chaosSub {
	r.mu.Lock()
	defer r.mu.Unlock()
	var cand []*chaosSub
	for i := len(r.subs) - 1; i >= 0 && len(cand) < 40; i-- {
		if s := r.subs[i]; s.id != 0 && ok(s) {
			cand = append(cand, s)
		}
	}
	if len(cand) == 0 {
		return nil
	}
	return cand[rng.IntN(len(cand))]
}

// actor is who acts on s: its owner mostly, root (an operator) now and
// then.
func (r *chaosRun) actor(rng *rand.Rand, s *chaosSub) *chaosUser {
	if rng.IntN(4) == 0 {
		return r.users[0]
	}
	return s.user
}

// jobAction runs a CLI command on a picked job and counts the outcome;
// done is called, under mu, when it succeeded.
func (r *chaosRun) jobAction(rng *rand.Rand, name string, ok func(*chaosSub) bool, args func(*chaosSub) []string, done func(*chaosSub)) {
	s := r.pick(rng, ok)
	if s == nil {
		return
	}
	res := r.cli(r.actor(rng, s), chaosCLITimeout, args(s)...)
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case res.timedOut:
		r.counts[name+" hung"]++
		r.violate("cli", s.id, fmt.Sprintf("%s did not finish within %s: %s", strings.Join(args(s), " "), chaosCLITimeout, oneLine(res.err)))
	case res.code == 0:
		r.counts[name+" ok"]++
		done(s)
	default:
		r.counts[name+" refused"]++
	}
}

func (r *chaosRun) cancel(rng *rand.Rand) {
	r.jobAction(rng, "scancel", func(*chaosSub) bool { return true },
		func(s *chaosSub) []string { return []string{"scancel", strconv.FormatUint(s.id, 10)} },
		func(s *chaosSub) { s.cancelled = true })
}

func (r *chaosRun) requeue(rng *rand.Rand) {
	r.jobAction(rng, "requeue", func(s *chaosSub) bool { return s.kind != chaosArray },
		func(s *chaosSub) []string { return []string{"scontrol", "requeue", strconv.FormatUint(s.id, 10)} },
		func(s *chaosSub) { s.requeued = true })
}

func (r *chaosRun) hold(rng *rand.Rand) {
	r.jobAction(rng, "hold", func(*chaosSub) bool { return true },
		func(s *chaosSub) []string { return []string{"scontrol", "hold", strconv.FormatUint(s.id, 10)} },
		func(s *chaosSub) { s.held = true })
}

func (r *chaosRun) release(rng *rand.Rand) {
	r.jobAction(rng, "release", func(s *chaosSub) bool { return s.held || s.kind == chaosHeld },
		func(s *chaosSub) []string { return []string{"scontrol", "release", strconv.FormatUint(s.id, 10)} },
		func(s *chaosSub) {})
}

// query runs a read-only command as a random user.
func (r *chaosRun) query(rng *rand.Rand) {
	u := r.users[rng.IntN(len(r.users))]
	var args []string
	switch rng.IntN(4) {
	case 0:
		args = []string{"squeue"}
	case 1:
		args = []string{"sacct", "-X", "-P", "-n"}
	case 2:
		args = []string{"sinfo"}
	default:
		s := r.pick(rng, func(*chaosSub) bool { return true })
		if s == nil {
			return
		}
		args = []string{"scontrol", "show", "job", strconv.FormatUint(s.id, 10)}
	}
	res := r.cli(u, chaosCLITimeout, args...)
	switch {
	case res.timedOut:
		r.mu.Lock()
		r.counts[args[0]+" hung"]++
		r.violate("cli", 0, fmt.Sprintf("%s as %s did not finish within %s", strings.Join(args, " "), u.name, chaosCLITimeout))
		r.mu.Unlock()
	case res.code == 0:
		r.count(args[0] + " ok")
	default:
		r.count(args[0] + " failed")
	}
}

// oneLine joins a command's stderr into one line for a report.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}
