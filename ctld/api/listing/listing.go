// Package listing encodes job listings for the wire: streamed JSON, and
// gob for the Go client (see MediaGob). It is apart from ctld/api so that
// binaries that never list jobs (the job supervisor) do not link gob.
package listing

import (
	"bufio"
	"encoding/gob"
	"encoding/json"
	"fmt"
	"github.com/tide-hpc/tide/ctld/api"
	"io"
)

// MediaGob is the media type a client may ask for (Accept header) on
// job listings. JSON stays the API's format; the Go client takes gob for
// listings because decoding 10,000 jobs from JSON costs ~100 ms, from
// gob ~13 ms, and squeue's latency is measured with that many pending.
const MediaGob = "application/x-tide-gob"

// NowHeader carries the controller's clock on gob listings, outside the
// body, so that the controller can serve an unchanged listing from cache.
const NowHeader = "X-Tide-Now"

// WriteJobsGob writes jobs as a gob stream: the count, then each job.
func WriteJobsGob(w io.Writer, jobs []api.Job) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	enc := gob.NewEncoder(bw)
	if err := enc.Encode(len(jobs)); err != nil {
		return err
	}
	for i := range jobs {
		if err := enc.Encode(&jobs[i]); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// ReadJobsGob reads a stream written by WriteJobsGob.
func ReadJobsGob(r io.Reader) ([]api.Job, error) {
	dec := gob.NewDecoder(bufio.NewReaderSize(r, 64<<10))
	var n int
	if err := dec.Decode(&n); err != nil {
		return nil, fmt.Errorf("decode listing header: %w", err)
	}
	if n < 0 || n > 10_000_000 {
		return nil, fmt.Errorf("decode listing: implausible job count %d", n)
	}
	jobs := make([]api.Job, n)
	for i := range jobs {
		if err := dec.Decode(&jobs[i]); err != nil {
			return nil, fmt.Errorf("decode listing job %d of %d: %w", i+1, n, err)
		}
	}
	return jobs, nil
}

// WriteJobList streams a JSON listing job by job, so the controller never
// holds the whole encoded answer in memory.
func WriteJobList(w io.Writer, l api.JobList) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	bw.WriteString(`{"jobs":[`)
	for i := range l.Jobs {
		if i > 0 {
			bw.WriteByte(',')
		}
		b, err := json.Marshal(&l.Jobs[i])
		if err != nil {
			return err
		}
		bw.Write(b)
	}
	now, _ := json.Marshal(l.Now)
	bw.WriteString(`],"now":`)
	bw.Write(now)
	bw.WriteString("}\n")
	return bw.Flush()
}

// ReadJobList decodes a JSON listing written by WriteJobList.
func ReadJobList(r io.Reader) (api.JobList, error) {
	var l api.JobList
	err := json.NewDecoder(r).Decode(&l)
	return l, err
}
