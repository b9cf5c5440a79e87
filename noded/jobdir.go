package noded

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// Files of a job directory; see the package comment.
const (
	fileLaunch    = "launch.json"
	fileExec      = "exec.json"
	fileScript    = "script"
	fileStepdPID  = "stepd.pid"
	filePID       = "pid"
	fileStepdLog  = "stepd.log"
	fileStatus    = "status.json"
	markKilled    = "killed"
	markTimedOut  = "timedout"
	markSignalled = "signalled"
	markForgotten = "forgotten"
)

// lostError is the report of a job whose supervisor vanished without a
// status, which happens when the node rebooted under it.
const lostError = "job lost: supervisor gone"

// execPlan is exec.json: everything the supervisor and the exec child
// need, prepared by tided so that neither has to interpret a LaunchSpec.
type execPlan struct {
	JobID   uint64   `json:"job_id"`
	Node    string   `json:"node"`
	Script  string   `json:"script"`
	Args    []string `json:"args,omitempty"`
	Env     []string `json:"env"`
	WorkDir string   `json:"work_dir"`
	Stdin   string   `json:"stdin"`
	Stdout  string   `json:"stdout"`
	// Stderr is empty when stderr shares stdout's file descriptor.
	Stderr string `json:"stderr,omitempty"`
	Append bool   `json:"append,omitempty"`
	// Umask is applied before the output files are created; -1 keeps the
	// supervisor's.
	Umask int `json:"umask"`
	// SetUser switches to UID/GID (and the user's groups) before exec;
	// false when tided does not run as root.
	SetUser bool   `json:"set_user"`
	UID     uint32 `json:"uid"`
	GID     uint32 `json:"gid"`
}

// killMarker is the content of the killed and timedout markers: when the
// job was asked to end, with which signal, and when SIGKILL follows.
type killMarker struct {
	Time   time.Time `json:"time"`
	Signal int       `json:"signal"`
	KillAt time.Time `json:"kill_at"`
}

// jobStatus is status.json, the supervisor's final word on a job.
type jobStatus struct {
	Exit      api.ExitStatus `json:"exit"`
	StartTime time.Time      `json:"start_time,omitzero"`
	EndTime   time.Time      `json:"end_time"`
	Error     string         `json:"error,omitempty"`
}

// markers are the persisted flags of a job.
type markers struct {
	Killed    *killMarker
	TimedOut  *killMarker
	Signalled bool
	Forgotten bool
}

// dirName is the directory name of one job incarnation.
func dirName(ref api.JobRef) string {
	return strconv.FormatUint(ref.JobID, 10) + "." + strconv.Itoa(ref.Restart)
}

// parseDirName is the inverse of dirName.
func parseDirName(name string) (api.JobRef, bool) {
	a, b, ok := strings.Cut(name, ".")
	if !ok {
		return api.JobRef{}, false
	}
	id, err1 := strconv.ParseUint(a, 10, 64)
	r, err2 := strconv.Atoi(b)
	if err1 != nil || err2 != nil || r < 0 || strconv.FormatUint(id, 10) != a || strconv.Itoa(r) != b {
		return api.JobRef{}, false
	}
	return api.JobRef{JobID: id, Restart: r}, true
}

// writeFileAtomic writes data to a temporary file next to path and
// renames it into place, so readers see either the old or the new file.
func writeFileAtomic(path string, data []byte, perm fs.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	name := tmp.Name()
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		os.Remove(name)
		return err
	}
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		os.Remove(name)
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(name)
		return err
	}
	if err := os.Rename(name, path); err != nil {
		os.Remove(name)
		return err
	}
	return nil
}

func writeJSONAtomic(path string, v any, perm fs.FileMode) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", filepath.Base(path), err)
	}
	if err := writeFileAtomic(path, append(data, '\n'), perm); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// writeJSONNew writes a file that nobody reads before it is complete
// (tided writes launch.json and exec.json before starting the
// supervisor), sparing the temporary file and rename of writeJSONAtomic.
func writeJSONNew(path string, v any, perm fs.FileMode) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", filepath.Base(path), err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err == nil {
		_, err = f.Write(append(data, '\n'))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func readJSON(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("decode %s: %w", path, err)
	}
	return nil
}

// readIdentity reads a stepd.pid or pid file; a missing file gives the
// zero identity and no error.
func readIdentity(path string) (procIdentity, error) {
	var id procIdentity
	err := readJSON(path, &id)
	if errors.Is(err, fs.ErrNotExist) {
		return procIdentity{}, nil
	}
	return id, err
}

// readMarkers reads a job directory's markers. Unreadable marker content
// still counts as set: the marker's existence is what matters.
func readMarkers(dir string) markers {
	var m markers
	read := func(name string) *killMarker {
		var k killMarker
		err := readJSON(filepath.Join(dir, name), &k)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return &k
	}
	m.Killed = read(markKilled)
	m.TimedOut = read(markTimedOut)
	m.Signalled = exists(filepath.Join(dir, markSignalled))
	m.Forgotten = exists(filepath.Join(dir, markForgotten))
	return m
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// report builds the node's report of a job from what its directory says.
func report(ref api.JobRef, spec *api.LaunchSpec, st *jobStatus, m markers) api.NodeJobReport {
	r := api.NodeJobReport{JobID: ref.JobID, Restart: ref.Restart, State: api.NodeJobRunning}
	if spec != nil {
		r.StartTime = spec.StartTime
	}
	if st == nil {
		return r
	}
	r.State = api.NodeJobFinished
	if r.StartTime.IsZero() {
		r.StartTime = st.StartTime
	}
	r.EndTime = st.EndTime
	r.Exit = st.Exit
	r.Error = st.Error
	r.TimedOut = m.TimedOut != nil
	r.Killed = m.Killed != nil
	return r
}

// scanClass says what a restart scan found in a job directory.
type scanClass int

const (
	scanFinished scanClass = iota
	scanRunning
	scanLost
)

func (c scanClass) String() string {
	return [...]string{"finished", "running", "lost"}[c]
}

// scannedJob is one job directory as found at start.
type scannedJob struct {
	Ref     api.JobRef
	Dir     string
	Spec    *api.LaunchSpec
	Status  *jobStatus
	Stepd   procIdentity
	Markers markers
	Class   scanClass
	// Problem explains an unreadable file (the job is then lost unless it
	// finished).
	Problem error
}

// scanJobDirs reads every job directory under jobsDir, sorted by job id,
// and classifies it: a status means finished, a live supervisor (pid and
// start time match) means running, anything else means lost.
func scanJobDirs(jobsDir string) ([]scannedJob, error) {
	ents, err := os.ReadDir(jobsDir)
	if err != nil {
		return nil, fmt.Errorf("scan job directories: %w", err)
	}
	var out []scannedJob
	for _, e := range ents {
		ref, ok := parseDirName(e.Name())
		if !ok || !e.IsDir() {
			continue
		}
		sj := scannedJob{Ref: ref, Dir: filepath.Join(jobsDir, e.Name())}
		var spec api.LaunchSpec
		if err := readJSON(filepath.Join(sj.Dir, fileLaunch), &spec); err != nil {
			sj.Problem = err
		} else {
			sj.Spec = &spec
		}
		var st jobStatus
		switch err := readJSON(filepath.Join(sj.Dir, fileStatus), &st); {
		case err == nil:
			sj.Status = &st
		case !errors.Is(err, fs.ErrNotExist):
			sj.Problem = errors.Join(sj.Problem, err)
		}
		sj.Stepd, err = readIdentity(filepath.Join(sj.Dir, fileStepdPID))
		if err != nil {
			sj.Problem = errors.Join(sj.Problem, err)
		}
		sj.Markers = readMarkers(sj.Dir)
		switch {
		case sj.Status != nil:
			sj.Class = scanFinished
		case sj.Spec != nil && sj.Stepd.alive():
			sj.Class = scanRunning
		default:
			sj.Class = scanLost
		}
		out = append(out, sj)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Ref.JobID != out[j].Ref.JobID {
			return out[i].Ref.JobID < out[j].Ref.JobID
		}
		return out[i].Ref.Restart < out[j].Ref.Restart
	})
	return out, nil
}

// lostStatus is the status written for a job whose supervisor vanished:
// Slurm's NODE_FAIL exit, 0:9.
func lostStatus(now time.Time) jobStatus {
	return jobStatus{Exit: api.ExitStatus{Code: 0, Signal: 9}, EndTime: now, Error: lostError}
}
