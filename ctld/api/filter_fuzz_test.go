package api

import (
	"net/url"
	"regexp"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestParseJobFilterTaskBound pins the bound on the tasks one filter
// lists: a few bytes of query ("7_[0-3999999]" twice) must be refused
// rather than listed in full by the controller.
func TestParseJobFilterTaskBound(t *testing.T) {
	_, err := ParseJobFilter(url.Values{"task": {"7_[0-3999999],8_[0-3999999]"}})
	wantInvalid(t, "two arrays of four million tasks", err)
	f, err := ParseJobFilter(url.Values{"task": {"7_[0-9],8_[0-9]"}})
	if err != nil || len(f.Tasks) != 20 {
		t.Fatalf("20 tasks: %d, %v", len(f.Tasks), err)
	}
}

// bigTaskRange matches a task list that names more ids than fuzzing can
// afford to list at each of its thousands of runs per second.
var bigTaskRange = regexp.MustCompile(`[0-9]{5}`)

// FuzzParseJobFilter checks the query of GET /api/v1/jobs and
// /api/v1/accounting/jobs: what ParseJobFilter accepts, Values writes
// back as a query it reads to the same filter (the client's encoder and
// the controller's decoder agree); every refusal is ErrInvalidArgument.
func FuzzParseJobFilter(f *testing.F) {
	for _, q := range []string{
		"", "id=1,2,3", "task=7_3,7_5", "task=7_[1-3,5]", "user=alice,bob&name=a,b&partition=gpu&account=x",
		"state=PD,R,COMPLETED,CANCELED", "since=2026-11-29T12:00:00Z&until=2026-11-30T12:00:00%2B01:00",
		"all=1", "all=true", "id=", "id=,", "id=x", "id=18446744073709551616", "task=7", "task=7_*",
		"task=7_[1-3%2]", "state=bogus", "since=yesterday", "since=0000-01-01T00:00:00%2B01:00",
		"since=9999-12-31T23:00:00-01:00", "since=2026-11-29T12:00:00.123456789Z", "user=,,&name=%00",
		"user=%ff", "id=1&id=2", "task=0_1", "task=7_-1", "task=7_[3-4:9223372036854775806]",
		"task=1_[0-9],1_[0-9]", "state=", "%zz", "since=2026-11-29T12:00:00Z&since=x",
		"cluster=a,b", "cluster=all", "cluster=,a,", "cluster=&user=x",
	} {
		f.Add(q)
	}
	f.Fuzz(func(t *testing.T, query string) {
		v, err := url.ParseQuery(query)
		if err != nil {
			return
		}
		if bigTaskRange.MatchString(v.Get("task")) {
			return // TestParseJobFilterTaskBound covers long task lists
		}
		fl, err := ParseJobFilter(v)
		if err != nil {
			wantInvalid(t, "ParseJobFilter("+query+")", err)
			return
		}
		if len(fl.Tasks) > MaxArrayTaskLimit {
			t.Fatalf("ParseJobFilter(%q): %d tasks", query, len(fl.Tasks))
		}
		for _, tm := range []time.Time{fl.Since, fl.Until} {
			if y := tm.UTC().Year(); y < 0 || y > 9999 {
				return // RFC 3339 cannot write the year in UTC
			}
		}
		enc := fl.Values()
		back, err := ParseJobFilter(enc)
		if err != nil {
			t.Fatalf("ParseJobFilter(%q) written as %q does not parse: %v", query, enc.Encode(), err)
		}
		if diff := cmp.Diff(fl, back); diff != "" {
			t.Fatalf("ParseJobFilter(%q) written as %q reads back otherwise (-first +back):\n%s", query, enc.Encode(), diff)
		}
	})
}
