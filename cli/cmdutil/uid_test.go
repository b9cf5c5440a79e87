package cmdutil

import (
	"context"
	"errors"
	"testing"

	"github.com/tide-hpc/tide/ctld/api"
)

// clusterOnly answers Cluster as the controller would for a token's
// user; the other calls are not used.
type clusterOnly struct {
	API
	uid   uint32
	err   error
	calls int
}

func (c *clusterOnly) Cluster(context.Context) (api.ClusterInfo, error) {
	c.calls++
	return api.ClusterInfo{CallerUID: c.uid}, c.err
}

func TestCallerUID(t *testing.T) {
	tests := []struct {
		name   string
		env    map[string]string
		ctlErr error
		apiErr error
		want   int
		asks   int
	}{
		{name: "socket: the process", want: 1000},
		{name: "MUNGE: the process", env: map[string]string{"TIDE_CONTROLLER": "ctl:6820"}, want: 1000},
		{name: "token: the controller says", env: map[string]string{"TIDE_CONTROLLER": "ctl:6820", "TIDE_JWT": "a.b.c"}, want: 65534, asks: 1},
		{name: "token, controller down: the process", env: map[string]string{"TIDE_CONTROLLER": "ctl:6820", "TIDE_JWT": "a.b.c"},
			ctlErr: errors.New("unreachable"), want: 1000, asks: 1},
		{name: "token, bad environment: the process", env: map[string]string{"TIDE_CONTROLLER": "ctl:6820", "TIDE_JWT": "a.b.c"},
			apiErr: errors.New("TIDE_JWT is not a JWT"), want: 1000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctl := &clusterOnly{uid: 65534, err: tt.ctlErr}
			uid := callerUID(func(k string) string { return tt.env[k] }, func() int { return 1000 },
				func() (API, error) { return ctl, tt.apiErr })
			for range 2 { // asked once, then remembered
				if got := uid(); got != tt.want {
					t.Errorf("uid %d, want %d", got, tt.want)
				}
			}
			if ctl.calls != tt.asks {
				t.Errorf("controller asked %d times, want %d", ctl.calls, tt.asks)
			}
		})
	}
}
