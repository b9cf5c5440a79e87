package stepio

import (
	"encoding/json"
	"fmt"

	"github.com/tide-hpc/tide/ctld/api"
)

// Decode returns the grant inside sg without checking its credential:
// srun reads where to connect this way; node daemons use Verify.
func Decode(sg api.SignedGrant) (*api.StepGrant, error) {
	var g api.StepGrant
	if err := json.Unmarshal(sg.Body, &g); err != nil {
		return nil, fmt.Errorf("decode step grant: %w", err)
	}
	return &g, nil
}
