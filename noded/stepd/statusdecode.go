package stepd

import (
	"fmt"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/internal/jsonfast"
)

// ReadStatus reads a job directory's status.json, as ReadJSON into a
// zero Status would.
func ReadStatus(path string) (Status, error) {
	data, err := ReadFile(path)
	if err != nil {
		return Status{}, err
	}
	var st Status
	if err := decodeStatus(data, &st); err != nil {
		return Status{}, fmt.Errorf("decode %s: %w", path, err)
	}
	return st, nil
}

// decodeStatus decodes data into st as json.Unmarshal into a zero Status
// does. tided reads one per finished job, and encoding/json's reflection
// (and its time parsing through it) was a few percent of tided's CPU
// for short jobs; what the supervisor writes is read by hand, anything
// else goes to json.Unmarshal from the start (see jsonfast).
func decodeStatus(data []byte, st *Status) error {
	return jsonfast.Decode(data, st, jsonfast.Whole, statusFields)
}

// statusByHand reports whether data is read by hand, not by the
// fallback (the tests check what the supervisor writes is).
func statusByHand(data []byte, out *Status) bool {
	d := jsonfast.New(data)
	return statusFields(d, out) && d.End()
}

// statusFields reads a Status object.
func statusFields(d *jsonfast.Decoder, out *Status) bool {
	return d.Object(func(key []byte) bool {
		switch string(key) {
		case "exit":
			return d.Object(func(k []byte) bool {
				switch string(k) {
				case "code":
					return d.Int(&out.Exit.Code)
				case "signal":
					return d.Int(&out.Exit.Signal)
				}
				return false
			})
		case "start_time":
			return d.Time(&out.StartTime)
		case "end_time":
			return d.Time(&out.EndTime)
		case "error":
			return d.String(&out.Error)
		case "oom":
			return d.Bool(&out.OOM)
		case "launch_failed":
			return d.Bool(&out.LaunchFailed)
		case "usage":
			if out.Usage != nil {
				return false
			}
			out.Usage = &api.NodeUsage{}
			return api.DecodeNodeUsageJSON(d, out.Usage)
		}
		return false
	})
}
