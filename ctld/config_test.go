package ctld

import (
	"os"
	"strings"
	"testing"
)

func TestReadKey(t *testing.T) {
	dir := t.TempDir()
	p := dir + "/key"
	if err := os.WriteFile(p, []byte("0123456789abcdef0123\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readKey(p); err == nil || !strings.Contains(err.Error(), "readable by others") {
		t.Fatalf("world-readable key accepted: %v", err)
	}
	os.Chmod(p, 0o600)
	if k, err := readKey(p); err != nil || k != "0123456789abcdef0123" {
		t.Fatalf("readKey = %q, %v", k, err)
	}
	os.WriteFile(p, []byte("short"), 0o600)
	if _, err := readKey(p); err == nil {
		t.Fatal("short key accepted")
	}
}
