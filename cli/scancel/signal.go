package scancel

import (
	"strconv"
	"strings"

	"github.com/tide-hpc/tide/ctld/api"
)

// signals are Linux's signal names (without "SIG") and numbers; jobs
// run on Linux nodes whatever the client runs on, so the table is fixed
// rather than taken from the client's syscall package. It is a static
// table, not a map: every CLI command (this is one multi-call binary)
// would build a map in its package initialisation.
var signals = [...]struct {
	name string
	num  int
}{
	{"HUP", 1}, {"INT", 2}, {"QUIT", 3}, {"ILL", 4}, {"TRAP", 5}, {"ABRT", 6}, {"IOT", 6}, {"BUS", 7},
	{"FPE", 8}, {"KILL", 9}, {"USR1", 10}, {"SEGV", 11}, {"USR2", 12}, {"PIPE", 13}, {"ALRM", 14},
	{"TERM", 15}, {"STKFLT", 16}, {"CHLD", 17}, {"CONT", 18}, {"STOP", 19}, {"TSTP", 20}, {"TTIN", 21},
	{"TTOU", 22}, {"URG", 23}, {"XCPU", 24}, {"XFSZ", 25}, {"VTALRM", 26}, {"PROF", 27}, {"WINCH", 28},
	{"IO", 29}, {"POLL", 29}, {"PWR", 30}, {"SYS", 31},
}

// maxSignal is the highest real-time signal on Linux.
const maxSignal = 64

// sigKill is SIGKILL's number.
const sigKill = 9

// ParseSignal accepts a signal name with or without SIG, in any case
// ("usr1", "SIGUSR1"), or its number, as scancel --signal does; anything
// else is Slurm's "Unknown job signal".
func ParseSignal(s string) (int, error) {
	t := strings.ToUpper(strings.TrimSpace(s))
	if n, err := strconv.Atoi(t); err == nil {
		if n < 1 || n > maxSignal {
			return 0, api.Invalid("Unknown job signal: %s", s)
		}
		return n, nil
	}
	name := strings.TrimPrefix(t, "SIG")
	for _, sig := range signals {
		if sig.name == name {
			return sig.num, nil
		}
	}
	return 0, api.Invalid("Unknown job signal: %s", s)
}
