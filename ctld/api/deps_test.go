package api

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseDependency(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    *Dependency
		shown   string
		wantErr bool
	}{
		{name: "empty", in: "", want: nil, shown: ""},
		{name: "afterok", in: "afterok:12", want: &Dependency{Items: []DepItem{{Kind: DepAfterOK, JobID: 12, State: DepUnfulfilled}}},
			shown: "afterok:12(unfulfilled)"},
		{name: "several ids", in: "afterany:12:13", want: &Dependency{Items: []DepItem{
			{Kind: DepAfterAny, JobID: 12, State: DepUnfulfilled}, {Kind: DepAfterAny, JobID: 13, State: DepUnfulfilled}}},
			shown: "afterany:12(unfulfilled),afterany:13(unfulfilled)"},
		{name: "all of", in: "afterok:1,afternotok:2", want: &Dependency{Items: []DepItem{
			{Kind: DepAfterOK, JobID: 1, State: DepUnfulfilled}, {Kind: DepAfterNotOK, JobID: 2, State: DepUnfulfilled}}},
			shown: "afterok:1(unfulfilled),afternotok:2(unfulfilled)"},
		{name: "any of", in: "afterok:1?afterany:2", want: &Dependency{Any: true, Items: []DepItem{
			{Kind: DepAfterOK, JobID: 1, State: DepUnfulfilled}, {Kind: DepAfterAny, JobID: 2, State: DepUnfulfilled}}},
			shown: "afterok:1(unfulfilled)?afterany:2(unfulfilled)"},
		{name: "after with delay", in: "after:5+10", want: &Dependency{Items: []DepItem{{Kind: DepAfter, JobID: 5, Minutes: 10, State: DepUnfulfilled}}},
			shown: "after:5+10(unfulfilled)"},
		{name: "array task", in: "afterok:7_3", want: &Dependency{Items: []DepItem{{Kind: DepAfterOK, JobID: 7, Task: 3, HasTask: true, State: DepUnfulfilled}}},
			shown: "afterok:7_3(unfulfilled)"},
		{name: "aftercorr and singleton", in: "aftercorr:7,SINGLETON", want: &Dependency{Items: []DepItem{
			{Kind: DepAfterCorr, JobID: 7, State: DepUnfulfilled}, {Kind: DepSingleton, State: DepUnfulfilled}}},
			shown: "aftercorr:7(unfulfilled),singleton(unfulfilled)"},
		{name: "states read back", in: "afterok:1(failed),afterany:2(fulfilled)", want: &Dependency{Items: []DepItem{
			{Kind: DepAfterOK, JobID: 1, State: DepFailed}, {Kind: DepAfterAny, JobID: 2, State: DepFulfilled}}},
			shown: "afterok:1(failed),afterany:2(fulfilled)"},
		{name: "mixed separators", in: "afterok:1,afterok:2?afterok:3", wantErr: true},
		{name: "unknown kind", in: "before:1", wantErr: true},
		{name: "no id", in: "afterok", wantErr: true},
		{name: "delay only for after", in: "afterok:1+5", wantErr: true},
		{name: "bad state", in: "afterok:1(maybe)", wantErr: true},
		{name: "singleton with id", in: "singleton:4", wantErr: true},
		{name: "trailing separator", in: "afterok:1,", wantErr: true},
		{name: "zero id", in: "afterok:0", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseDependency(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if got.String() != tt.shown {
				t.Errorf("String = %q, want %q", got.String(), tt.shown)
			}
		})
	}
}

func TestDependencyState(t *testing.T) {
	item := func(s DepState) DepItem { return DepItem{Kind: DepAfterOK, JobID: 1, State: s} }
	tests := []struct {
		name  string
		any   bool
		items []DepState
		want  DepState
	}{
		{name: "all fulfilled", items: []DepState{DepFulfilled, DepFulfilled}, want: DepFulfilled},
		{name: "all waits for each", items: []DepState{DepFulfilled, DepUnfulfilled}, want: DepUnfulfilled},
		{name: "all fails on one", items: []DepState{DepFailed, DepUnfulfilled}, want: DepFailed},
		{name: "any on one", any: true, items: []DepState{DepFailed, DepFulfilled}, want: DepFulfilled},
		{name: "any waits while one may", any: true, items: []DepState{DepFailed, DepUnfulfilled}, want: DepUnfulfilled},
		{name: "any fails when all failed", any: true, items: []DepState{DepFailed, DepFailed}, want: DepFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := &Dependency{Any: tt.any}
			for _, s := range tt.items {
				d.Items = append(d.Items, item(s))
			}
			if got := d.State(); got != tt.want {
				t.Errorf("State = %s, want %s", got, tt.want)
			}
		})
	}
}
