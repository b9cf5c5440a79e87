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

// ExpandPattern expands sbatch's filename patterns: %j job id, %x job
// name, %u user, %N first node, %A array master id, %a array task id,
// %% a literal %. A number between % and the letter zero-pads (%4j).
// Unknown letters are kept as written, as Slurm does.
func ExpandPattern(p string, v PatternVars) string {
	if !strings.Contains(p, "%") {
		return p
	}
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		c := p[i]
		if c != '%' || i+1 >= len(p) {
			b.WriteByte(c)
			continue
		}
		j := i + 1
		for j < len(p) && p[j] >= '0' && p[j] <= '9' {
			j++
		}
		if j >= len(p) {
			b.WriteString(p[i:])
			break
		}
		width, _ := strconv.Atoi(p[i+1 : j])
		num := func(n uint64) string {
			s := strconv.FormatUint(n, 10)
			for len(s) < width {
				s = "0" + s
			}
			return s
		}
		switch p[j] {
		case '%':
			b.WriteByte('%')
		case 'j':
			b.WriteString(num(v.JobID))
		case 'A':
			if v.ArrayJobID != 0 {
				b.WriteString(num(v.ArrayJobID))
			} else {
				b.WriteString(num(v.JobID))
			}
		case 'a':
			if v.ArrayTask >= 0 {
				b.WriteString(num(uint64(v.ArrayTask)))
			} else {
				b.WriteString(num(4294967294)) // Slurm's NO_VAL for a non-array job
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

// DefaultStdout is Slurm's default output name.
const DefaultStdout = "slurm-%j.out"
