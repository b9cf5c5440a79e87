package client

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/ctld/api"
)

// TestClusterUsage: the usage of another cluster is asked with
// &cluster=, and taken only from an answer that names that cluster; a
// controller that ignores the parameter (one from before clusters'
// usage) answers its own jobs of the same ids, which must read as "not
// served", never as the other cluster's.
func TestClusterUsage(t *testing.T) {
	own := api.StepUsage{JobID: 7, StepID: 0, UserUsec: 1}
	theirs := api.StepUsage{JobID: 7, StepID: 0, UserUsec: 2}
	tests := []struct {
		name      string
		cluster   string
		old       bool // the controller ignores cluster=
		wantQuery string
		want      []api.StepUsage
		wantErr   error
	}{
		{name: "own", cluster: "", wantQuery: "job=7&job=9", want: []api.StepUsage{own}},
		{name: "another", cluster: "west", wantQuery: "cluster=west&job=7&job=9", want: []api.StepUsage{theirs}},
		{name: "own from an older controller", cluster: "", old: true, wantQuery: "job=7&job=9", want: []api.StepUsage{own}},
		{name: "another from an older controller", cluster: "west", old: true, wantQuery: "cluster=west&job=7&job=9",
			wantErr: api.ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var query string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/api/v1/accounting/usage" {
					http.NotFound(w, r)
					return
				}
				query = r.URL.Query().Encode()
				l := api.UsageList{Usage: []api.StepUsage{own}}
				if cl := r.URL.Query().Get("cluster"); cl != "" && !tt.old {
					l = api.UsageList{Usage: []api.StepUsage{theirs}, Cluster: cl}
				}
				json.NewEncoder(w).Encode(l)
			}))
			defer srv.Close()
			c := NewTCP(strings.TrimPrefix(srv.URL, "http://"), "k")
			defer c.Close()
			got, err := c.ClusterUsage(context.Background(), tt.cluster, []uint64{7, 9})
			if query != tt.wantQuery {
				t.Errorf("query %q, want %q", query, tt.wantQuery)
			}
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) || got != nil {
					t.Errorf("ClusterUsage(%q) = %+v, %v; want error %v", tt.cluster, got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ClusterUsage(%q) (-want +got):\n%s", tt.cluster, diff)
			}
		})
	}
}
