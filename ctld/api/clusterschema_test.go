package api

import (
	"errors"
	"strings"
	"testing"
)

func TestClusterSchema(t *testing.T) {
	long := strings.Repeat("a", maxClusterName)
	tests := []struct {
		name, cluster string
		want          string
		wantErr       string // in the error; "" for none
	}{
		{name: "lower case", cluster: "tide", want: "tide_tide"},
		{name: "digits and underscore", cluster: "gpu_2", want: "tide_gpu_2"},
		{name: "upper case folds", cluster: "East", want: "tide_east"},
		{name: "dash becomes underscore", cluster: "gpu-east-1", want: "tide_gpu_east_1"},
		{name: "leading digit", cluster: "1st", want: "tide_1st"},
		{name: "longest", cluster: long, want: "tide_" + long},
		{name: "empty", cluster: "", wantErr: "is empty"},
		{name: "too long", cluster: long + "b", wantErr: "longer than 58 characters"},
		{name: "all", cluster: "all", wantErr: "sacct -M's word"},
		{name: "ALL", cluster: "ALL", wantErr: "sacct -M's word"},
		{name: "dot", cluster: "a.b", wantErr: `holds "."`},
		{name: "space", cluster: "a b", wantErr: `holds " "`},
		{name: "quote", cluster: `a"b`, wantErr: `holds "\""`},
		{name: "not ASCII", cluster: "grün", wantErr: "letters, digits, '-' and '_'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ClusterSchema(tt.cluster)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, ErrInvalidArgument) {
					t.Fatalf("ClusterSchema(%q) = %q, %v; want an invalid-argument error with %q", tt.cluster, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ClusterSchema(%q) = %q, %v; want %q", tt.cluster, got, err, tt.want)
			}
		})
	}
}
