package srun

import (
	"fmt"
	"os"
	"slices"
	"syscall"
	"time"
)

// forwarded are the signals srun catches while it runs, Slurm's srun's
// set: the others keep their default action.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGQUIT, syscall.SIGCONT, syscall.SIGTERM, syscall.SIGHUP,
	syscall.SIGALRM, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGPIPE}

// interruptWindow is how soon a second Ctrl-C must follow the first to
// end the step rather than show its status.
const interruptWindow = time.Second

// sigPlan is what srun does about one signal it receives while its step
// runs.
type sigPlan struct {
	// say are the lines srun prints (without the "srun: " prefix).
	say []string
	// status asks for the tasks' state, one line per state.
	status bool
	// forward is a signal for every task (0 for none).
	forward syscall.Signal
	// kill ends the step: SIGKILL to every task. cancel says that srun
	// itself cancels the step (Ctrl-C twice): the tasks' deaths are then
	// expected and not reported as errors.
	kill, cancel bool
	// abort stops waiting for the tasks: srun exits at once and the
	// node daemons kill what is left when its connections close.
	abort bool
}

// signalPolicy decides, signal by signal, what srun does, as Slurm's
// srun does (man srun, "SIGNALS AND ESCAPE SEQUENCES"):
//
//   - Ctrl-C (SIGINT) prints the tasks' status; a second one within a
//     second sends SIGINT to the tasks and kills them; one more makes
//     srun exit without waiting for them. With --quit-on-interrupt the
//     first Ctrl-C already sends SIGINT and kills; with --disable-status
//     each Ctrl-C is passed to the tasks.
//   - SIGTERM, SIGHUP and SIGQUIT kill the tasks ("forcing job
//     termination"); SIGPIPE (srun's output is gone) too, once, quietly.
//     While the job itself ends (cancelled, requeued, at its time
//     limit: the node signals the batch shell's process group, srun
//     among them) they are passed on instead, so that the tasks get the
//     job's kill wait to save their work, as Slurm's tasks do (its
//     controller refuses srun's kill of a job that is completing).
//   - SIGCONT is only reported and SIGALRM ignored.
//   - Every other caught signal (SIGUSR1, SIGUSR2) is passed to every
//     task as it is.
//
// The zero value is srun's default behaviour. It is not safe for
// concurrent use.
type signalPolicy struct {
	quitOnInterrupt, disableStatus bool
	// step names the step in messages ("StepId=12.0").
	step string
	// ending reports whether the job is ending (nil: never).
	ending func() bool

	lastIntr  time.Time
	cancelled bool // Ctrl-C ended the step
	piped     bool
}

// plan returns what to do about sig received at now.
func (p *signalPolicy) plan(sig syscall.Signal, now time.Time) sigPlan {
	switch sig {
	case syscall.SIGINT:
		return p.interrupt(now)
	case syscall.SIGQUIT, syscall.SIGTERM, syscall.SIGHUP:
		if p.ending != nil && p.ending() {
			return sigPlan{forward: sig}
		}
		if sig == syscall.SIGQUIT {
			return sigPlan{say: []string{"Quit", "forcing job termination"}, kill: true}
		}
		return sigPlan{say: []string{"forcing job termination"}, kill: true}
	case syscall.SIGCONT:
		return sigPlan{say: []string{"got SIGCONT"}}
	case syscall.SIGALRM:
		return sigPlan{}
	case syscall.SIGPIPE:
		if p.piped {
			return sigPlan{}
		}
		p.piped = true
		return sigPlan{kill: true}
	}
	return sigPlan{forward: sig}
}

// interrupt handles one Ctrl-C.
func (p *signalPolicy) interrupt(now time.Time) sigPlan {
	switch {
	case p.cancelled:
		// The step is being killed already: stop waiting for it.
		return sigPlan{say: []string{"job abort in progress"}, abort: true}
	case p.quitOnInterrupt || !p.lastIntr.IsZero() && now.Sub(p.lastIntr) < interruptWindow:
		p.cancelled = true
		return sigPlan{say: []string{"sending Ctrl-C to " + p.step, "forcing job termination"},
			forward: syscall.SIGINT, kill: true, cancel: true}
	case p.disableStatus:
		p.lastIntr = now
		return sigPlan{say: []string{"sending Ctrl-C to " + p.step}, forward: syscall.SIGINT}
	}
	p.lastIntr = now
	return sigPlan{say: []string{"interrupt (one more within 1 sec to abort)"}, status: true}
}

// taskStatus is Slurm's status of a step's tasks for a first Ctrl-C:
// one line per state, the tasks as ranges ("StepId=12.0 tasks 0-2,4:
// running"). ranks lists the step's tasks; exits holds those that
// ended.
func taskStatus(step string, ranks []int, exits map[int]bool) []string {
	var running, normal, abnormal []int
	ranks = slices.Sorted(slices.Values(ranks))
	for _, r := range ranks {
		ok, ended := exits[r]
		switch {
		case !ended:
			running = append(running, r)
		case ok:
			normal = append(normal, r)
		default:
			abnormal = append(abnormal, r)
		}
	}
	var out []string
	for _, s := range []struct {
		tasks []int
		what  string
	}{{running, "running"}, {abnormal, "exited abnormally"}, {normal, "exited"}} {
		if len(s.tasks) == 0 {
			continue
		}
		word := "tasks"
		if len(s.tasks) == 1 {
			word = "task"
		}
		out = append(out, fmt.Sprintf("%s %s %s: %s", step, word, intList(s.tasks), s.what))
	}
	return out
}

// revoking passes on, while srun waits for its allocation, the signals
// that give the request up: every caught one but SIGCONT, as in Slurm.
// It stops reading in after passing one on or once stop is closed, so
// that the step gets the signals that come later.
func revoking(in <-chan os.Signal, stop <-chan struct{}) <-chan os.Signal {
	out := make(chan os.Signal, 1)
	go func() {
		for {
			select {
			case <-stop:
				return
			case s := <-in:
				if s != syscall.SIGCONT {
					out <- s
					return
				}
			}
		}
	}()
	return out
}
