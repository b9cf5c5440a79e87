package stepd

import (
	"testing"
	"time"
)

// TestLingerUntil: a killed job's cgroup waits for its steps' tasks
// until the kill wait of its latest kill marker is over, never past
// maxLinger, and not at all for a job that was not killed.
func TestLingerUntil(t *testing.T) {
	end := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *KillMarker { return &KillMarker{Time: end.Add(-time.Second), KillAt: end.Add(d)} }
	tests := []struct {
		name string
		m    Markers
		want time.Time
	}{
		{name: "not killed", m: Markers{}, want: time.Time{}},
		{name: "cancelled", m: Markers{Killed: at(30 * time.Second)}, want: end.Add(30 * time.Second)},
		{name: "time limit", m: Markers{TimedOut: at(5 * time.Second)}, want: end.Add(5 * time.Second)},
		{name: "the later of the two", m: Markers{Killed: at(2 * time.Second), TimedOut: at(9 * time.Second)}, want: end.Add(9 * time.Second)},
		{name: "kill wait already over", m: Markers{Killed: at(-time.Second)}, want: time.Time{}},
		{name: "bounded", m: Markers{Killed: at(time.Hour)}, want: end.Add(maxLinger)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := lingerUntil(tt.m, end); !got.Equal(tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}
