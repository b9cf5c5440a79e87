package jobfmt

import (
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/sched"
)

var shareNow = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

func testSharing() *Sharing {
	return NewSharing(api.QueueList{
		Queues: []api.QueueStatus{{Name: "moba", Guaranteed: 16, Cap: 48}},
		QOS: []api.QOSStatus{
			{Name: "training", MinLevel: 3, MaxLevel: 8, DefaultLevel: 5},
			{Name: "batch", MinLevel: 1, MaxLevel: 6, DefaultLevel: 3},
		},
		DefaultQOS:    "batch",
		StarvationAge: 1800,
	})
}

func TestSharingLevels(t *testing.T) {
	pending := func(qos string, asked uint32, level int, eligible, starving time.Time) *api.Job {
		j := &api.Job{State: api.StatePending, EligibleTime: eligible, SubmitTime: eligible}
		j.QOS, j.Priority, j.Level, j.Starving = qos, asked, level, starving
		return j
	}
	at := func(h, m int) time.Time { return time.Date(2026, 11, 30, h, m, 0, 0, time.UTC) }
	tests := []struct {
		name      string
		sharing   *Sharing
		job       *api.Job
		wantLevel int
		wantAsked bool
		wantAged  int
		wantClass string
	}{
		{name: "controller level wins", sharing: testSharing(), job: pending("training", 7, 6, at(9, 50), time.Time{}),
			wantLevel: 6, wantAsked: true, wantAged: 6, wantClass: "training"},
		{name: "asked level", sharing: testSharing(), job: pending("training", 7, 0, at(9, 50), time.Time{}),
			wantLevel: 7, wantAsked: true, wantAged: 7, wantClass: "training"},
		{name: "asked level clamped to the class", sharing: testSharing(), job: pending("training", 10, 0, at(9, 50), time.Time{}),
			wantLevel: 8, wantAsked: true, wantAged: 8, wantClass: "training"},
		{name: "class default", sharing: testSharing(), job: pending("training", 0, 0, at(9, 50), time.Time{}),
			wantLevel: 5, wantAged: 5, wantClass: "training"},
		{name: "unknown class takes the default class", sharing: testSharing(), job: pending("gold", 0, 0, at(9, 50), time.Time{}),
			wantLevel: 3, wantAged: 3, wantClass: "batch"},
		{name: "no queue answer", sharing: nil, job: pending("", 0, 0, at(9, 50), time.Time{}),
			wantLevel: 5, wantAged: 5, wantClass: ""},
		{name: "just starving", sharing: testSharing(), job: pending("training", 0, 5, at(9, 0), at(9, 30)),
			wantLevel: 5, wantAged: 6, wantClass: "training"},
		{name: "starving two ages", sharing: testSharing(), job: pending("training", 0, 5, at(8, 30), at(9, 0)),
			wantLevel: 5, wantAged: 7, wantClass: "training"},
		{name: "aging caps at 20", sharing: testSharing(), job: pending("training", 0, 5, at(0, 0), at(0, 30)),
			wantLevel: 5, wantAged: 20, wantClass: "training"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lvl, asked := tt.sharing.Level(tt.job)
			if lvl != tt.wantLevel || asked != tt.wantAsked {
				t.Errorf("Level = %d, %v; want %d, %v", lvl, asked, tt.wantLevel, tt.wantAsked)
			}
			if got := tt.sharing.AgedLevel(tt.job, shareNow); got != tt.wantAged {
				t.Errorf("AgedLevel = %d, want %d", got, tt.wantAged)
			}
			if got := tt.sharing.ClassName(tt.job); got != tt.wantClass {
				t.Errorf("ClassName = %q, want %q", got, tt.wantClass)
			}
		})
	}
}

// TestSharingAgreesWithScheduler checks that the CLI shows the levels
// the scheduler orders by: same level, same aged level for a job whose
// Starving the controller set from the scheduler's answer.
func TestSharingAgreesWithScheduler(t *testing.T) {
	sh := testSharing()
	classes := map[string]*sched.QOSInfo{}
	for _, q := range sh.List.QOS {
		classes[q.Name] = &sched.QOSInfo{Name: q.Name, MinLevel: q.MinLevel, MaxLevel: q.MaxLevel, DefaultLevel: q.DefaultLevel}
	}
	age := sh.StarvationAge()
	for _, qos := range []string{"training", "batch", "gold", ""} {
		for _, asked := range []uint32{0, 1, 4, 9} {
			for waited := time.Duration(0); waited < 5*time.Hour; waited += 7 * time.Minute {
				j := &api.Job{State: api.StatePending, EligibleTime: shareNow.Add(-waited)}
				j.QOS, j.Priority = qos, asked
				q := classes[qos]
				if q == nil {
					q = classes[sh.List.DefaultQOS]
				}
				wantLevel := sched.JobLevel(j, q)
				wantAged, since := sched.AgedLevel(wantLevel, j, shareNow, age)
				j.Starving = since
				if got, _ := sh.Level(j); got != wantLevel {
					t.Fatalf("qos %q asked %d: level %d, scheduler %d", qos, asked, got, wantLevel)
				}
				if got := sh.AgedLevel(j, shareNow); got != wantAged {
					t.Fatalf("qos %q asked %d waited %s: aged level %d, scheduler %d", qos, asked, waited, got, wantAged)
				}
			}
		}
	}
}

func TestReasonWithDetail(t *testing.T) {
	tests := []struct {
		name string
		job  api.Job
		want string
	}{
		{name: "word and decisive detail",
			job:  api.Job{State: api.StatePending, Reason: api.ReasonQuotaExceeded, ReasonDetail: "queue moba 48/48 GPUs; Starving since 09:00"},
			want: "QuotaExceeded: queue moba 48/48 GPUs"},
		{name: "detail already names the word",
			job:  api.Job{State: api.StatePending, Reason: api.ReasonPriority, ReasonDetail: "Priority: 3 jobs ahead"},
			want: "Priority: 3 jobs ahead"},
		{name: "no detail", job: api.Job{State: api.StatePending, Reason: api.ReasonBeginTime}, want: "BeginTime"},
		{name: "running job", job: api.Job{State: api.StateRunning, Reason: api.ReasonPreempted, ReasonDetail: "x"}, want: "None"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ReasonWithDetail(&tt.job); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}
