package sacct

import (
	"math"
	"strconv"
	"strings"

	"github.com/tide-hpc/tide/ctld/api"
)

// keeps applies the selectors of Slurm's table that the controller does
// not know (-N, -q, -g, -R, -C, -i, -I, -k/-K, -W, -x): the jobs are
// filtered here, as slurmdbd would filter its records.
func (o *Options) keeps(j *api.Job) bool {
	m := &o.more
	switch {
	case m.none:
		return false
	case m.nodes != nil && !ranOn(j, m.nodes):
		return false
	case len(m.qos) > 0 && !foldIn(m.qos, j.QOS):
		return false
	case len(m.groups) > 0 && !foldIn(m.groups, j.Group) && !foldIn(m.groups, strconv.FormatUint(uint64(j.GroupID), 10)):
		return false
	case len(m.reasons) > 0 && !foldIn(m.reasons, string(j.Reason)):
		return false
	case len(m.constraints) > 0 && !foldIn(m.constraints, j.Constraint):
		return false
	}
	limit := j.TimeLimit / 60
	if j.TimeLimit == api.Infinite {
		limit = math.MaxInt32
	}
	return inRange(m.nnodes, int64(len(j.Alloc))) && inRange(m.ncpus, int64(j.AllocCPUs())) && inRange(m.timelimit, limit)
}

// inRange is Slurm's test of a min[-max] selector: none without a min,
// exactly min without a max.
func inRange(r [2]int64, v int64) bool {
	switch {
	case r[0] == 0:
		return true
	case r[1] == 0:
		return v == r[0]
	}
	return v >= r[0] && v <= r[1]
}

func ranOn(j *api.Job, nodes map[string]bool) bool {
	for _, a := range j.Alloc {
		if nodes[a.Node] {
			return true
		}
	}
	return false
}

func foldIn(list []string, s string) bool {
	if s == "" {
		return false
	}
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}
