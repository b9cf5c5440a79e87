package api

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestSignalCommandTargetsTravel checks that each target of a signal
// command (the batch shell's process group, the batch shell alone, the
// job's steps) survives the hand-written node sync encoding, which must
// write and read what encoding/json does.
func TestSignalCommandTargetsTravel(t *testing.T) {
	want := &NodeSyncResponse{Signals: []SignalCommand{
		{JobRef: JobRef{JobID: 1}, Signal: 10},
		{JobRef: JobRef{JobID: 2, Restart: 1}, Signal: 12, BatchOnly: true},
		{JobRef: JobRef{JobID: 3, Restart: 2}, Signal: 12, Steps: true},
		{JobRef: JobRef{JobID: 4}, Kill: true},
	}}
	checkSyncResponseJSON(t, "signal targets", want)
	data, err := want.AppendJSON(nil)
	if err != nil {
		t.Fatal(err)
	}
	var got NodeSyncResponse
	if err := DecodeNodeSyncResponse(data, &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, &got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}
