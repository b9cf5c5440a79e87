package accounting

import (
	"bytes"
	"encoding/json"
	"maps"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/tide-hpc/tide/ctld/api"
)

// referenceEncodeJob is encodeJob as encoding/json writes it, the
// definition the hand-written encoder must match byte for byte.
func referenceEncodeJob(j *api.Job) ([]byte, error) {
	c := *j
	c.Script, c.Environment = "", nil
	c.SubmitTime, c.EligibleTime = utc(c.SubmitTime), utc(c.EligibleTime)
	c.StartTime, c.EndTime = utc(c.StartTime), utc(c.EndTime)
	c.LastSchedEval, c.BeginTime = utc(c.LastSchedEval), utc(c.BeginTime)
	return json.Marshal(jobRecord{Job: &c, SpecPriority: c.JobSpec.Priority})
}

// recordJobs are the jobs the record tests encode: fullJob sets every
// field (TestFullJobSetsEveryField keeps it so), the others the omitted
// and the awkward ones.
func recordJobs() map[string]*api.Job {
	zoneZero := time.Time{}.In(time.FixedZone("X", -3600))
	full := fullJob(7)
	fullNoPriority := fullJob(8)
	fullNoPriority.Priority = 0
	running := makeJob(9).running(at(3)).obj()
	running.Alloc = []api.NodeAlloc{{Node: "gpu01", CPUs: 8, MemoryMB: 64000, GPUs: []int{0}, Tasks: 1}}
	return map[string]*api.Job{
		"zero":                 {},
		"every field":          full,
		"no spec priority":     fullNoPriority,
		"pending":              makeJob(10).obj(),
		"running":              running,
		"ended":                makeJob(11).running(at(3)).ended(api.StateFailed, at(9)).obj(),
		"spec priority only":   {ID: 12, JobSpec: api.JobSpec{Priority: 1}},
		"zero times in a zone": {ID: 13, SubmitTime: zoneZero, EndTime: zoneZero, JobSpec: api.JobSpec{BeginTime: zoneZero}},
		"non-UTC times": {ID: 14, SubmitTime: at(0).In(time.FixedZone("", -(3*3600 + 20*60 + 15))),
			JobSpec: api.JobSpec{BeginTime: at(5).In(time.Local)},
			Share:   api.Share{ExpectedStart: at(7), Preempting: &api.Preempting{Since: at(1), Deadline: at(2)}}},
		"escapes": {ID: 15, User: "<b>&\u2028", Group: "é", Reason: "\"\\\n\x00",
			JobSpec: api.JobSpec{Name: "日本\x7f", WorkDir: "\t\x1f", Comment: "\u2029<"},
			Share:   api.Share{PrevNodes: []string{">"}}},
	}
}

// lossyRecordJobs encode as encoding/json does but do not round-trip:
// invalid UTF-8 comes back as U+FFFD, empty slices as nil.
func lossyRecordJobs() map[string]*api.Job {
	return map[string]*api.Job{
		"invalid UTF-8": {ID: 30, User: "\xff", Group: "a\xc3",
			JobSpec: api.JobSpec{Name: "\xed\xa0\x80", WorkDir: "\xf4\x90\x80\x80"},
			Share:   api.Share{PrevNodes: []string{"\x80"}}},
		"empty slices": {ID: 31, Alloc: []api.NodeAlloc{}, ArrayPending: api.TaskSet{},
			JobSpec: api.JobSpec{ScriptArgs: []string{}, Environment: []string{}},
			Share:   api.Share{PrevNodes: []string{}}},
	}
}

func TestEncodeJobMatchesEncodingJSON(t *testing.T) {
	jobs := recordJobs()
	maps.Copy(jobs, lossyRecordJobs())
	for name, j := range jobs {
		want, err := referenceEncodeJob(j)
		if err != nil {
			t.Fatalf("%s: json.Marshal: %v", name, err)
		}
		orig := *j
		got, err := encodeJob(j)
		if err != nil {
			t.Fatalf("%s: encodeJob: %v", name, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: encodeJob differs from json.Marshal\n got: %s\nwant: %s", name, got, want)
		}
		if diff := cmp.Diff(&orig, j); diff != "" {
			t.Errorf("%s: encodeJob modified the job (-before +after):\n%s", name, diff)
		}
	}
}

// TestEncodeJobRoundTrip: decodeJob gives back the job encodeJob wrote,
// less the spool and with its times in UTC.
func TestEncodeJobRoundTrip(t *testing.T) {
	for name, j := range recordJobs() {
		rec, err := encodeJob(j)
		if err != nil {
			t.Fatalf("%s: encodeJob: %v", name, err)
		}
		var got api.Job
		if err := decodeJob(rec, &got); err != nil {
			t.Fatalf("%s: decodeJob: %v\n%s", name, err, rec)
		}
		want := withoutSpool(j)
		// cmp compares times with Equal, so the zone change does not
		// show; the record's own zone is checked below.
		if diff := cmp.Diff(&want, &got); diff != "" {
			t.Errorf("%s: decodeJob(encodeJob(j)) (-want +got):\n%s", name, diff)
		}
		for field, tm := range map[string]time.Time{"SubmitTime": got.SubmitTime, "BeginTime": got.BeginTime,
			"StartTime": got.StartTime, "EndTime": got.EndTime} {
			if !tm.IsZero() && tm.Location() != time.UTC {
				t.Errorf("%s: %s location = %v, want UTC", name, field, tm.Location())
			}
		}
	}
}

// TestEncodeJobErrors: a time that RFC 3339 cannot spell fails encodeJob
// as it fails json.Marshal, with the same error.
func TestEncodeJobErrors(t *testing.T) {
	for _, set := range []func(*api.Job){
		func(j *api.Job) { j.SubmitTime = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) },
		func(j *api.Job) { j.EndTime = time.Date(0, 1, 1, 0, 0, 0, 0, time.FixedZone("", 3600)) },
		func(j *api.Job) {
			j.Preempting.Deadline = time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("", 24*3600))
		},
	} {
		j := fullJob(20)
		set(j)
		_, wantErr := referenceEncodeJob(j)
		rec, err := encodeJob(j)
		if wantErr == nil || err == nil || err.Error() != wantErr.Error() || rec != nil {
			t.Errorf("encodeJob = %q, %v; json.Marshal error %v", rec, err, wantErr)
		}
	}
}

// BenchmarkEncodeJob is a job's record at its end, the largest of the
// three a job writes; the allocations are the record itself.
func BenchmarkEncodeJob(b *testing.B) {
	j := makeJob(1).running(at(3)).ended(api.StateCompleted, at(63)).obj()
	j.Alloc = []api.NodeAlloc{{Node: "gpu01", CPUs: 8, MemoryMB: 64000, GPUs: []int{0, 1}, Tasks: 1, NUMA: []int{0}}}
	j.Launched, j.Cluster, j.EffPriority, j.Level = true, "tide", 5, 5
	for _, bc := range []struct {
		name string
		enc  func(*api.Job) ([]byte, error)
	}{{"hand", encodeJob}, {"encoding-json", referenceEncodeJob}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := bc.enc(j); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// referenceDecodeJob is decodeJob as encoding/json reads it, the
// definition the hand-written reader must match.
func referenceDecodeJob(rec []byte, j *api.Job) error {
	r := jobRecord{Job: j}
	if err := json.Unmarshal(rec, &r); err != nil {
		return err
	}
	j.JobSpec.Priority = r.SpecPriority
	return nil
}

// TestDecodeJobMatchesEncodingJSON: decodeJob reads every record
// encodeJob writes by hand (readRecord), and reads those and any other
// record (older spellings, hand edits, damage) as encoding/json does,
// failing where it fails.
func TestDecodeJobMatchesEncodingJSON(t *testing.T) {
	jobs := recordJobs()
	maps.Copy(jobs, lossyRecordJobs())
	recs := map[string][]byte{}
	for name, j := range jobs {
		rec, err := encodeJob(j)
		if err != nil {
			t.Fatalf("%s: encodeJob: %v", name, err)
		}
		recs[name] = rec
		var got api.Job
		if !readRecord(rec, &got) {
			t.Errorf("%s: readRecord refused encodeJob's record, which encoding/json would then read:\n%s", name, rec)
		}
	}
	full, _ := encodeJob(fullJob(7))
	body := full[:bytes.LastIndex(full, []byte(specPriorityKey))]
	for name, rec := range map[string]string{
		"spec priority first":       `{"spec_priority":3,"id":5,"priority":4}`,
		"spec priority only":        `{"spec_priority":3}`,
		"no spec priority":          `{"id":5,"priority":4}`,
		"spec priority zero":        string(body) + `,"spec_priority":0}`,
		"spec priority null":        string(body) + `,"spec_priority":null}`,
		"spec priority leading 0":   string(body) + `,"spec_priority":07}`,
		"spec priority too large":   string(body) + `,"spec_priority":4294967296}`,
		"spec priority negative":    string(body) + `,"spec_priority":-1}`,
		"spec priority fraction":    string(body) + `,"spec_priority":1.5}`,
		"spec priority twice":       string(body) + `,"spec_priority":1,"spec_priority":2}`,
		"spec priority spaced":      string(body) + `, "spec_priority": 2 }`,
		"spec priority in a string": `{"id":5,"comment":",\"spec_priority\":3}"}`,
		"key in another case":       `{"ID":5,"spec_priority":2}`,
		"unknown key":               `{"id":5,"future_field":[1,2],"spec_priority":2}`,
		"trailing space":            string(full) + " ",
		"trailing garbage":          string(full) + "x",
		"truncated":                 string(full[:len(full)/2]),
		"not an object":             `[1,2]`,
		"empty":                     ``,
		"just a brace":              `}`,
		"digits and a brace":        `1}`,
	} {
		recs[name] = []byte(rec)
	}
	for name, rec := range recs {
		var want, got api.Job
		wantErr := referenceDecodeJob(rec, &want)
		err := decodeJob(rec, &got)
		if (err == nil) != (wantErr == nil) || err != nil && err.Error() != wantErr.Error() {
			t.Errorf("%s: decodeJob error %v, encoding/json's %v\n%s", name, err, wantErr, rec)
			continue
		}
		if err != nil {
			continue
		}
		if diff := cmp.Diff(&want, &got); diff != "" {
			t.Errorf("%s: decodeJob differs from encoding/json (-json +decodeJob):\n%s\n%s", name, diff, rec)
		}
	}
}

// BenchmarkDecodeJob is a pending job's record read back at the
// controller's start.
func BenchmarkDecodeJob(b *testing.B) {
	j := makeJob(1).obj()
	j.Priority, j.EffPriority, j.Reason, j.ReasonDetail = 3, 5, api.ReasonResources, "0/2000 nodes: 2000 InsufficientGPU"
	rec, err := encodeJob(j)
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		dec  func([]byte, *api.Job) error
	}{{"hand", decodeJob}, {"encoding-json", referenceDecodeJob}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var got api.Job
				if err := bc.dec(rec, &got); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
