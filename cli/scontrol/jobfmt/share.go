package jobfmt

import (
	"strings"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// DefaultStarvationAge is the controller's aging threshold when its
// queue answer does not give one.
const DefaultStarvationAge = 30 * time.Minute

// maxAgedLevel is the scheduler's cap on aging (ctld/sched.AgedLevel).
const maxAgedLevel = 20

// noClassLevel is the level of a job with neither a level nor a class
// (ctld/sched.JobLevel).
const noClassLevel = 5

// Sharing answers the questions the commands ask about a job's place in
// the sharing machinery from the controller's queue answer, computed as
// the scheduler computes them: the job's class, its level and where it
// came from, its aged level, and its queue's use. The zero value (no
// queues, no classes) is ready to use.
type Sharing struct {
	List   api.QueueList
	queues map[string]*api.QueueStatus
	qos    map[string]*api.QOSStatus
}

// NewSharing indexes a queue answer.
func NewSharing(l api.QueueList) *Sharing {
	s := &Sharing{List: l, queues: map[string]*api.QueueStatus{}, qos: map[string]*api.QOSStatus{}}
	for i := range l.Queues {
		s.queues[l.Queues[i].Name] = &l.Queues[i]
	}
	for i := range l.QOS {
		s.qos[l.QOS[i].Name] = &l.QOS[i]
	}
	return s
}

// StarvationAge is the aging threshold (never zero; negative when the
// controller turned aging off).
func (s *Sharing) StarvationAge() time.Duration {
	if s == nil || s.List.StarvationAge == 0 {
		return DefaultStarvationAge
	}
	return time.Duration(s.List.StarvationAge) * time.Second
}

// Queue returns the job's queue (its account), or nil when it has none
// or the controller does not know it.
func (s *Sharing) Queue(name string) *api.QueueStatus {
	if s == nil || name == "" {
		return nil
	}
	return s.queues[name]
}

// Class returns the class a job of QOS name gets: that class, else the
// default class; nil when neither is known.
func (s *Sharing) Class(name string) *api.QOSStatus {
	if s == nil {
		return nil
	}
	if q := s.qos[name]; q != nil {
		return q
	}
	return s.qos[s.List.DefaultQOS]
}

// ClassName is the class name a job runs under ("" when none is known).
func (s *Sharing) ClassName(j *api.Job) string {
	if q := s.Class(j.QOS); q != nil {
		return q.Name
	}
	return j.QOS
}

// Level is the job's level before aging and whether the job asked for
// it (--priority) rather than taking its class's default: Job.Level
// when the controller set it, else the asked level, else the class
// default (5 without a class), kept inside the class's range.
func (s *Sharing) Level(j *api.Job) (level int, asked bool) {
	asked = j.JobSpec.Priority >= api.MinLevel && j.JobSpec.Priority <= api.MaxLevel
	q := s.Class(j.QOS)
	level = noClassLevel
	switch {
	case j.Share.Level != 0:
		return j.Share.Level, asked
	case asked:
		level = int(j.JobSpec.Priority)
	case q != nil && q.DefaultLevel > 0:
		level = q.DefaultLevel
	}
	if q != nil {
		if q.MinLevel > 0 && level < q.MinLevel {
			level = q.MinLevel
		}
		if q.MaxLevel > 0 && level > q.MaxLevel {
			level = q.MaxLevel
		}
	}
	return level, asked
}

// AgedLevel is the level the scheduler orders a starving job by: one
// more per full starvation age waited since the job became Starving, up
// to 20 (a job that is not starving keeps its level).
func (s *Sharing) AgedLevel(j *api.Job, now time.Time) int {
	level, _ := s.Level(j)
	age := s.StarvationAge()
	if j.Starving.IsZero() || age <= 0 || now.Before(j.Starving) {
		return level
	}
	return min(level+int(now.Sub(j.Starving)/age), max(level, maxAgedLevel))
}

// Waited is how long a pending job has waited since it became eligible
// (since its submission when it never was); 0 for other jobs.
func Waited(j *api.Job, now time.Time) time.Duration {
	if j.State != api.StatePending {
		return 0
	}
	from := j.EligibleTime
	if from.IsZero() {
		from = j.SubmitTime
	}
	if from.IsZero() || now.Before(from) {
		return 0
	}
	return now.Sub(from)
}

// DecisiveDetail is the first part of a ReasonDetail: the controller
// joins the decisive detail and every further reason with "; ".
func DecisiveDetail(detail string) string {
	d, _, _ := strings.Cut(detail, "; ")
	return strings.TrimSpace(d)
}

// ReasonWithDetail is the reason word and, when there is one, its
// decisive detail: "QuotaExceeded: queue moba 48/48 GPUs".
func ReasonWithDetail(j *api.Job) string {
	word := Reason(j)
	d := DecisiveDetail(j.ReasonDetail)
	if d == "" || j.State.Active() {
		return word
	}
	if strings.HasPrefix(d, word) {
		return d
	}
	return word + ": " + d
}
