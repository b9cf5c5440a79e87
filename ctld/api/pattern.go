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
}

// MaxPatternWidth caps the zero-padding of a pattern number, as Slurm
// does: "%0999999999j" pads to 10 characters, not to a billion.
const MaxPatternWidth = 10

// maxExpandedPattern bounds what ExpandPattern builds: no path that
// long can be opened (PATH_MAX is 4096), so the open of a longer result
// fails the same way (ENAMETOOLONG) whether or not the rest is there.
const maxExpandedPattern = 8192

// ExpandPattern expands sbatch's filename patterns: %j job id, %x job
// name, %u user, %N first node, %A array master id, %a array task id,
// %% a literal %. A number between % and the letter zero-pads (%4j), to
// at most MaxPatternWidth characters. Unknown letters are kept as
// written, as Slurm does.
//
// The pattern is the user's, and tided, the controller and every
// squeue or scontrol show job expand it: its cost grows with the
// length of p and of the values only, whatever the widths say, and a
// result that grows past any path's length (a thousand %x of a long
// job name) is cut there.
func ExpandPattern(p string, v PatternVars) string {
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
		default:
			b.WriteString(p[i : j+1])
		}
		i = j
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
