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

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/noded/runtime"
)

// lostError is the report of a job whose supervisor vanished without a
// status, which happens when the node rebooted under it.
const lostError = runtime.LostError

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
	r.OOM = st.OOM
	r.LaunchFailed = st.LaunchFailed
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
		switch st, err := readStatus(filepath.Join(sj.Dir, fileStatus)); {
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
		case sj.Spec != nil && sj.Stepd.Alive():
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

// validJSONFile reports whether path holds a complete JSON document.
func validJSONFile(path string) bool {
	b, err := os.ReadFile(path)
	return err == nil && json.Valid(b)
}

// lostStatus is the status written for a job whose supervisor vanished:
// Slurm's NODE_FAIL exit, 0:9.
var lostStatus = runtime.LostStatus
