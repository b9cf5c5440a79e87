package scontrol

import (
	"regexp"
	"strings"
	"testing"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/hostlist"
)

// longNumber matches words whose job or task lists could name millions
// of tasks: listing them is correct but too slow for fuzzing.
var longNumber = regexp.MustCompile(`[0-9]{5}`)

// FuzzParseUpdate checks `scontrol update` Key=Value parsing for jobs
// and nodes: no panic, and what it accepts is a request the controller
// takes (valid time limits, a relative limit within range, nice and
// priority in range, jobs named, node lists bounded).
func FuzzParseUpdate(f *testing.F) {
	for _, s := range []string{
		"JobId=101\nTimeLimit=2:00:00", "JobId=101\nTimeLimit=UNLIMITED", "JobId=101\nTimeLimit=+30",
		"JobId=101,103\nTimeLimit=-1:00:00\nComment=shorter", "JobId=7_[1-3]\nTimeLimit=+5", "JobId=101\nTimeLimit=+",
		"JobId=101\nTimeLimit=-", "JobId=101\nTimeLimit=-1", "JobId=101\nTimeLimit=+UNLIMITED", "JobId=101\nTimeLimit=-0",
		"JobId=101\nTimeLimit=+999999999-0", "JobId=1\nNice=-10001", "JobId=1\nNice=10000", "JobId=1\nPriority=4294967296",
		"JobId=1\nArrayTaskThrottle=-1", "JobId=1\nDependency=afterok:2", "JobId=1\nDependency=", "JobId=1\nName=",
		"JobId=1\nPartition=\"\"", "JobId=0\nName=x", "JobId=\nName=x", "JobId=1", "Name=x", "JobId=1\nBogus=1",
		"NodeName=gpu[01-02]\nState=DRAIN\nReason=\"maintenance window\"", "Reason=fan failure\nState=Down\nNodeName=gpu03",
		"NodeName=gpu04\nState=UNDRAIN", "NodeName=n[0-99999999999]\nState=DOWN", "NodeName=\nState=DRAIN", "NodeName=x",
		"NodeName=x\nState=bogus", "=x", "x", "JobId=1\n=", "JobId=1\nTimeLimit=\x00", "NodeName=\xff\nReason=\xff",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, words string) {
		if longNumber.MatchString(words) {
			return
		}
		kvs, err := splitKVs(strings.Split(words, "\n"))
		if err != nil {
			return
		}
		ju, jerr := parseJobUpdate(kvs)
		if jerr == nil {
			checkJobUpdate(t, words, ju)
		}
		nu, nerr := parseNodeUpdate(kvs)
		if nerr == nil {
			if len(nu.Names) > hostlist.MaxHosts || nu.State == "" && nu.Reason == "" && !strings.Contains(strings.ToLower(words), "reason=") {
				t.Fatalf("parseNodeUpdate(%q) = %+v", words, nu)
			}
		}
	})
}

func checkJobUpdate(t *testing.T, words string, ju *jobUpdate) {
	t.Helper()
	if len(ju.ids) == 0 && len(ju.tasks) == 0 {
		t.Fatalf("parseJobUpdate(%q): no job", words)
	}
	for _, id := range ju.ids {
		if id == 0 {
			t.Fatalf("parseJobUpdate(%q): job 0", words)
		}
	}
	u := ju.u
	if u.TimeLimit != nil && api.CheckTimeLimit(*u.TimeLimit) != nil {
		t.Fatalf("parseJobUpdate(%q): time limit %d", words, *u.TimeLimit)
	}
	if r := ju.relLimit; r < -api.MaxTimeLimit || r > api.MaxTimeLimit || r != 0 && len(ju.tasks) > 0 {
		t.Fatalf("parseJobUpdate(%q): relative limit %d", words, r)
	}
	if u.Nice != nil && (*u.Nice < -10000 || *u.Nice > 10000) || u.ArrayThrottle != nil && *u.ArrayThrottle < 0 {
		t.Fatalf("parseJobUpdate(%q): %+v", words, u)
	}
	if u.Name != nil && *u.Name == "" || u.Partition != nil && *u.Partition == "" {
		t.Fatalf("parseJobUpdate(%q): empty name or partition", words)
	}
	if u.Dependency != nil && *u.Dependency != "" {
		if _, err := api.ParseDependency(*u.Dependency); err != nil {
			t.Fatalf("parseJobUpdate(%q): dependency %q: %v", words, *u.Dependency, err)
		}
	}
}
