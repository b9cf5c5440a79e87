package opts

import (
	"fmt"
	"strings"

	"github.com/tide-hpc/tide/hostlist"
)

// maxHostfileTasks bounds the tasks a host file may lay out.
const maxHostfileTasks = 1 << 16

// finishHostfile applies -m arbitrary: the file SLURM_HOSTFILE names
// lists the node of each task (Slurm's slurm_read_hostfile). The job
// asks for those nodes (-w), one node each (-N), and a task per entry
// (-n, unless given: then the first n entries). Without SLURM_HOSTFILE
// the tasks are laid out as block, as Slurm does.
func (st *state) finishHostfile() error {
	if !st.arbitrary {
		return nil
	}
	path := strings.TrimSpace(st.in.Getenv("SLURM_HOSTFILE"))
	if path == "" {
		return nil
	}
	if st.in.ReadFile == nil {
		return fail("cannot read SLURM_HOSTFILE " + path)
	}
	data, err := st.in.ReadFile(st.abs(path))
	if err != nil {
		return fail(fmt.Sprintf("Unable to read SLURM_HOSTFILE %s: %v", path, err))
	}
	s := &st.spec
	hosts, err := ParseHostfile(string(data), s.Tasks)
	if err != nil {
		return fail(fmt.Sprintf("SLURM_HOSTFILE %s: %v", path, err))
	}
	distinct := DistinctHosts(hosts)
	st.req.TaskHosts = hosts
	s.NodeList = distinct
	if s.Nodes == 0 {
		s.Nodes = len(distinct)
	}
	if s.Tasks == 0 {
		s.Tasks = len(hosts)
	}
	return nil
}

// ParseHostfile reads a host file as Slurm does: host names (or
// hostlist expressions) one per line or separated by commas, '#'
// starting a comment; each entry is the node of the next task. With n
// > 0 the first n entries are the tasks', and fewer is an error.
func ParseHostfile(text string, n int) ([]string, error) {
	var hosts []string
	for _, line := range strings.Split(text, "\n") {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		for _, word := range splitHostlists(line) {
			names, err := hostlist.Expand(word)
			if err != nil {
				return nil, fmt.Errorf("invalid host entry %q: %w", word, err)
			}
			hosts = append(hosts, names...)
			if len(hosts) > maxHostfileTasks {
				return nil, fmt.Errorf("more than %d entries", maxHostfileTasks)
			}
		}
	}
	switch {
	case len(hosts) == 0:
		return nil, fmt.Errorf("no host names")
	case n > 0 && len(hosts) < n:
		return nil, fmt.Errorf("Too few NodeNames in SLURM Hostfile: %d for %d tasks", len(hosts), n)
	case n > 0:
		hosts = hosts[:n]
	}
	return hosts, nil
}

// splitHostlists splits a line at commas and blanks outside brackets,
// so that "gpu[01-02],gpu05" is two expressions.
func splitHostlists(line string) []string {
	var out []string
	depth, start := 0, -1
	for i := 0; i <= len(line); i++ {
		c := byte(',')
		if i < len(line) {
			c = line[i]
		}
		switch {
		case c == '[':
			depth++
		case c == ']':
			depth--
		case i == len(line) || (c == ',' || c == ' ' || c == '\t' || c == '\r') && depth <= 0:
			if start >= 0 {
				out = append(out, line[start:i])
				start = -1
			}
			continue
		}
		if start < 0 {
			start = i
		}
	}
	return out
}

// DistinctHosts lists each host of a host file's once, in the order
// they first appear: the nodes the tasks need.
func DistinctHosts(hosts []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, h := range hosts {
		if !seen[h] {
			seen[h] = true
			out = append(out, h)
		}
	}
	return out
}
