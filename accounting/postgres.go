package accounting

import (
	"fmt"

	"github.com/jackc/pgx/v5"
)

// pgxConfig parses a postgres:// URL (or libpq key=value string) for
// pgx. pgx's error quotes the URL with its password redacted.
func pgxConfig(dsn string) (*pgx.ConnConfig, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL URL: %w", err)
	}
	return cfg, nil
}
