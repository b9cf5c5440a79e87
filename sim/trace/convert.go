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
// sacct -P -X --format=JobID,Submit,Start,End,Elapsed,AllocTRES,User,Account,State
const SacctFormat = "JobID,Submit,Start,End,Elapsed,AllocTRES,User,Account,State"

// sacctTime is sacct's timestamp layout (local time, no zone).
const sacctTime = "2006-01-02T15:04:05"

// ConvertSacct turns `sacct -P -X --format=SacctFormat` output (with its
// header line) into trace jobs: submit times become seconds since the
// earliest submission, duration is Elapsed (empty for jobs that never
// started), num_gpus comes from AllocTRES (gres/gpu=N or
// gres/gpu:TYPE=N, summed), queue is the Account, status the State's
// first word. Step lines (JobID with a dot) are skipped in case -X was
// forgotten. Jobs come out sorted by submit time, then file order.
// Timestamps are read in loc (sacct prints the local zone).
func ConvertSacct(r io.Reader, name string, loc *time.Location) ([]Job, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	line := 0
	col := map[string]int{}
	type raw struct {
		job    Job
		submit time.Time
		start  time.Time
		end    time.Time
	}
	var rows []raw
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
			for _, c := range strings.Split(SacctFormat, ",") {
				if _, ok := col[strings.ToLower(c)]; !ok {
					return nil, api.Invalid("%s:%d: sacct header lacks %s (run sacct -P -X --format=%s)", name, line, c, SacctFormat)
				}
			}
			continue
		}
		get := func(c string) string {
			if i := col[strings.ToLower(c)]; i < len(f) {
				return strings.TrimSpace(f[i])
			}
			return ""
		}
		bad := func(field, format string, args ...any) error {
			return api.Invalid("%s:%d: %s: %s", name, line, field, fmt.Sprintf(format, args...))
		}
		if len(f) < len(col) {
			return nil, api.Invalid("%s:%d: %d fields, the header has %d", name, line, len(f), len(col))
		}
		id := get("JobID")
		if id == "" {
			return nil, bad("JobID", "empty")
		}
		if strings.Contains(id, ".") {
			continue // a step: -X was not given
		}
		var rw raw
		var err error
		if rw.submit, err = time.ParseInLocation(sacctTime, get("Submit"), loc); err != nil {
			return nil, bad("Submit", "%q is not a time like 2024-01-02T15:04:05", get("Submit"))
		}
		rw.start, _ = parseOptTime(get("Start"), loc)
		rw.end, _ = parseOptTime(get("End"), loc)
		gpus, err := gpusFromTRES(get("AllocTRES"))
		if err != nil {
			return nil, bad("AllocTRES", "%v", err)
		}
		dur := int64(-1)
		if !rw.start.IsZero() {
			if e := get("Elapsed"); e != "" {
				if dur, err = api.ParseTimeLimit(e); err != nil || dur < 0 {
					return nil, bad("Elapsed", "%q is not [D-]HH:MM:SS", e)
				}
			}
		}
		state, _, _ := strings.Cut(get("State"), " ")
		rw.job = Job{ID: id, GPUs: gpus, Share: 1, User: get("User"), Queue: get("Account"),
			Status: state, Duration: dur, Start: -1, End: -1, Line: line}
		rows = append(rows, rw)
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
		}
		if !rw.end.IsZero() && !rw.start.IsZero() {
			j.End = int64(rw.end.Sub(zero) / time.Second)
		}
		jobs[i] = j
	}
	slices.SortStableFunc(jobs, func(a, b Job) int { return cmp.Compare(a.Submit, b.Submit) })
	return jobs, nil
}

// parseOptTime reads a sacct time; "Unknown", "None" and "" are zero.
func parseOptTime(s string, loc *time.Location) (time.Time, error) {
	switch s {
	case "", "Unknown", "None":
		return time.Time{}, nil
	}
	return time.ParseInLocation(sacctTime, s, loc)
}

// gpusFromTRES sums the GPU counts of a TRES list: "gres/gpu=4" or
// typed "gres/gpu:a100=4" (Slurm lists both for typed GPUs, so typed
// entries count only when no untyped one exists).
func gpusFromTRES(tres string) (int, error) {
	plain, typed, havePlain := 0, 0, false
	for _, kv := range strings.Split(tres, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok || !strings.HasPrefix(k, "gres/gpu") {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("%s=%q is not a GPU count", k, v)
		}
		if k == "gres/gpu" {
			plain += n
			havePlain = true
		} else if strings.HasPrefix(k, "gres/gpu:") {
			typed += n
		}
	}
	if havePlain {
		return plain, nil
	}
	return typed, nil
}
