package accounting

import (
	"database/sql/driver"
	"strconv"
	"strings"
	"unicode/utf8"
)

// dialect is the SQL flavour of a store's database. The statements are
// written once, in SQLite's spelling, and a PostgreSQL store rewrites
// them (rebind) where the languages agree; where they do not, the
// statement has a PostgreSQL text of its own next to SQLite's, chosen
// here. The differences, reviewed statement by statement:
//
//   - placeholders: SQLite's ? and ?N become $n and $N;
//   - integers: SQLite's INTEGER is 64 bits, PostgreSQL's 32, so the
//     PostgreSQL migrations use BIGINT for every integer column;
//   - row ids: SQLite numbers rows by INTEGER PRIMARY KEY (the audit
//     log relies on it), PostgreSQL by an identity column;
//   - meta.value: SQLite's ANY holds the integer high-water mark as an
//     integer, PostgreSQL's column is TEXT and casts (sqlBumpMaxIDPG);
//   - scalar max(a, b) is GREATEST in PostgreSQL (LastJobID);
//   - json_each(?) lists are json_array_elements_text in PostgreSQL
//     (inList);
//   - LIMIT -1 ("no limit") is no LIMIT clause (AuditLog);
//   - text: PostgreSQL's TEXT refuses NUL bytes and bytes that are not
//     UTF-8, which SQLite keeps. The script is BYTEA there; the other
//     string columns (a job's name, user, account, an event's message)
//     get U+FFFD in their place (pgText), so that one odd job name
//     cannot fail a commit that several submissions share. The job's
//     JSON record keeps the exact value, and it is what reads return;
//     only an event's or audit record's own columns come back changed;
//   - storage details (WITHOUT ROWID, PRAGMAs, the WAL checkpoint, BEGIN
//     IMMEDIATE) are SQLite's alone; PostgreSQL's BEGIN takes row locks
//     as it goes, and one writer connection serialises the batches as
//     SQLite's lock does.
type dialect uint8

const (
	sqliteDialect dialect = iota
	postgresDialect
)

func (d dialect) String() string {
	if d == postgresDialect {
		return "postgres"
	}
	return "sqlite"
}

// inList is the condition "col is one of the JSON array parameter's
// elements" (the statement keeps one parameter however long the list);
// integer says the elements are numbers.
func (d dialect) inList(col string, integer bool) string {
	if d == postgresDialect {
		if integer {
			return col + ` IN (SELECT CAST(value AS BIGINT) FROM json_array_elements_text(CAST(CAST(? AS TEXT) AS json)))`
		}
		return col + ` IN (SELECT value FROM json_array_elements_text(CAST(CAST(? AS TEXT) AS json)))`
	}
	return col + ` IN (SELECT value FROM json_each(?))`
}

// rebind rewrites SQLite placeholders for PostgreSQL: ?N becomes $N and
// each bare ? the next $n. Quoted strings and identifiers are copied
// unchanged, so a literal '?' survives.
func rebind(q string) string {
	var b strings.Builder
	b.Grow(len(q) + 16)
	n := 0
	for i := 0; i < len(q); i++ {
		c := q[i]
		switch c {
		case '\'', '"':
			j := strings.IndexByte(q[i+1:], c)
			if j < 0 {
				b.WriteString(q[i:])
				return b.String()
			}
			b.WriteString(q[i : i+j+2])
			i += j + 1
		case '?':
			j := i + 1
			for j < len(q) && q[j] >= '0' && q[j] <= '9' {
				j++
			}
			b.WriteByte('$')
			if j > i+1 {
				b.WriteString(q[i+1 : j])
				i = j - 1
			} else {
				n++
				b.WriteString(strconv.Itoa(n))
			}
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// q returns query in the store's dialect: unchanged for SQLite (no
// work on its hot path), rebound and cached for PostgreSQL.
func (s *Store) q(query string) string {
	if s.dialect != postgresDialect {
		return query
	}
	if v, ok := s.rebound.Load(query); ok {
		return v.(string)
	}
	r := rebind(query)
	s.rebound.Store(query, r)
	return r
}

// pgText replaces, in a string argument, NUL bytes and bytes that are not
// UTF-8 with U+FFFD, which PostgreSQL's TEXT accepts; other values pass
// unchanged.
func pgText(v driver.Value) driver.Value {
	s, ok := v.(string)
	if !ok || strings.IndexByte(s, 0) < 0 && utf8.ValidString(s) {
		return v
	}
	return strings.ToValidUTF8(strings.ReplaceAll(s, "\x00", "\uFFFD"), "\uFFFD")
}
