package slurmjson

import (
	"strings"
	"time"
)

// Release is the Slurm release whose output Tide's commands match.
const (
	Release = "22.05.8"
	major   = 22
	minor   = 5
	micro   = 8
)

// Legacy is the meta object of Slurm 22.05's JSON outputs.
type Legacy struct {
	Plugin struct {
		Type string `json:"type"`
		Name string `json:"name"`
	} `json:"plugin"`
	Slurm struct {
		Version struct {
			Major int `json:"major"`
			Micro int `json:"micro"`
			Minor int `json:"minor"`
		} `json:"version"`
		Release string `json:"release"`
	} `json:"Slurm"`
}

// LegacyMeta returns 22.05's meta for an openapi plugin version such as
// "v0.0.38" (squeue, sinfo) or "dbv0.0.38" (sacct).
func LegacyMeta(plugin string) Legacy {
	var m Legacy
	m.Plugin.Type = "openapi/" + plugin
	m.Plugin.Name = "Slurm OpenAPI " + plugin
	if v, ok := strings.CutPrefix(plugin, "db"); ok {
		// The slurmdbd plugin names itself "DB v0.0.38".
		m.Plugin.Name = "Slurm OpenAPI DB " + v
	}
	m.Slurm.Version.Major, m.Slurm.Version.Minor, m.Slurm.Version.Micro = major, minor, micro
	m.Slurm.Release = Release
	return m
}

// Error is one entry of "errors"; Warning one of "warnings".
type Error struct {
	Description string `json:"description"`
	ErrorNumber int    `json:"error_number"`
	Error       string `json:"error"`
	Source      string `json:"source"`
}

// Warning is one entry of "warnings".
type Warning struct {
	Description string `json:"description"`
	Source      string `json:"source"`
}

// Meta is the data_parser layout's meta object.
type Meta struct {
	Plugin struct {
		Type              string `json:"type"`
		Name              string `json:"name"`
		DataParser        string `json:"data_parser"`
		AccountingStorage string `json:"accounting_storage"`
	} `json:"plugin"`
	Client struct {
		Source string `json:"source"`
		User   string `json:"user"`
		Group  string `json:"group"`
	} `json:"client"`
	Command []string `json:"command"`
	Slurm   struct {
		Version struct {
			Major string `json:"major"`
			Micro string `json:"micro"`
			Minor string `json:"minor"`
		} `json:"version"`
		Release string `json:"release"`
		Cluster string `json:"cluster"`
	} `json:"slurm"`
}

// DataParser is the data_parser version of scontrol --json.
const DataParser = "data_parser/v0.0.40"

// NewMeta returns the data_parser meta: the command line as run (the
// program's base name first), who ran it, and the cluster.
func NewMeta(argv []string, user, group, cluster string) Meta {
	var m Meta
	m.Plugin.DataParser = DataParser
	m.Plugin.AccountingStorage = "accounting_storage/tide_sqlite"
	m.Client.Source = "cli"
	m.Client.User, m.Client.Group = user, group
	m.Command = []string{}
	for i, a := range argv {
		if i == 0 {
			a = a[strings.LastIndexByte(a, '/')+1:]
		}
		m.Command = append(m.Command, a)
	}
	m.Slurm.Version.Major, m.Slurm.Version.Minor, m.Slurm.Version.Micro = "22", "05", "8"
	m.Slurm.Release = Release
	m.Slurm.Cluster = cluster
	return m
}

// Number is a data_parser number that may be unset or infinite:
// {"set": true, "infinite": false, "number": 5}.
type Number struct {
	Set      bool  `json:"set"`
	Infinite bool  `json:"infinite"`
	Number   int64 `json:"number"`
}

// Num is a set number.
func Num[T ~int | ~int64 | ~uint32 | ~uint64](n T) Number {
	return Number{Set: true, Number: int64(n)}
}

// Unset is a number with no value.
func Unset() Number { return Number{} }

// Infinite is an unlimited number.
func Infinite() Number { return Number{Infinite: true} }

// Positive is n when it is above 0, else unset.
func Positive[T ~int | ~int64](n T) Number {
	if n <= 0 {
		return Unset()
	}
	return Num(n)
}

// Time is a timestamp: unset when zero.
func Time(t time.Time) Number {
	if t.IsZero() {
		return Unset()
	}
	return Num(t.Unix())
}

// Float is a data_parser floating-point number that may be unset.
type Float struct {
	Set      bool    `json:"set"`
	Infinite bool    `json:"infinite"`
	Number   float64 `json:"number"`
}

// Unix is a 22.05 timestamp: unix seconds, 0 when unknown.
func Unix(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.Unix()
}

// Minutes is a limit in seconds as Slurm's minutes, rounded up; ok is
// false for none (0 or negative).
func Minutes(secs int64) (m int64, ok bool) {
	if secs <= 0 {
		return 0, false
	}
	return (secs + 59) / 60, true
}

// ExitCode is the data_parser form of a process's end: status words,
// the return code, and the signal that ended it.
type ExitCode struct {
	Status     []string `json:"status"`
	ReturnCode Number   `json:"return_code"`
	Signal     struct {
		ID   Number `json:"id"`
		Name string `json:"name"`
	} `json:"signal"`
}

// Exit describes a process that has not ended (done false), exited with
// code, or was killed by signal sig (sig > 0) whose name is sigName.
func Exit(done bool, code, sig int, sigName string) ExitCode {
	var e ExitCode
	switch {
	case !done:
		e.Status = []string{"PENDING"}
		e.ReturnCode = Unset()
		e.Signal.ID = Unset()
	case sig > 0:
		e.Status = []string{"SIGNALED"}
		e.ReturnCode = Unset()
		e.Signal.ID, e.Signal.Name = Num(sig), sigName
	case code != 0:
		e.Status = []string{"ERROR"}
		e.ReturnCode = Num(code)
		e.Signal.ID = Unset()
	default:
		e.Status = []string{"SUCCESS"}
		e.ReturnCode = Num(0)
		e.Signal.ID = Unset()
	}
	return e
}

// CSV splits a comma-separated list into the data_parser's list form
// (empty for "").
func CSV(s string) []string {
	out := []string{}
	for _, f := range strings.Split(s, ",") {
		if f != "" {
			out = append(out, f)
		}
	}
	return out
}
