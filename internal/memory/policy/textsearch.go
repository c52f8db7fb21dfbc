package policy

import (
	"fmt"
	"slices"
	"strings"
)

// DefaultTextSearchConfig is the text search configuration of a policy that
// names none: the one every tenant had before it could be chosen.
const DefaultTextSearchConfig = "english"

// TextSearchConfigs are the text search configurations PostgreSQL 17 ships
// (pg_ts_config of a fresh cluster), "simple" first. Only these are
// accepted: the name becomes part of SQL text (an index expression and the
// queries that must match it), so it is never taken from anywhere but this
// list. The MemoryPolicy CRD's CEL rule lists the same names.
var TextSearchConfigs = []string{
	"simple", "arabic", "armenian", "basque", "catalan", "danish", "dutch", "english", "finnish",
	"french", "german", "greek", "hindi", "hungarian", "indonesian", "irish", "italian", "lithuanian",
	"nepali", "norwegian", "portuguese", "romanian", "russian", "serbian", "spanish", "swedish",
	"tamil", "turkish", "yiddish",
}

// ValidTextSearchConfig reports whether name is one of TextSearchConfigs.
func ValidTextSearchConfig(name string) bool { return slices.Contains(TextSearchConfigs, name) }

// Search.TextSearchConfig is the text search configuration the operator
// builds the tenant's text index with; "" means DefaultTextSearchConfig.
// Queries use the one the index was built with (the tenant's text_search
// row), which the operator switches once that index is valid.

// textSearchErrors checks TextSearchConfig against TextSearchConfigs: no
// error, or the one that says what is allowed.
func (s Search) textSearchErrors() []error {
	if s.TextSearchConfig == "" || ValidTextSearchConfig(s.TextSearchConfig) {
		return nil
	}
	return []error{fmt.Errorf("search.textSearchConfig: %q must be one of %s", s.TextSearchConfig, strings.Join(TextSearchConfigs, ", "))}
}

// TextConfig is the policy's text search configuration, its default resolved.
func (s Search) TextConfig() string {
	if s.TextSearchConfig == "" {
		return DefaultTextSearchConfig
	}
	return s.TextSearchConfig
}

// Search holds the weights of hybrid ranking, the default top-K and the
// text search configuration.
type Search struct {
	VectorWeight     float64 `json:"vectorWeight"`
	TextWeight       float64 `json:"textWeight"`
	DecayWeight      float64 `json:"decayWeight"`
	DefaultTopK      int     `json:"defaultTopK"`
	TextSearchConfig string  `json:"textSearchConfig,omitempty"`
}
