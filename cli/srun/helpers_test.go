package srun

import (
	"encoding/json"
	"os"
	"path/filepath"
)

func readFile(dir, name string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, name))
	return string(b), err
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
