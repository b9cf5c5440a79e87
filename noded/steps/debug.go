package steps

import (
	"fmt"

	"github.com/tide-hpc/tide/internal/stepio"
)

// stepDebug writes what srun --slurmd-debug asked for: slurmstepd's log
// lines about the step's launch on this node, on the standard error of
// the node's first task (slurmstepd points its own stderr there). Lines
// at a level above the one asked for are left out; the zero value
// writes nothing.
type stepDebug struct {
	level int
	rank  int
}

// newStepDebug is the writer for level name (hello's Debug) on a node
// whose first task is rank.
func newStepDebug(name string, rank int) stepDebug {
	return stepDebug{level: stepio.DebugLevel(name), rank: rank}
}

// Slurm's level numbers (stepio.DebugLevels).
const (
	levelVerbose = 4
	levelDebug   = 5
	levelDebug2  = 6
)

func (d stepDebug) verbose(r *stepRun, format string, args ...any) {
	d.line(r, levelVerbose, "", format, args...)
}

func (d stepDebug) debug(r *stepRun, format string, args ...any) {
	d.line(r, levelDebug, "debug:  ", format, args...)
}

func (d stepDebug) debug2(r *stepRun, format string, args ...any) {
	d.line(r, levelDebug2, "debug2: ", format, args...)
}

// line queues one line at level, with Slurm's prefix for the level.
func (d stepDebug) line(r *stepRun, level int, prefix, format string, args ...any) {
	if d.level < level {
		return
	}
	r.note(d.rank, "slurmstepd: "+prefix+fmt.Sprintf(format, args...)+"\n")
}
