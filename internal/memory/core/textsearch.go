package core

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
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
	write  string
	read   time.Time
}

// TextConfig is the tenant's text search configuration, a name safe to put
// into SQL (tenant.ValidTextConfigName), read at most once per TextSearchTTL.
func (s *State) TextConfig(ctx context.Context) (string, error) {
	config, _, err := s.textConfigs(ctx, s.Pool)
	return config, err
}

// WriteTextConfig is the configuration whose vector a write of a memory's
// content stores in tsv_local (migration 19): the one a switch is filling
// (text_search.next), else the tenant's; "" for English, whose vector the
// generated tsv column holds. A write reads it through q, its own
// transaction: a write that holds locks must not wait for a second
// connection of the pool, which the writers waiting for its locks may hold
// all of.
func (s *State) WriteTextConfig(ctx context.Context, q Querier) (string, error) {
	_, write, err := s.textConfigs(ctx, q)
	if write == DefaultTextConfig {
		write = ""
	}
	return write, err
}

// textConfigs are the configuration searches use and the one writes store,
// read at most once per TextSearchTTL.
func (s *State) textConfigs(ctx context.Context, q Querier) (string, string, error) {
	t := s.Text
	if t == nil {
		return s.readTextConfig(ctx, q)
	}
	t.mu.Lock()
	config, write, read := t.config, t.write, t.read
	t.mu.Unlock()
	if config != "" && time.Since(read) < TextSearchTTL {
		return config, write, nil
	}
	config, write, err := s.readTextConfig(ctx, q)
	if err != nil {
		return "", "", err
	}
	t.mu.Lock()
	t.config, t.write, t.read = config, write, time.Now()
	t.mu.Unlock()
	return config, write, nil
}

// readTextConfig reads the text_search row: the configuration searches use
// and the one writes store (next while a switch fills it; to_jsonb reads a
// row of migration 18, without next, too). A schema older than migration
// 18 has no such table: its text is English.
func (s *State) readTextConfig(ctx context.Context, q Querier) (string, string, error) {
	var config, write string
	err := q.QueryRow(ctx, `SELECT config, coalesce(to_jsonb(t)->>'next', config) FROM `+s.Table("text_search")+` AS t`).Scan(&config, &write)
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == "42P01": // undefined_table
		return DefaultTextConfig, DefaultTextConfig, nil
	case errors.Is(err, pgx.ErrNoRows):
		return "", "", fmt.Errorf("reading the text search configuration: the row is missing")
	case err != nil:
		return "", "", DBErr("reading the text search configuration", err)
	}
	for _, c := range []string{config, write} {
		if !textConfigName.MatchString(c) {
			return "", "", fmt.Errorf("reading the text search configuration: %q is not a configuration name", c)
		}
	}
	return config, write, nil
}

// TextVector is the tsvector (SQL) of a memory (alias "m." or "") under
// config, as the text index holds it: the stored tsv column for English,
// for the others the stored tsv_local when the row's tsv_config is config
// and the words of the content's first TextPrefixChars characters
// otherwise (migration 19). The otherwise is every row a switch between two
// configurations other than English has already filled with the new one
// while searches still use the old: parsing whole contents there made one
// search cost up to ~18 s of PostgreSQL CPU for the switch's duration
// (23rd review of issue 26). It must stay
// equal, character for character, to tenant.TextVector, which builds the
// index (the engine may not import the tenant package; TestTextExpressions
// compares them), or the planner would not use the index.
func TextVector(config, alias string) string {
	if configOrDefault(config) == DefaultTextConfig {
		return alias + "tsv"
	}
	return RowTextVector(config, alias, "content")
}

// TextPrefixChars is how many characters of a row's text a search parses,
// under another configuration than English, when the row's stored vector
// (tsv_local, migration 19) is of another configuration: this bounds what
// a search parses per row while a switch fills the rows.
const TextPrefixChars = 2048

// RowTextVector is the tsvector (SQL) of column of a message, summary or
// episode aliased alias ("t.") under config: the stored tsv column for
// English, else the stored tsv_local when the row's tsv_config is config,
// and the words of the column's first TextPrefixChars characters
// otherwise.
func RowTextVector(config, alias, column string) string {
	if configOrDefault(config) == DefaultTextConfig {
		return alias + "tsv"
	}
	return "(CASE WHEN " + alias + "tsv_config = '" + config + "' THEN " + alias + "tsv_local ELSE to_tsvector('" + config +
		"'::regconfig, left(" + alias + column + ", " + strconv.Itoa(TextPrefixChars) + ")) END)"
}

// OwnerText is the expression of the owner's text index of memories under
// config (tenant.OwnerText; internal/memory/ownertext.go says why).
func OwnerText(config, alias string) string {
	return "(" + TextVector(config, alias) + " || array_to_tsvector(ARRAY['owner ' || md5(" + alias + "owner_id)]))"
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
// configuration tv may be computed from the text (RowTextVector, or a
// memory whose stored vector is of another configuration), and
// ts_rank_cd alone (0 without a match) computes it once instead of twice.
func TextRank(config, tv, q string) string {
	if configOrDefault(config) == DefaultTextConfig {
		return `CASE WHEN ` + tv + ` @@ ` + q + ` THEN ts_rank_cd(` + tv + `, ` + q + `, 32) ELSE 0 END`
	}
	return `ts_rank_cd(` + tv + `, ` + q + `, 32)`
}

// TextLocal is the values (SQL) of tsv_config and tsv_local (migration 19)
// of a row whose text is in param text, under the configuration in param
// config (text; "": none, both NULL, the tenant is English and tsv holds
// the vector): what a search under that configuration reads instead of
// parsing the text (TextVector, RowTextVector).
func TextLocal(config, text string) string {
	return `NULLIF(` + config + `::text, ''), to_tsvector(NULLIF(` + config + `::text, '')::regconfig, ` + text + `)`
}
