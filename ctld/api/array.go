package api

import (
	"slices"
	"strconv"
	"strings"
)

// MaxArrayTaskLimit bounds array task ids whatever the controller's
// max_array_size says (Slurm's hard limit), so that parsing a spec never
// allocates more than a few hundred kilobytes.
const MaxArrayTaskLimit = 4000001

// ArrayRange is First, First+Step, … up to Last (inclusive). A range of
// one task has Step 1.
type ArrayRange struct {
	First int `json:"first"`
	Last  int `json:"last"`
	Step  int `json:"step"`
}

func (r ArrayRange) len() int { return (r.Last-r.First)/r.Step + 1 }

func (r ArrayRange) has(i int) bool {
	return i >= r.First && i <= r.Last && (i-r.First)%r.Step == 0
}

// TaskSet is a set of array task ids kept as ascending, disjoint
// arithmetic runs, so that "0-9999" is one range however many tasks it
// holds: an array's pending tasks live in one record at that cost.
type TaskSet []ArrayRange

// NewTaskSet builds the canonical set of the given ids (any order,
// duplicates allowed).
func NewTaskSet(ids []int) TaskSet {
	ids = slices.Clone(ids)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	var out TaskSet
	for i := 0; i < len(ids); {
		if i+1 == len(ids) {
			out = append(out, ArrayRange{ids[i], ids[i], 1})
			break
		}
		step := ids[i+1] - ids[i]
		j := i + 1
		for j+1 < len(ids) && ids[j+1]-ids[j] == step {
			if step > 1 && j+2 < len(ids) && ids[j+2] == ids[j+1]+1 {
				// The next id starts a consecutive run: leave it there
				// ("1,3,5-9", not "1-5:2,6-9").
				break
			}
			j++
		}
		if step > 1 && j == i+1 {
			// Two ids with a gap are two singletons, not a stepped run.
			out = append(out, ArrayRange{ids[i], ids[i], 1})
			i++
			continue
		}
		out = append(out, ArrayRange{ids[i], ids[j], step})
		i = j + 1
	}
	return out
}

// Len counts the tasks.
func (t TaskSet) Len() int {
	n := 0
	for _, r := range t {
		n += r.len()
	}
	return n
}

// Min is the lowest task id (-1 for an empty set).
func (t TaskSet) Min() int {
	if len(t) == 0 {
		return -1
	}
	return t[0].First
}

// Max is the highest task id (-1 for an empty set).
func (t TaskSet) Max() int {
	if len(t) == 0 {
		return -1
	}
	return t[len(t)-1].Last
}

// Contains reports whether task i is in the set.
func (t TaskSet) Contains(i int) bool {
	k, _ := slices.BinarySearchFunc(t, i, func(r ArrayRange, x int) int {
		switch {
		case r.Last < x:
			return -1
		case r.First > x:
			return 1
		}
		return 0
	})
	return k < len(t) && t[k].has(i)
}

// Remove returns the set without task i (t itself is not modified).
func (t TaskSet) Remove(i int) TaskSet {
	for k, r := range t {
		if !r.has(i) {
			continue
		}
		var mid []ArrayRange
		if i > r.First {
			mid = append(mid, normRange(r.First, i-r.Step, r.Step))
		}
		if i < r.Last {
			mid = append(mid, normRange(i+r.Step, r.Last, r.Step))
		}
		out := make(TaskSet, 0, len(t)+1)
		out = append(out, t[:k]...)
		out = append(out, mid...)
		return append(out, t[k+1:]...)
	}
	return t
}

func normRange(first, last, step int) ArrayRange {
	if first == last {
		step = 1
	}
	return ArrayRange{first, last, step}
}

// Each calls fn for every task in ascending order until fn returns false.
func (t TaskSet) Each(fn func(int) bool) {
	for _, r := range t {
		for i := r.First; i <= r.Last; i += r.Step {
			if !fn(i) {
				return
			}
		}
	}
}

// Ids lists the tasks in ascending order.
func (t TaskSet) Ids() []int {
	out := make([]int, 0, t.Len())
	t.Each(func(i int) bool { out = append(out, i); return true })
	return out
}

// Step is SLURM_ARRAY_TASK_STEP: the distance between consecutive tasks
// when the set is one arithmetic run, else 1.
func (t TaskSet) Step() int {
	if len(t) == 1 {
		return t[0].Step
	}
	return 1
}

// String renders the set the way squeue and scontrol print an array's
// pending tasks (Slurm's _xlate_task_str): one stepped run of more than
// ten ids as "first-last:step", else consecutive runs as "a-b" joined
// by commas ("1-3,5,7-9").
func (t TaskSet) String() string {
	if len(t) == 1 && t[0].Step > 1 && t[0].Last-t[0].First > 10 {
		r := t[0]
		return strconv.Itoa(r.First) + "-" + strconv.Itoa(r.Last) + ":" + strconv.Itoa(r.Step)
	}
	var b strings.Builder
	run := func(a, z int) {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(a))
		if z > a {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(z))
		}
	}
	start, prev := -1, -1
	t.Each(func(i int) bool {
		switch {
		case start < 0:
			start = i
		case i != prev+1:
			run(start, prev)
			start = i
		}
		prev = i
		return true
	})
	if start >= 0 {
		run(start, prev)
	}
	return b.String()
}

// ArraySpec is a parsed --array: the tasks and the %N throttle (0 = none).
type ArraySpec struct {
	Tasks    TaskSet
	Throttle int
}

// ErrInvalidArray is Slurm's message for a bad or too large --array.
const ErrInvalidArray = "Invalid job array specification"

// ParseArraySpec reads sbatch's --array: comma-separated ids and
// ranges, each range with an optional ":step", and an optional "%N"
// throttle at the end ("0-99", "1,3,5-9", "0-99:4", "0-15%4"). Task ids
// must be below maxSize (0 means MaxArrayTaskLimit), as Slurm's
// MaxArraySize demands.
func ParseArraySpec(s string, maxSize int) (ArraySpec, error) {
	if maxSize <= 0 || maxSize > MaxArrayTaskLimit {
		maxSize = MaxArrayTaskLimit
	}
	bad := func() (ArraySpec, error) { return ArraySpec{}, Invalid(ErrInvalidArray) }
	var spec ArraySpec
	body, throttle, hasThrottle := strings.Cut(strings.TrimSpace(s), "%")
	if hasThrottle {
		n, err := strconv.Atoi(throttle)
		if err != nil || n < 0 {
			return bad()
		}
		spec.Throttle = n
	}
	if body == "" {
		return bad()
	}
	var ids []int
	for _, item := range strings.Split(body, ",") {
		rng, stepStr, hasStep := strings.Cut(item, ":")
		lo, hi, isRange := strings.Cut(rng, "-")
		first, err1 := strconv.Atoi(lo)
		last, err2 := first, error(nil)
		if isRange {
			last, err2 = strconv.Atoi(hi)
		}
		step := 1
		var err3 error
		if hasStep {
			step, err3 = strconv.Atoi(stepStr)
		}
		if err1 != nil || err2 != nil || err3 != nil || first < 0 || last < first || step < 1 ||
			(hasStep && !isRange) || last >= maxSize || len(ids)+(last-first)/step+1 > maxSize {
			return bad()
		}
		// Stepping by comparing the distance left, not i+step with
		// last: a step near MaxInt would wrap i+step negative.
		for i := first; ; i += step {
			ids = append(ids, i)
			if last-i < step {
				break
			}
		}
	}
	spec.Tasks = NewTaskSet(ids)
	return spec, nil
}

// String writes the spec back in --array syntax.
func (a ArraySpec) String() string {
	var parts []string
	for _, r := range a.Tasks {
		switch {
		case r.First == r.Last:
			parts = append(parts, strconv.Itoa(r.First))
		case r.Step == 1:
			parts = append(parts, strconv.Itoa(r.First)+"-"+strconv.Itoa(r.Last))
		default:
			parts = append(parts, strconv.Itoa(r.First)+"-"+strconv.Itoa(r.Last)+":"+strconv.Itoa(r.Step))
		}
	}
	s := strings.Join(parts, ",")
	if a.Throttle > 0 {
		s += "%" + strconv.Itoa(a.Throttle)
	}
	return s
}

// TaskRef names array tasks as commands take them: "N_I" is one task,
// "N_[1-3,5]" several.
type TaskRef struct {
	JobID uint64 `json:"job_id"`
	Task  int    `json:"task"`
}

func (r TaskRef) String() string {
	return strconv.FormatUint(r.JobID, 10) + "_" + strconv.Itoa(r.Task)
}

// ParseJobIDs reads one job id word as scancel, squeue -j, scontrol and
// sacct -j take it: "N" (a job, or every task of array N), "N_*" (the
// same), "N_I" (one task) or "N_[1-3,5]" (several tasks).
func ParseJobIDs(s string) (ids []uint64, tasks []TaskRef, err error) {
	return parseJobIDs(s, MaxArrayTaskLimit)
}

// parseJobIDs is ParseJobIDs refusing a word that names more than room
// tasks, before it lists them.
func parseJobIDs(s string, room int) (ids []uint64, tasks []TaskRef, err error) {
	s = strings.TrimSpace(s)
	job, task, hasTask := strings.Cut(s, "_")
	id, perr := strconv.ParseUint(job, 10, 64)
	if perr != nil || id == 0 {
		return nil, nil, Invalid("Invalid job id: %s", s)
	}
	if !hasTask || task == "*" {
		return []uint64{id}, nil, nil
	}
	if inner, ok := strings.CutPrefix(task, "["); ok {
		inner, ok = strings.CutSuffix(inner, "]")
		if !ok || strings.Contains(inner, "%") {
			return nil, nil, Invalid("Invalid job id: %s", s)
		}
		task = inner
	} else if _, err := strconv.Atoi(task); err != nil {
		return nil, nil, Invalid("Invalid job id: %s", s)
	}
	spec, perr := ParseArraySpec(task, 0)
	if perr != nil {
		return nil, nil, Invalid("Invalid job id: %s", s)
	}
	n := spec.Tasks.Len()
	if n > room {
		return nil, nil, Invalid("Invalid job id: %s (more than %d array tasks)", s, room)
	}
	tasks = make([]TaskRef, 0, n)
	spec.Tasks.Each(func(i int) bool {
		tasks = append(tasks, TaskRef{JobID: id, Task: i})
		return true
	})
	return nil, tasks, nil
}

// IsArray reports whether j is part of a job array.
func (j *Job) IsArray() bool { return j.ArrayJobID != 0 }

// IsArrayMeta reports whether j is the record that holds an array's
// tasks that have not started (and were not split off) yet.
func (j *Job) IsArrayMeta() bool { return j.ArrayJobID != 0 && len(j.ArrayPending) > 0 }

// ArrayID is the id squeue's %i and sacct's JobID print: "N_I" for an
// array task, "N_[tasks%throttle]" for the record of an array's pending
// tasks, and the job id otherwise.
func (j *Job) ArrayID() string {
	switch {
	case j.ArrayJobID == 0:
		return strconv.FormatUint(j.ID, 10)
	case j.IsArrayMeta():
		return strconv.FormatUint(j.ArrayJobID, 10) + "_[" + j.ArrayTaskString() + "]"
	}
	return strconv.FormatUint(j.ArrayJobID, 10) + "_" + strconv.Itoa(j.ArrayTaskID)
}

// ArrayTaskString is scontrol's ArrayTaskId and squeue's %K: the pending
// tasks with the throttle ("10-99%8") for the meta record, the task id
// for a task, "N/A" for other jobs.
func (j *Job) ArrayTaskString() string {
	switch {
	case j.ArrayJobID == 0:
		return "N/A"
	case j.IsArrayMeta():
		s := j.ArrayPending.String()
		if j.ArrayThrottle > 0 {
			s += "%" + strconv.Itoa(j.ArrayThrottle)
		}
		return s
	}
	return strconv.Itoa(j.ArrayTaskID)
}

// PatternVars returns the values j's output patterns expand with; node
// is the first allocated node ("" before start).
func (j *Job) PatternVars(node string) PatternVars {
	v := PatternVars{JobID: j.ID, Name: j.Name, User: j.User, Node: node, ArrayTask: -1}
	if j.ArrayJobID != 0 && !j.IsArrayMeta() {
		v.ArrayJobID, v.ArrayTask = j.ArrayJobID, j.ArrayTaskID
	} else if j.ArrayJobID != 0 {
		v.ArrayJobID = j.ArrayJobID
	}
	return v
}

// ArrayDefaultStdout is the default output of array tasks
// (slurm-%A_%a.out), as Slurm names them.
const ArrayDefaultStdout = "slurm-%A_%a.out"

// ArrayLaunchOf describes array task j for its launch (nil when j is no
// array task). The count, bounds and step are those of the whole array
// as submitted (JobSpec.Array).
func ArrayLaunchOf(j *Job) *ArrayLaunch {
	if j.ArrayJobID == 0 || j.IsArrayMeta() {
		return nil
	}
	a := &ArrayLaunch{JobID: j.ArrayJobID, Task: j.ArrayTaskID, Count: 1, Min: j.ArrayTaskID, Max: j.ArrayTaskID, Step: 1}
	if spec, err := ParseArraySpec(j.Array, 0); err == nil {
		a.Count, a.Min, a.Max, a.Step = spec.Tasks.Len(), spec.Tasks.Min(), spec.Tasks.Max(), spec.Tasks.Step()
	}
	return a
}

// SplitJobIDList splits a comma-separated job id list, keeping the
// commas inside an array task list whole ("7_[1,3],9" is "7_[1,3]" and
// "9").
func SplitJobIDList(s string) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i <= len(s); i++ {
		if i < len(s) {
			switch s[i] {
			case '[':
				depth++
				continue
			case ']':
				depth--
				continue
			case ',':
				if depth > 0 {
					continue
				}
			default:
				continue
			}
		}
		if w := strings.TrimSpace(s[start:i]); w != "" {
			out = append(out, w)
		}
		start = i + 1
	}
	return out
}
