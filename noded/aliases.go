package noded

import "github.com/tide-hpc/tide/noded/stepd"

// The job-directory format lives in noded/stepd, shared with the
// supervisor; these names keep the daemon's code in its own words.
type (
	execPlan     = stepd.Plan
	jobStatus    = stepd.Status
	killMarker   = stepd.KillMarker
	markers      = stepd.Markers
	procIdentity = stepd.ProcIdentity
	procStat     = stepd.ProcStat
)

const (
	fileLaunch    = stepd.FileLaunch
	fileExec      = stepd.FileExec
	fileScript    = stepd.FileScript
	fileStepdPID  = stepd.FileStepdPID
	filePID       = stepd.FilePID
	fileStepdLog  = stepd.FileStepdLog
	fileStatus    = stepd.FileStatus
	markKilled    = stepd.MarkKilled
	markTimedOut  = stepd.MarkTimedOut
	markSignalled = stepd.MarkSignalled
	markForgotten = stepd.MarkForgotten
)

var (
	writeFileAtomic = stepd.WriteFileAtomic
	writeJSONAtomic = stepd.WriteJSONAtomic
	writeJSONNew    = stepd.WriteJSONNew
	writeFileNew    = stepd.WriteFileNew
	readJSON        = stepd.ReadJSON
	readStatus      = stepd.ReadStatus
	openFile        = stepd.OpenFile
	readIdentity    = stepd.ReadIdentity
	readMarkers     = stepd.ReadMarkers
	exists          = stepd.Exists
	readProcStat    = stepd.ReadProcStat
	parseProcStat   = stepd.ParseProcStat
	selfIdentity    = stepd.SelfIdentity
	identityOf      = stepd.IdentityOf
	withTaskPID     = stepd.WithTaskPID
)
