package core

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DefaultTextConfig is the text search configuration of a tenant whose
// schema predates the text_search row: English, what the stored tsv
// columns hold (tenant.DefaultTextSearchConfig).
const DefaultTextConfig = "english"

// textConfigName is what a configuration name read from the row may look
// like before it is put into SQL (tenant.ValidTextConfigName).
var textConfigName = regexp.MustCompile(`^[a-z]{1,32}$`)

// TextSearchTTL is how long the engine keeps the text search configuration
// it read: the operator keeps the previous configuration's index for
// tenant.TextSearchGrace (longer) after a switch, so a search never runs
// with a configuration whose index is gone.
const TextSearchTTL = time.Second

// TextSearch is the tenant's text search configuration as the engine last
// read it from the text_search row (migration 18). The row, not the policy,
// decides: the operator switches it only once the text index of the new
// configuration is valid, so searches keep matching an index throughout a
// rebuild. It is the one mutable part of State.
type TextSearch struct {
	mu     sync.Mutex
	config string
	read   time.Time
}

// TextConfig is the tenant's text search configuration, a name safe to put
// into SQL (tenant.ValidTextConfigName), read at most once per TextSearchTTL.
func (s *State) TextConfig(ctx context.Context) (string, error) {
	t := s.Text
	if t == nil {
		return s.readTextConfig(ctx)
	}
	t.mu.Lock()
	config, read := t.config, t.read
	t.mu.Unlock()
	if config != "" && time.Since(read) < TextSearchTTL {
		return config, nil
	}
	config, err := s.readTextConfig(ctx)
	if err != nil {
		return "", err
	}
	t.mu.Lock()
	t.config, t.read = config, time.Now()
	t.mu.Unlock()
	return config, nil
}

// readTextConfig reads the text_search row. A schema older than migration
// 18 has no such table: its text is English.
func (s *State) readTextConfig(ctx context.Context) (string, error) {
	var config string
	err := s.Pool.QueryRow(ctx, `SELECT config FROM `+s.Table("text_search")).Scan(&config)
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == "42P01": // undefined_table
		return DefaultTextConfig, nil
	case errors.Is(err, pgx.ErrNoRows):
		return "", fmt.Errorf("reading the text search configuration: the row is missing")
	case err != nil:
		return "", DBErr("reading the text search configuration", err)
	}
	if !textConfigName.MatchString(config) {
		return "", fmt.Errorf("reading the text search configuration: %q is not a configuration name", config)
	}
	return config, nil
}

// TextVector is the tsvector (SQL) of column of the row aliased alias
// ("m.") under config, as the text index holds it: the stored tsv column
// for English, to_tsvector of the text for the others. It must stay
// equal, character for character, to tenant.TextVector, which builds the
// index (the engine may not import the tenant package; TestTextExpressions
// compares them), or the planner would not use the index.
func TextVector(config, alias, column string) string {
	if configOrDefault(config) == DefaultTextConfig {
		return alias + "tsv"
	}
	return "to_tsvector('" + config + "'::regconfig, " + alias + column + ")"
}

// OwnerText is the expression of the owner's text index of memories under
// config (tenant.OwnerText; internal/memory/ownertext.go says why).
func OwnerText(config, alias string) string {
	return "(" + TextVector(config, alias, "content") + " || array_to_tsvector(ARRAY['owner ' || md5(" + alias + "owner_id)]))"
}

// OrQuery is the tsquery (SQL) of text search for the query text in ph
// under config: any of its words may match (OR), since ranking, not
// filtering, is the point.
func OrQuery(config, ph string) string {
	return `replace(plainto_tsquery('` + configOrDefault(config) + `', ` + ph + `)::text, ' & ', ' | ')::tsquery`
}

// configOrDefault is config, or English for "" (queries built outside a
// search, as the benchmark's raw side does).
func configOrDefault(config string) string {
	if config == "" {
		return DefaultTextConfig
	}
	return config
}

// TextRank is the text score (SQL) of the tsvector tv for the tsquery q: 0
// for a row that does not match. English tests the match first, which is
// cheaper than ranking when tv is the stored column; for another
// configuration tv is computed from the text, and ts_rank_cd alone (0
// without a match) computes it once instead of twice.
func TextRank(config, tv, q string) string {
	if configOrDefault(config) == DefaultTextConfig {
		return `CASE WHEN ` + tv + ` @@ ` + q + ` THEN ts_rank_cd(` + tv + `, ` + q + `, 32) ELSE 0 END`
	}
	return `ts_rank_cd(` + tv + `, ` + q + `, 32)`
}
