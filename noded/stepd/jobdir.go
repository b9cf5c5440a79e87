package stepd

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// Files of a job directory; see the package comment.
const (
	FileLaunch    = "launch.json"
	FileExec      = "exec.json"
	FileScript    = "script"
	FileStepdPID  = "stepd.pid"
	FilePID       = "pid"
	FileStepdLog  = "stepd.log"
	FileStatus    = "status.json"
	MarkKilled    = "killed"
	MarkTimedOut  = "timedout"
	MarkSignalled = "signalled"
	MarkForgotten = "forgotten"
	// MarkFrozen is present while the job is suspended (frozen); see
	// FrozenMarker.
	MarkFrozen = "frozen"
)

// Plan is exec.json: everything the supervisor and the exec child
// need, prepared by tided so that neither has to interpret a LaunchSpec.
type Plan struct {
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
	// Rlimits are the soft resource limits sbatch propagated
	// (SLURM_RLIMIT_*), set on the script before it execs, each bounded
	// by the hard limit it inherits (the node's).
	Rlimits []Rlimit `json:"rlimits,omitempty"`
	// SetUser switches to UID/GID (and the user's groups) before exec;
	// false when tided does not run as root.
	SetUser bool   `json:"set_user"`
	UID     uint32 `json:"uid"`
	GID     uint32 `json:"gid"`
	// Groups are the user's supplementary groups, resolved by tided
	// (which links the system's NSS) so the supervisor need not.
	Groups []uint32 `json:"groups,omitempty"`
	// Cgroup, when set, confines the job in a cgroup of its own (see
	// CgroupPlan); nil runs it in the supervisor's.
	Cgroup *CgroupPlan `json:"cgroup,omitempty"`
}

// Rlimit is one soft resource limit: the resource's number
// (RLIMIT_CORE, ...) and its value.
type Rlimit struct {
	Resource int    `json:"resource"`
	Cur      uint64 `json:"cur"`
}

// groups is the group list to run with: the resolved groups, or the
// primary group alone.
func (p *Plan) groups() []uint32 {
	if len(p.Groups) > 0 {
		return p.Groups
	}
	return []uint32{p.GID}
}

// KillMarker is the content of the killed and timedout Markers: when the
// job was asked to end, with which signal, and when SIGKILL follows.
type KillMarker struct {
	Time   time.Time `json:"time"`
	Signal int       `json:"signal"`
	KillAt time.Time `json:"kill_at"`
}

// Status is status.json, the supervisor's final word on a job.
type Status struct {
	Exit      api.ExitStatus `json:"exit"`
	StartTime time.Time      `json:"start_time,omitzero"`
	EndTime   time.Time      `json:"end_time"`
	Error     string         `json:"error,omitempty"`
	// OOM: the kernel's OOM killer ended a process of the job.
	OOM bool `json:"oom,omitempty"`
	// LaunchFailed: tided could not launch the job on this node (its job
	// directory, its supervisor, a launch past launch_timeout), so that
	// nothing of the job ran and another node may well succeed; Error
	// says why. A job whose own files or request failed it before its
	// script ran has Error alone.
	LaunchFailed bool `json:"launch_failed,omitempty"`
	// Usage is what the batch script used (usage.go; issue 22).
	Usage *api.NodeUsage `json:"usage,omitempty"`
}

// Markers are the persisted flags of a job.
type Markers struct {
	Killed    *KillMarker
	TimedOut  *KillMarker
	Signalled bool
	Forgotten bool
	// Frozen is set while the job is suspended: tided wrote the frozen
	// marker before it froze the job and removes it after the thaw.
	Frozen *FrozenMarker
}

// WriteFileAtomic writes data to a temporary file next to path and
// renames it into place, so readers see either the old or the new file.
func WriteFileAtomic(path string, data []byte, perm fs.FileMode) error {
	tmp, err := createTemp(filepath.Dir(path), filepath.Base(path))
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
	// rename(2) itself: os.Rename first looks whether path is a
	// directory, one system call more for every status and pid file.
	if err := syscall.Rename(name, path); err != nil {
		os.Remove(name)
		return &os.LinkError{Op: "rename", Old: name, New: path, Err: err}
	}
	return nil
}

func WriteJSONAtomic(path string, v any, perm fs.FileMode) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s: %w", filepath.Base(path), err)
	}
	if err := WriteFileAtomic(path, append(data, '\n'), perm); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// WriteJSONNew writes a file that nobody reads before it is complete
// (tided writes launch.json and exec.json before starting the
// supervisor), sparing the temporary file and rename of WriteJSONAtomic.
func WriteJSONNew(path string, v any, perm fs.FileMode) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s: %w", filepath.Base(path), err)
	}
	return WriteFileNew(path, data, perm)
}

// WriteFileNew is WriteJSONNew for a document already encoded (without
// its final newline).
func WriteFileNew(path string, data []byte, perm fs.FileMode) error {
	f, err := OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
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

func ReadJSON(path string, v any) error {
	data, err := ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("decode %s: %w", path, err)
	}
	return nil
}

// ReadIdentity reads a stepd.pid or pid file; a missing file gives the
// zero identity and no error.
func ReadIdentity(path string) (ProcIdentity, error) {
	var id ProcIdentity
	err := ReadJSON(path, &id)
	if errors.Is(err, fs.ErrNotExist) {
		return ProcIdentity{}, nil
	}
	return id, err
}

// ReadMarkers reads a job directory's Markers. Unreadable marker content
// still counts as set: the marker's existence is what matters.
func ReadMarkers(dir string) Markers {
	var m Markers
	m.Killed = ReadKillMarker(dir, MarkKilled)
	m.TimedOut = ReadKillMarker(dir, MarkTimedOut)
	m.Signalled = Exists(filepath.Join(dir, MarkSignalled))
	m.Forgotten = Exists(filepath.Join(dir, MarkForgotten))
	if Exists(filepath.Join(dir, MarkFrozen)) {
		var f FrozenMarker
		_ = ReadJSON(filepath.Join(dir, MarkFrozen), &f)
		m.Frozen = &f
	}
	return m
}

// ReadKillMarker reads one kill marker (MarkKilled or MarkTimedOut) of
// a job directory: nil when there is none; unreadable content still
// counts as set.
func ReadKillMarker(dir, name string) *KillMarker {
	var k KillMarker
	err := ReadJSON(filepath.Join(dir, name), &k)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return &k
}

func Exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}
