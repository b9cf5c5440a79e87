package accounting

import "testing"

func TestRebind(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{name: "bare", in: `SELECT a FROM t WHERE x = ? AND y IN (?, ?)`, want: `SELECT a FROM t WHERE x = $1 AND y IN ($2, $3)`},
		{name: "numbered", in: `VALUES (?1, (SELECT max(id) FROM e WHERE j = ?1), ?2)`, want: `VALUES ($1, (SELECT max(id) FROM e WHERE j = $1), $2)`},
		{name: "quoted", in: `SELECT '?', "a?b" FROM t WHERE k = ?`, want: `SELECT '?', "a?b" FROM t WHERE k = $1`},
		{name: "doubled quote", in: `SELECT 'it''s ?' WHERE k = ?`, want: `SELECT 'it''s ?' WHERE k = $1`},
		{name: "unterminated", in: `SELECT '?`, want: `SELECT '?`},
		{name: "none", in: `SELECT 1`, want: `SELECT 1`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := rebind(tt.in); got != tt.want {
				t.Errorf("rebind(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestPGText(t *testing.T) {
	tests := []struct {
		name string
		in   any
		want any
	}{
		{name: "plain", in: "gpu", want: "gpu"},
		{name: "NUL", in: "a\x00b", want: "a\uFFFDb"},
		{name: "not UTF-8", in: "\xe9t\xe9", want: "\uFFFDt\uFFFD"},
		{name: "integer", in: int64(7), want: int64(7)},
		{name: "bytes kept", in: []byte("a\x00"), want: []byte("a\x00")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := pgText(tt.in)
			if b, ok := tt.want.([]byte); ok {
				if string(got.([]byte)) != string(b) {
					t.Errorf("pgText(%q) = %q", tt.in, got)
				}
				return
			}
			if got != tt.want {
				t.Errorf("pgText(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}
