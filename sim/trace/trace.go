// Package trace reads GPU-cluster job traces in the common schema of
// shared/traces (job_id, submit_time, start_time, end_time, duration,
// num_gpus, gpu_share, user, queue, status; times in integer seconds
// since the trace's zero), plain or gzipped, with the optional columns
// that converted sacct dumps add (time_limit, num_cpus, censored), and
// converts Slurm's `sacct -P` output into that schema.
package trace

import (
	"bufio"
	"cmp"
	"compress/gzip"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/tide-hpc/tide/ctld/api"
)

// Columns is the common schema's header, in order.
var Columns = []string{"job_id", "submit_time", "start_time", "end_time", "duration",
	"num_gpus", "gpu_share", "user", "queue", "status"}

// OptionalColumns follow Columns when a trace has them (the shared
// traces do not; converted sacct dumps do): time_limit (the requested
// limit in seconds, empty when unknown), num_cpus (the allocated CPUs,
// empty when unknown) and censored (1 for a job still pending or
// running when the trace was taken: its duration is what it had run by
// then, a lower bound).
var OptionalColumns = []string{"time_limit", "num_cpus", "censored"}

// Job is one row of a trace.
type Job struct {
	ID string
	// Submit is seconds since the trace's zero (after the window and
	// load scaling of Options).
	Submit int64
	// Start and End are the trace's own start and end (-1: unknown); the
	// simulator ignores them, the converter writes them.
	Start, End int64
	// Duration is the run time in seconds; -1 when the trace does not
	// know it (a job that never ran).
	Duration int64
	GPUs     int
	// Share is the fraction of each GPU asked for (1 for whole GPUs).
	Share float64
	User  string
	// Queue is the trace's queue; Partition is the partition
	// Options.QueueMap sends it to ("" when the map names none: the
	// simulator then takes the partition named like the queue, else the
	// default one).
	Queue     string
	Partition string
	Status    string
	// TimeLimit is the limit the job asked for, in seconds (0: unknown,
	// or no limit).
	TimeLimit int64
	// CPUs is the job's CPU count (0: unknown).
	CPUs int
	// Censored marks a job that had not ended when the trace was taken:
	// Duration is what it had run by then (it ran at least that long),
	// or -1 when it had not started.
	Censored bool
	// Line is the row's line in the file, for messages.
	Line int
}

// Options selects and reshapes the jobs Read returns.
type Options struct {
	// From and To keep jobs submitted in [From, To) seconds; To 0 means
	// no end. Submit times stay relative to the trace's zero.
	From, To int64
	// Load compresses inter-arrival times: submit times become From +
	// (submit - From) / Load, so 2 doubles the arrival rate. 0 means 1.
	Load float64
	// QueueMap sends queues to partitions (trace queue → partition,
	// Job.Partition); the key "*" catches queues not listed.
	QueueMap map[string]string
}

// Read reads the trace at path (".gz" files are decompressed) and
// returns its jobs in file order, filtered and scaled by opts.
func Read(path string, opts Options) ([]Job, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read trace: %w", err)
	}
	defer f.Close()
	var r io.Reader = bufio.NewReaderSize(f, 1<<16)
	if strings.HasSuffix(path, ".gz") {
		gz, err := gzip.NewReader(r)
		if err != nil {
			return nil, fmt.Errorf("read trace %s: %w", path, err)
		}
		defer gz.Close()
		r = gz
	}
	return Parse(r, path, opts)
}

// Parse reads a trace in the common schema from r; name prefixes
// messages ("jobs.csv:12: num_gpus: ..."). Columns may come in any
// order; extra columns are ignored, missing required ones are an error.
func Parse(r io.Reader, name string, opts Options) ([]Job, error) {
	if opts.Load < 0 || math.IsNaN(opts.Load) || math.IsInf(opts.Load, 0) {
		return nil, api.Invalid("load factor %v must be positive", opts.Load)
	}
	if opts.To != 0 && opts.To <= opts.From {
		return nil, api.Invalid("window end %d is not after its start %d", opts.To, opts.From)
	}
	load := opts.Load
	if load == 0 {
		load = 1
	}
	cr := csv.NewReader(r)
	cr.ReuseRecord = true
	cr.FieldsPerRecord = -1
	header, err := cr.Read()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, api.Invalid("%s: empty trace (no header)", name)
		}
		return nil, fmt.Errorf("%s:1: %w", name, err)
	}
	col := map[string]int{}
	for i, h := range header {
		col[strings.TrimSpace(strings.TrimPrefix(h, "\ufeff"))] = i
	}
	for _, c := range []string{"job_id", "submit_time", "duration", "num_gpus"} {
		if _, ok := col[c]; !ok {
			return nil, api.Invalid("%s:1: header lacks column %s (want %s)", name, c, strings.Join(Columns, ","))
		}
	}
	get := func(rec []string, c string) string {
		if i, ok := col[c]; ok && i < len(rec) {
			return strings.TrimSpace(rec[i])
		}
		return ""
	}
	// The fields of a record are slices of one string per line: a kept
	// job keeps none of it. Queues, users and states repeat (interned);
	// IDs are copied alone.
	interned := map[string]string{}
	intern := func(s string) string {
		if v, ok := interned[s]; ok {
			return v
		}
		s = strings.Clone(s)
		interned[s] = s
		return s
	}
	var jobs []Job
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		line, _ := cr.FieldPos(0)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, line, err)
		}
		if len(rec) == 1 && rec[0] == "" {
			continue
		}
		bad := func(column, format string, args ...any) error {
			return api.Invalid("%s:%d: %s: %s", name, line, column, fmt.Sprintf(format, args...))
		}
		j := Job{ID: get(rec, "job_id"), User: get(rec, "user"), Queue: get(rec, "queue"),
			Status: get(rec, "status"), Line: line, Duration: -1, Share: 1, Start: -1, End: -1}
		if j.ID == "" {
			return nil, bad("job_id", "empty")
		}
		if j.Submit, err = strconv.ParseInt(get(rec, "submit_time"), 10, 64); err != nil {
			return nil, bad("submit_time", "%q is not whole seconds", get(rec, "submit_time"))
		}
		for _, c := range []struct {
			name string
			dst  *int64
		}{{"start_time", &j.Start}, {"end_time", &j.End}} {
			if v := get(rec, c.name); v != "" {
				if *c.dst, err = strconv.ParseInt(v, 10, 64); err != nil {
					return nil, bad(c.name, "%q is not whole seconds", v)
				}
			}
		}
		if d := get(rec, "duration"); d != "" {
			if j.Duration, err = strconv.ParseInt(d, 10, 64); err != nil || j.Duration < 0 {
				return nil, bad("duration", "%q is not a non-negative number of seconds", d)
			}
		}
		g := get(rec, "num_gpus")
		if j.GPUs, err = strconv.Atoi(g); err != nil || j.GPUs < 0 {
			return nil, bad("num_gpus", "%q is not a non-negative integer", g)
		}
		if s := get(rec, "gpu_share"); s != "" {
			if j.Share, err = strconv.ParseFloat(s, 64); err != nil || j.Share < 0 || j.Share > 1 || math.IsNaN(j.Share) {
				return nil, bad("gpu_share", "%q is not a fraction between 0 and 1", s)
			}
		}
		if v := get(rec, "time_limit"); v != "" {
			if j.TimeLimit, err = strconv.ParseInt(v, 10, 64); err != nil || j.TimeLimit <= 0 || j.TimeLimit > api.MaxTimeLimit {
				return nil, bad("time_limit", "%q is not a positive number of seconds (leave it empty when unknown)", v)
			}
		}
		if v := get(rec, "num_cpus"); v != "" {
			if j.CPUs, err = strconv.Atoi(v); err != nil || j.CPUs < 0 || j.CPUs > math.MaxInt32 {
				return nil, bad("num_cpus", "%q is not a non-negative integer", v)
			}
		}
		switch v := get(rec, "censored"); v {
		case "", "0":
		case "1":
			j.Censored = true
		default:
			return nil, bad("censored", "%q is not 0 or 1", v)
		}
		if j.Submit < opts.From || opts.To != 0 && j.Submit >= opts.To {
			continue
		}
		j.ID, j.User, j.Queue, j.Status = strings.Clone(j.ID), intern(j.User), intern(j.Queue), intern(j.Status)
		if load != 1 {
			j.Submit = opts.From + int64(math.Round(float64(j.Submit-opts.From)/load))
		}
		if to, ok := opts.QueueMap[j.Queue]; ok {
			j.Partition = intern(to)
		} else if to, ok := opts.QueueMap["*"]; ok {
			j.Partition = intern(to)
		}
		jobs = append(jobs, j)
	}
	return jobs, nil
}

// ParseQueueMap reads "a=gpu,b=debug,*=gpu" into a QueueMap.
func ParseQueueMap(s string) (map[string]string, error) {
	m := map[string]string{}
	if strings.TrimSpace(s) == "" {
		return m, nil
	}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || k == "" || v == "" {
			return nil, api.Invalid("queue map entry %q is not QUEUE=PARTITION", kv)
		}
		if _, dup := m[k]; dup {
			return nil, api.Invalid("queue map names queue %s twice", k)
		}
		m[k] = v
	}
	return m, nil
}

// ParseWindow reads "START,END" (either side may be empty): each a number
// of seconds, or a number with unit s, m, h or d ("30d,60d"), counted
// from the trace's zero.
func ParseWindow(s string) (from, to int64, err error) {
	if strings.TrimSpace(s) == "" {
		return 0, 0, nil
	}
	a, b, ok := strings.Cut(s, ",")
	if !ok {
		return 0, 0, api.Invalid("window %q is not START,END", s)
	}
	if from, err = parseOffset(a); err != nil {
		return 0, 0, err
	}
	if to, err = parseOffset(b); err != nil {
		return 0, 0, err
	}
	if to != 0 && to <= from {
		return 0, 0, api.Invalid("window %q ends before it starts", s)
	}
	return from, to, nil
}

func parseOffset(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil
	}
	unit := int64(1)
	switch s[len(s)-1] {
	case 's':
		s = s[:len(s)-1]
	case 'm':
		unit, s = 60, s[:len(s)-1]
	case 'h':
		unit, s = 3600, s[:len(s)-1]
	case 'd':
		unit, s = 86400, s[:len(s)-1]
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, api.Invalid("window bound %q is not a non-negative time (seconds, or with unit s, m, h, d)", s)
	}
	return int64(math.Round(v * float64(unit))), nil
}

// Write writes jobs in the common schema (header first), the inverse of
// Parse for the columns it keeps. An optional column is written when
// some job has a value for it, so that a trace without them reads and
// writes back the same.
func Write(w io.Writer, jobs []Job) error {
	var limits, cpus, censored bool
	for i := range jobs {
		limits = limits || jobs[i].TimeLimit > 0
		cpus = cpus || jobs[i].CPUs > 0
		censored = censored || jobs[i].Censored
	}
	header := slices.Clone(Columns)
	for i, on := range []bool{limits, cpus, censored} {
		if on {
			header = append(header, OptionalColumns[i])
		}
	}
	cw := csv.NewWriter(w)
	if err := cw.Write(header); err != nil {
		return fmt.Errorf("write trace: %w", err)
	}
	rec := make([]string, len(header))
	for _, j := range jobs {
		dur := optInt(j.Duration)
		rec = append(rec[:0], j.ID, strconv.FormatInt(j.Submit, 10), optInt(j.Start), optInt(j.End), dur, strconv.Itoa(j.GPUs),
			strconv.FormatFloat(j.Share, 'f', -1, 64), j.User, j.Queue, j.Status)
		if j.Share == 1 {
			rec[6] = "1.0"
		}
		if limits {
			rec = append(rec, optPositive(j.TimeLimit))
		}
		if cpus {
			rec = append(rec, optPositive(int64(j.CPUs)))
		}
		if censored {
			c := "0"
			if j.Censored {
				c = "1"
			}
			rec = append(rec, c)
		}
		if err := cw.Write(rec); err != nil {
			return fmt.Errorf("write trace: %w", err)
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("write trace: %w", err)
	}
	return nil
}

// optInt formats a known (non-negative) value, else "".
func optInt(v int64) string {
	if v < 0 {
		return ""
	}
	return strconv.FormatInt(v, 10)
}

// optPositive formats a positive value, else "" (unknown).
func optPositive(v int64) string {
	if v <= 0 {
		return ""
	}
	return strconv.FormatInt(v, 10)
}

// SortBySubmit orders jobs by submit time, keeping file order for equal
// times (the order the simulator submits them in).
func SortBySubmit(jobs []Job) {
	slices.SortStableFunc(jobs, func(a, b Job) int { return cmp.Compare(a.Submit, b.Submit) })
}
