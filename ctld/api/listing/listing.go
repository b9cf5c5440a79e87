// Package listing encodes job listings for the wire: streamed JSON, and
// a compact binary form for the Go client (see MediaJobs and bin.go). It
// is apart from ctld/api so that binaries that never list jobs (the job
// supervisor) do not link the codec.
package listing

import (
	"bufio"
	"encoding/json"
	"github.com/tide-hpc/tide/ctld/api"
	"io"
)

// NowHeader carries the controller's clock on binary listings, outside
// the body, so that the controller can serve an unchanged listing from
// cache.
const NowHeader = "X-Tide-Now"

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
