package api

import "testing"

func TestParseTimeLimit(t *testing.T) {
	tests := []struct {
		in      string
		want    int64
		wantErr bool
	}{
		{"5", 300, false},
		{"0:05", 5, false},
		{"1:00", 60, false},
		{"1:02:03", 3723, false},
		{"2-3", 2*86400 + 3*3600, false},
		{"2-3:04", 2*86400 + 3*3600 + 4*60, false},
		{"2-3:04:05", 2*86400 + 3*3600 + 4*60 + 5, false},
		{"UNLIMITED", Infinite, false},
		{"infinite", Infinite, false},
		{"-1", Infinite, false},
		{"", 0, true},
		{"abc", 0, true},
		{"1:2:3:4", 0, true},
		{"1-2:3:4:5", 0, true},
		{"0", 0, true},
		{"-5", 0, true},
	}
	for _, tt := range tests {
		got, err := ParseTimeLimit(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParseTimeLimit(%q) = %d, %v; want %d, err=%v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestFormatElapsed(t *testing.T) {
	tests := []struct {
		secs       int64
		short, lng string
	}{
		{0, "0:00", "00:00:00"},
		{10, "0:10", "00:00:10"},
		{3723, "1:02:03", "01:02:03"},
		{90061, "1-01:01:01", "1-01:01:01"},
	}
	for _, tt := range tests {
		if got := FormatElapsed(tt.secs); got != tt.short {
			t.Errorf("FormatElapsed(%d) = %q, want %q", tt.secs, got, tt.short)
		}
		if got := FormatElapsedLong(tt.secs); got != tt.lng {
			t.Errorf("FormatElapsedLong(%d) = %q, want %q", tt.secs, got, tt.lng)
		}
	}
	if got := FormatTimeLimit(Infinite); got != "UNLIMITED" {
		t.Errorf("FormatTimeLimit(Infinite) = %q", got)
	}
}

func TestParseMemMB(t *testing.T) {
	tests := []struct {
		in      string
		want    int64
		wantErr bool
	}{
		{"100", 100, false}, {"100M", 100, false}, {"4G", 4096, false}, {"1T", 1 << 20, false},
		{"512K", 1, false}, {"1.5G", 1536, false}, {"0", 0, false},
		{"", 0, true}, {"abc", 0, true}, {"-1G", 0, true}, {"4X", 0, true},
	}
	for _, tt := range tests {
		got, err := ParseMemMB(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParseMemMB(%q) = %d, %v; want %d, err=%v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
	if got := FormatMemMB(16000); got != "16000M" {
		t.Errorf("FormatMemMB(16000) = %q", got)
	}
	if got := FormatMemMB(512 * 1024); got != "512G" {
		t.Errorf("FormatMemMB(512G) = %q", got)
	}
}
