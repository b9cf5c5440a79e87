package ctld

import "testing"

func TestFloorPercent(t *testing.T) {
	tests := []struct {
		name string
		live uint64
		want int
	}{
		{name: "large heap keeps the base target", live: 100 << 20, want: 40},
		{name: "at the floor", live: 12 << 20 * 100 / 140, want: 40},
		{name: "small heap grows to the floor", live: 4 << 20, want: 200},
		{name: "tiny heap", live: 1 << 20, want: 1100},
		{name: "unknown", live: 0, want: 40},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := floorPercent(tt.live, 40, 12<<20); got != tt.want {
				t.Errorf("floorPercent(%d) = %d, want %d", tt.live, got, tt.want)
			}
		})
	}
}
