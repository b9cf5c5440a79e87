package trace

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// SacctFormat is the sacct field list ConvertSacct reads, in any order:
// sacct -a -P -X --format=SacctFormat. Timelimit may be left out (the
// trace's time limits stay unknown), and only the column that
// ConvertOptions.QueueFrom names of Partition and Account is needed.
const SacctFormat = "JobID,Submit,Start,End,Elapsed,Timelimit,AllocTRES,User,Account,Partition,State"

// Where ConvertOptions.QueueFrom takes a job's queue from.
const (
	QueueFromPartition = "partition"
	QueueFromAccount   = "account"
)

// sacctRequired are the fields every dump must have, besides the queue's.
var sacctRequired = []string{"JobID", "Submit", "Start", "End", "Elapsed", "AllocTRES", "User", "State"}

// sacctTime is sacct's timestamp layout (local time, no zone).
const sacctTime = "2006-01-02T15:04:05"

// ConvertOptions configures ConvertSacct.
type ConvertOptions struct {
	// Loc is the zone sacct printed its timestamps in (nil: UTC).
	Loc *time.Location
	// QueueFrom is QueueFromPartition (the default when empty) or
	// QueueFromAccount.
	QueueFrom string
	// Strict fails on the first bad row; by default a bad row is handed
	// to Skipped and left out.
	Strict bool
	// Skipped receives each bad row that was left out: an error naming
	// its line and field. Nil drops them.
	Skipped func(error)
	// Note receives remarks on the input that leave nothing out, such
	// as a missing Timelimit column. Nil drops them.
	Note func(string)
}

// ConvertSacct turns `sacct -P -X --format=SacctFormat` output (with its
// header line) into trace jobs:
//
//   - submit, start and end times become seconds since the earliest
//     submission;
//   - duration is Elapsed, 0 for a job that started and ended at once
//     (a NODE_FAIL, an instant cancel: it occupied nothing), empty for a
//     job that never started;
//   - a job still PENDING, RUNNING, SUSPENDED, REQUEUED or RESIZING (or
//     started with no end) is censored: its Elapsed is what it had run
//     when sacct ran, a lower bound;
//   - num_gpus comes from AllocTRES (gres/gpu=N, or gres/gpu:TYPE=N
//     summed when the untyped count is absent), num_cpus from its cpu=N;
//   - time_limit is Timelimit in seconds (empty for UNLIMITED and
//     Partition_Limit: the limit that applied is the partition's, which
//     the dump does not give);
//   - queue is the Partition (the first of a pending job's list) or the
//     Account (opts.QueueFrom), status the State's first word.
//
// Step lines (JobID with a dot) are skipped in case -X was forgotten.
// Jobs come out sorted by submit time, then file order.
func ConvertSacct(r io.Reader, name string, opts ConvertOptions) ([]Job, error) {
	loc := opts.Loc
	if loc == nil {
		loc = time.UTC
	}
	queueCol := "Partition"
	switch opts.QueueFrom {
	case "", QueueFromPartition:
	case QueueFromAccount:
		queueCol = "Account"
	default:
		return nil, api.Invalid("queue source %q is not %s or %s", opts.QueueFrom, QueueFromPartition, QueueFromAccount)
	}
	skipped, note := opts.Skipped, opts.Note
	if skipped == nil {
		skipped = func(error) {}
	}
	if note == nil {
		note = func(string) {}
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	line := 0
	col := map[string]int{}
	haveLimit := false
	var rows []sacctRow
	for sc.Scan() {
		line++
		text := strings.TrimRight(sc.Text(), "\r")
		if strings.TrimSpace(text) == "" {
			continue
		}
		f := strings.Split(text, "|")
		if len(col) == 0 {
			for i, h := range f {
				col[strings.ToLower(strings.TrimSpace(h))] = i
			}
			for _, c := range append(slices.Clone(sacctRequired), queueCol) {
				if _, ok := col[strings.ToLower(c)]; !ok {
					return nil, api.Invalid("%s:%d: sacct header lacks %s (run sacct -P -X --format=%s)", name, line, c, SacctFormat)
				}
			}
			if _, haveLimit = col["timelimit"]; !haveLimit {
				note(fmt.Sprintf("%s:%d: sacct header lacks Timelimit: the trace's time limits stay unknown (run sacct -P -X --format=%s)",
					name, line, SacctFormat))
			}
			continue
		}
		rw, ok, err := parseSacctRow(f, col, queueCol, loc)
		if err != nil {
			err = api.Invalid("%s:%d: %v", name, line, err)
			if opts.Strict {
				return nil, err
			}
			skipped(err)
			continue
		}
		if ok {
			rw.job.Line = line
			rows = append(rows, rw)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s:%d: %w", name, line+1, err)
	}
	if len(col) == 0 {
		return nil, api.Invalid("%s: empty input (want sacct -P output with its header)", name)
	}
	if len(rows) == 0 {
		return nil, nil
	}
	zero := rows[0].submit
	for _, rw := range rows {
		if rw.submit.Before(zero) {
			zero = rw.submit
		}
	}
	jobs := make([]Job, len(rows))
	for i, rw := range rows {
		j := rw.job
		j.Submit = int64(rw.submit.Sub(zero) / time.Second)
		if !rw.start.IsZero() {
			j.Start = int64(rw.start.Sub(zero) / time.Second)
			if !rw.end.IsZero() {
				j.End = int64(rw.end.Sub(zero) / time.Second)
			}
		}
		jobs[i] = j
	}
	slices.SortStableFunc(jobs, func(a, b Job) int { return cmp.Compare(a.Submit, b.Submit) })
	return jobs, nil
}

// sacctRow is one job line, its times still absolute.
type sacctRow struct {
	job                Job
	submit, start, end time.Time
}

// inProgress are the (first words of) sacct states of jobs that had not
// ended when sacct ran.
var inProgress = map[string]bool{"PENDING": true, "RUNNING": true, "SUSPENDED": true, "REQUEUED": true,
	"RESIZING": true, "REQUEUE_HOLD": true, "REQUEUE_FED": true}

// parseSacctRow reads one job line; ok is false for a step line. The
// error names the bad field, not the line.
func parseSacctRow(f []string, col map[string]int, queueCol string, loc *time.Location) (rw sacctRow, ok bool, err error) {
	if len(f) < len(col) {
		return rw, false, fmt.Errorf("%d fields, the header has %d", len(f), len(col))
	}
	get := func(c string) string {
		if i, ok := col[strings.ToLower(c)]; ok && i < len(f) {
			return strings.TrimSpace(f[i])
		}
		return ""
	}
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...))
	}
	id := get("JobID")
	if id == "" {
		return rw, false, bad("JobID", "empty")
	}
	if strings.Contains(id, ".") {
		return rw, false, nil // a step: -X was not given
	}
	if rw.submit, err = time.ParseInLocation(sacctTime, get("Submit"), loc); err != nil {
		return rw, false, bad("Submit", "%q is not a time like 2024-01-02T15:04:05", get("Submit"))
	}
	if rw.start, err = parseOptTime(get("Start"), loc); err != nil {
		return rw, false, bad("Start", "%q is not a time like 2024-01-02T15:04:05 (or Unknown, None)", get("Start"))
	}
	if rw.end, err = parseOptTime(get("End"), loc); err != nil {
		return rw, false, bad("End", "%q is not a time like 2024-01-02T15:04:05 (or Unknown, None)", get("End"))
	}
	gpus, cpus, err := tresCounts(get("AllocTRES"))
	if err != nil {
		return rw, false, bad("AllocTRES", "%v", err)
	}
	limit, err := parseTimelimit(get("Timelimit"))
	if err != nil {
		return rw, false, bad("Timelimit", "%q is not a Slurm time limit ([D-]HH:MM:SS, MM:SS, minutes, UNLIMITED, Partition_Limit)", get("Timelimit"))
	}
	state, _, _ := strings.Cut(get("State"), " ")
	dur := int64(-1)
	if !rw.start.IsZero() {
		if e := get("Elapsed"); e != "" {
			if dur, err = parseElapsed(e); err != nil {
				return rw, false, bad("Elapsed", "%q is not [D-]HH:MM:SS", e)
			}
		}
	}
	queue, _, _ := strings.Cut(get(queueCol), ",")
	rw.job = Job{ID: id, GPUs: gpus, CPUs: cpus, Share: 1, User: get("User"), Queue: queue, Status: state,
		Duration: dur, TimeLimit: limit, Start: -1, End: -1,
		Censored: inProgress[state] || !rw.start.IsZero() && rw.end.IsZero()}
	return rw, true, nil
}

// parseOptTime reads a sacct time; "Unknown", "None" and "" are zero.
func parseOptTime(s string, loc *time.Location) (time.Time, error) {
	switch s {
	case "", "Unknown", "None":
		return time.Time{}, nil
	}
	return time.ParseInLocation(sacctTime, s, loc)
}

// parseElapsed reads sacct's Elapsed, [D-]HH:MM:SS or MM:SS, zero
// included (a job that ended as it started).
func parseElapsed(s string) (int64, error) {
	days, rest := int64(0), s
	if d, r, ok := strings.Cut(s, "-"); ok {
		n, err := strconv.ParseInt(d, 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("bad days %q", d)
		}
		days, rest = n, r
	}
	fields := strings.Split(rest, ":")
	if len(fields) < 2 || len(fields) > 3 {
		return 0, fmt.Errorf("want [D-]HH:MM:SS or MM:SS")
	}
	var hms int64
	for i, f := range fields {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil || n < 0 || i > 0 && n >= 60 {
			return 0, fmt.Errorf("bad field %q", f)
		}
		hms = hms*60 + n
	}
	return days*86400 + hms, nil
}

// parseTimelimit reads sacct's Timelimit in seconds: every Slurm time
// format, and 0 for UNLIMITED and Partition_Limit (the limit that
// applied is the partition's, which the dump does not give) and for an
// absent column.
func parseTimelimit(s string) (int64, error) {
	switch strings.ToLower(s) {
	case "", "unlimited", "partition_limit":
		return 0, nil
	}
	v, err := api.ParseTimeLimit(s)
	if err != nil {
		return 0, err
	}
	if v == api.Infinite {
		return 0, nil
	}
	return v, nil
}

// tresCounts reads the GPU and CPU counts of a TRES list: GPUs from
// "gres/gpu=4" or typed "gres/gpu:a100=4" (Slurm lists both for typed
// GPUs, so typed entries count only when no untyped one exists), CPUs
// from "cpu=8". Absent counts are 0.
func tresCounts(tres string) (gpus, cpus int, err error) {
	plain, typed, havePlain := 0, 0, false
	for _, kv := range strings.Split(tres, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok {
			continue
		}
		switch {
		case k == "cpu":
			if cpus, err = strconv.Atoi(v); err != nil || cpus < 0 {
				return 0, 0, fmt.Errorf("cpu=%q is not a CPU count", v)
			}
		case k == "gres/gpu" || strings.HasPrefix(k, "gres/gpu:"):
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return 0, 0, fmt.Errorf("%s=%q is not a GPU count", k, v)
			}
			if k == "gres/gpu" {
				plain += n
				havePlain = true
			} else {
				typed += n
			}
		}
	}
	if havePlain {
		return plain, cpus, nil
	}
	return typed, cpus, nil
}
