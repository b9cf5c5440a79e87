package api

import (
	"strconv"
	"strings"
)

// PatternVars are the values output file patterns may name.
type PatternVars struct {
	JobID      uint64
	Name       string
	User       string
	Node       string
	ArrayJobID uint64
	ArrayTask  int // -1 when not an array task
	// Step, when set, makes the expansion a launch's (tided opening a
	// job's files): %J %s %n %t expand, and a pattern with a backslash
	// is taken literally, backslashes removed. Without it (squeue,
	// scontrol show job) those letters stay as written, as Slurm's
	// listings leave them.
	Step *StepVars
}

// StepVars are what a launch adds to PatternVars.
type StepVars struct {
	// Batch marks the batch script's step: %s is "batch" and %J the
	// job id alone. Otherwise ID is the step's number.
	Batch bool
	ID    uint32
	// NodeIndex is the node's position in the job's allocation (%n) and
	// Task the task's rank in the job (%t); both 0 for the batch script.
	NodeIndex int
	Task      int
}

// MaxPatternWidth caps the zero-padding of a pattern number, as Slurm
// does: "%0999999999j" pads to 10 characters, not to a billion.
const MaxPatternWidth = 10

// maxExpandedPattern bounds what ExpandPattern builds: no path that
// long can be opened (PATH_MAX is 4096), so the open of a longer result
// fails the same way (ENAMETOOLONG) whether or not the rest is there.
const maxExpandedPattern = 8192

// ExpandPattern expands sbatch's filename patterns: %j job id, %x job
// name, %u user, %N node name, %A array master id, %a array task id,
// %% a literal %, and for a launch (v.Step set) %J job and step id, %s
// step id, %n node index and %t task rank. A number between % and the
// letter zero-pads the numbers (%4j), to at most MaxPatternWidth
// characters. Unknown letters are kept as written, as Slurm does.
//
// For a launch, as slurmstepd does, a pattern that holds a backslash is
// not expanded at all: its backslashes are removed ("\\" keeps one),
// so that "out\%j" names the file "out%j"; and a pattern that is only a
// number names the output of that task, /dev/null for the others.
//
// The pattern is the user's, and tided, the controller and every
// squeue or scontrol show job expand it: its cost grows with the
// length of p and of the values only, whatever the widths say, and a
// result that grows past any path's length (a thousand %x of a long
// job name) is cut there.
func ExpandPattern(p string, v PatternVars) string {
	if v.Step != nil {
		if strings.IndexByte(p, '\\') >= 0 {
			return unescapePattern(p)
		}
		if n, err := strconv.Atoi(p); err == nil && n >= 0 && !strings.HasPrefix(p, "+") {
			if n != v.Step.Task {
				return "/dev/null"
			}
			return p
		}
	}
	if !strings.Contains(p, "%") {
		return p
	}
	var b strings.Builder
	b.Grow(min(len(p), maxExpandedPattern) + 16)
	for i := 0; i < len(p) && b.Len() < maxExpandedPattern; i++ {
		c := p[i]
		if c != '%' || i+1 >= len(p) {
			b.WriteByte(c)
			continue
		}
		j := i + 1
		width := 0
		for j < len(p) && p[j] >= '0' && p[j] <= '9' {
			// Saturating: the digits may spell any number at all.
			width = min(width*10+int(p[j]-'0'), MaxPatternWidth)
			j++
		}
		if j >= len(p) {
			b.WriteString(p[i:])
			break
		}
		switch p[j] {
		case '%':
			b.WriteByte('%')
		case 'j':
			writePadded(&b, v.JobID, width)
		case 'A':
			if v.ArrayJobID != 0 {
				writePadded(&b, v.ArrayJobID, width)
			} else {
				writePadded(&b, v.JobID, width)
			}
		case 'a':
			if v.ArrayTask >= 0 {
				writePadded(&b, uint64(v.ArrayTask), width)
			} else {
				writePadded(&b, 4294967294, width) // Slurm's NO_VAL for a non-array job
			}
		case 'x':
			b.WriteString(v.Name)
		case 'u':
			b.WriteString(v.User)
		case 'N':
			b.WriteString(v.Node)
		case 'J', 's', 'n', 't':
			if v.Step == nil {
				b.WriteString(p[i : j+1])
				break
			}
			writeStepLetter(&b, p[j], v, width)
		default:
			b.WriteString(p[i : j+1])
		}
		i = j
	}
	return b.String()
}

// writeStepLetter expands one of a launch's letters (%J %s %n %t).
func writeStepLetter(b *strings.Builder, c byte, v PatternVars, width int) {
	st := v.Step
	switch c {
	case 'J':
		writePadded(b, v.JobID, width)
		if !st.Batch {
			b.WriteByte('.')
			writePadded(b, uint64(st.ID), 0)
		}
	case 's':
		if st.Batch {
			b.WriteString("batch")
		} else {
			writePadded(b, uint64(st.ID), width)
		}
	case 'n':
		writePadded(b, uint64(max(st.NodeIndex, 0)), width)
	case 't':
		writePadded(b, uint64(max(st.Task, 0)), width)
	}
}

// unescapePattern is a launch's pattern with a backslash: taken as
// written, each backslash removed and a doubled one kept once.
func unescapePattern(p string) string {
	var b strings.Builder
	b.Grow(len(p))
	for i := 0; i < len(p); i++ {
		if p[i] == '\\' {
			if i+1 < len(p) && p[i+1] == '\\' {
				b.WriteByte('\\')
				i++
			}
			continue
		}
		b.WriteByte(p[i])
	}
	return b.String()
}

// writePadded writes n in decimal, zero-padded to width characters.
func writePadded(b *strings.Builder, n uint64, width int) {
	var buf [20]byte
	s := strconv.AppendUint(buf[:0], n, 10)
	for k := len(s); k < width; k++ {
		b.WriteByte('0')
	}
	b.Write(s)
}

// DefaultStdout is Slurm's default output name.
const DefaultStdout = "slurm-%j.out"
