package stepcred

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

const key = "test-cluster-key-0123456789"

func grant(now time.Time) *api.StepGrant {
	return &api.StepGrant{JobID: 7, StepID: 1, UserID: 1000, GroupID: 1000, User: "alice",
		Expires: now.Add(time.Hour), JobNodes: []string{"gpu01", "gpu02"}, NTasks: 2,
		Nodes: []api.StepNode{{Name: "gpu01", Addr: "127.0.0.1:1", Ranks: []int{0}}, {Name: "gpu02", Addr: "127.0.0.1:2", Ranks: []int{1}}},
		Argv:  []string{"hostname"}, Cwd: "/tmp"}
}

func TestVerify(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	good, err := Sign(key, grant(now))
	if err != nil {
		t.Fatal(err)
	}
	tampered := good
	tampered.Body = bytes.Replace(good.Body, []byte(`"user_id":1000`), []byte(`"user_id":0`), 1)
	if bytes.Equal(tampered.Body, good.Body) {
		t.Fatal("test grant does not contain the uid to tamper with")
	}
	badHex := good
	badHex.Cred = "zz" + good.Cred[2:]
	tests := []struct {
		name     string
		sg       api.SignedGrant
		key      string
		node     string
		now      time.Time
		wantErr  error
		wantNode int
	}{
		{name: "valid first node", sg: good, key: key, node: "gpu01", now: now, wantNode: 0},
		{name: "valid second node", sg: good, key: key, node: "gpu02", now: now, wantNode: 1},
		{name: "tampered body refused", sg: tampered, key: key, node: "gpu01", now: now, wantErr: ErrBadCredential},
		{name: "other key refused", sg: good, key: "another-key-0123456789", node: "gpu01", now: now, wantErr: ErrBadCredential},
		{name: "garbage credential refused", sg: badHex, key: key, node: "gpu01", now: now, wantErr: ErrBadCredential},
		{name: "expired refused", sg: good, key: key, node: "gpu01", now: now.Add(time.Hour), wantErr: ErrExpired},
		{name: "other node refused", sg: good, key: key, node: "gpu03", now: now, wantErr: ErrWrongNode},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, i, err := Verify(tt.key, tt.sg, tt.node, tt.now)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if i != tt.wantNode || g.JobID != 7 || g.User != "alice" {
				t.Fatalf("got node %d grant %+v", i, g)
			}
		})
	}
}
