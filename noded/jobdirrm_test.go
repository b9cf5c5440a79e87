package noded

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/tide-hpc/tide/noded/stepd"
)

func TestRemoveJobDir(t *testing.T) {
	for _, tt := range []struct {
		name  string
		files []string
	}{
		{"a finished job's files", []string{stepd.FileLaunch, stepd.FileExec, stepd.FileScript, stepd.FilePID, stepd.FileStatus, dirCheckpoint + "/"}},
		{"every known file", []string{
			fileLaunch, fileExec, fileScript, filePID, fileStatus, fileStepdPID, fileStepdLog,
			markKilled, markTimedOut, markSignalled, markForgotten, stepd.MarkFrozen,
			filepath.Join(dirCheckpoint, fileCheckpoint)}},
		{"an empty checkpoint directory", []string{fileLaunch, dirCheckpoint + "/"}},
		{"an interrupted write's temporary file", []string{stepd.FileLaunch, "." + stepd.FileStatus + ".tmp123"}},
		{"a checkpoint the job left", []string{stepd.FileExec, dirCheckpoint + "/", dirCheckpoint + "/model.pt"}},
		{"empty", nil},
		{"more entries than one read returns", manyFiles(300)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "7.0")
			if err := os.Mkdir(dir, 0o711); err != nil {
				t.Fatal(err)
			}
			for _, f := range tt.files {
				p := filepath.Join(dir, f)
				if f[len(f)-1] == '/' {
					if err := os.MkdirAll(p, 0o700); err != nil {
						t.Fatal(err)
					}
					continue
				}
				if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if err := removeJobDir(dir); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Lstat(dir); !os.IsNotExist(err) {
				t.Fatalf("directory still there: %v", err)
			}
			if err := removeJobDir(dir); err != nil {
				t.Errorf("removing a removed directory: %v", err)
			}
		})
	}
}

// manyFiles names n files with long names (well over one 4 KiB
// directory read).
func manyFiles(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("file-with-a-rather-long-name-to-fill-the-directory-buffer-%04d", i)
	}
	return out
}
