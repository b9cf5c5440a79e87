package api

import "github.com/tide-hpc/tide/internal/jsonfast"

// The hot documents of the wire have JSON codecs generated from their
// structs (wirejson_gen.go, by internal/wiregen; TestGeneratedCodeIsCurrent
// fails until go generate has run after a change of the structs):
//
//   - sbatch writes its submission (SubmitRequest.AppendJSON) and reads
//     the answer (SubmitResponse.DecodeJSON): in a fresh process
//     encoding/json spends about 0.12 ms building its reflection caches
//     for these types before it writes a byte.
//   - The controller reads every submission (DecodeSubmitRequest):
//     encoding/json's reflection over JobSpec's fields was a tenth of its
//     CPU in a storm of small jobs, on the path every sbatch waits for;
//     and it stores every job as JSON at submit, start and end
//     (Job.AppendJSON, accounting's record column).
//   - The node protocol, two exchanges per job: tided writes its syncs
//     (NodeSyncRequest.AppendJSON) and reads the answers, launches and
//     their environments (DecodeNodeSyncResponse: encoding/json was a
//     tenth of tided's CPU); the controller the reverse; tided keeps each
//     launch as launch.json (LaunchSpec.AppendJSON); usage reports ride
//     on syncs and in the supervisor's status.json (NodeUsage,
//     DecodeNodeUsageJSON).
//   - The controller reads every job's record back from the store at
//     its start (DecodeJobJSON, accounting's record column):
//     encoding/json's reflection was two thirds of recovering 100,000
//     pending jobs.
//
// The encoders write exactly json.Marshal's bytes and fail where it
// fails, with its errors. The readers take what the encoders write (and
// any JSON spelled the same way) and hand anything else (another key
// case, an unknown key, a fraction, malformed input) to encoding/json
// from the start, for its exact result and error. The types do not
// implement json.Marshaler with them: the API elsewhere encodes with
// encoding/json as before. The match is with the default encoding/json;
// built with GOEXPERIMENT=jsonv2, json.Marshal writes invalid UTF-8 as
// a raw U+FFFD rather than \ufffd.
//
//go:generate go run ../../internal/wiregen/cmd/wiregen -out wirejson_gen.go -encode SubmitRequest,Job,NodeSyncRequest,NodeSyncResponse,LaunchSpec,NodeUsage -decode SubmitRequest:strict,SubmitResponse:whole,NodeSyncRequest:strict,NodeSyncResponse:stream,NodeUsage,Job

// DecodeSubmitRequest decodes data into r exactly as a json.Decoder with
// DisallowUnknownFields decodes its first value (what the controller
// asks of a request body), r being zero.
func DecodeSubmitRequest(data []byte, r *SubmitRequest) error {
	return decodeJSONSubmitRequest(data, r)
}

// DecodeJSON fills r from the controller's answer to a submission, as
// json.Unmarshal does.
func (r *SubmitResponse) DecodeJSON(data []byte) error {
	return decodeJSONSubmitResponse(data, r)
}

// DecodeNodeSyncRequest decodes data into r exactly as a json.Decoder
// with DisallowUnknownFields decodes its first value (what the
// controller asks of a request body), r being zero.
func DecodeNodeSyncRequest(data []byte, r *NodeSyncRequest) error {
	return decodeJSONNodeSyncRequest(data, r)
}

// DecodeNodeSyncResponse decodes data into r exactly as the node
// daemon's client decoded the controller's answer before: a json.Decoder
// (unknown fields allowed, so that an older node takes a newer
// controller's answer) decoding its first value, r being zero. An
// unknown field, allowed as it is, still sends the whole answer to
// encoding/json: the reader cannot tell it from a known field spelled
// in another case, which encoding/json accepts.
func DecodeNodeSyncResponse(data []byte, r *NodeSyncResponse) error {
	return decodeJSONNodeSyncResponse(data, r)
}

// DecodeNodeUsageJSON reads a NodeUsage object, as AppendJSON writes it,
// into the zero *u; false means the caller decodes its whole document
// with encoding/json instead (anything unusual).
func DecodeNodeUsageJSON(d *jsonfast.Decoder, u *NodeUsage) bool {
	return readJSONNodeUsage(d, u)
}

// DecodeJobJSON reads a Job object, as AppendJSON writes it, into the
// zero *j; false means the caller decodes its whole document with
// encoding/json instead (anything unusual), *j zeroed first.
func DecodeJobJSON(d *jsonfast.Decoder, j *Job) bool {
	return readJSONJob(d, j)
}
