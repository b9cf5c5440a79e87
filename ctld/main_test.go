package ctld

import (
	"fmt"
	"os"
	"testing"

	"github.com/tide-hpc/tide/internal/pgtest"
)

// pgServer is one private PostgreSQL server for the package's tests of
// PostgreSQL stores, started on first use (Database skips a test when
// PostgreSQL is not installed) and stopped after them.
var pgServer pgtest.Lazy

func TestMain(m *testing.M) {
	code := m.Run()
	if err := pgServer.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stop the test PostgreSQL:", err)
		code = 1
	}
	os.Exit(code)
}
