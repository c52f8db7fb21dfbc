// Package policy is the contract of a MemoryPolicy as the engine reads it:
// categories, dedup, limits, search, forgetting, retention, redaction and
// the conversation policy, their defaults and validation, and the duration
// format the operator writes. It imports nothing of Engram: the operator
// converts its CRDs into these types, the service config carries them.
package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Duration is a time span written as a whole number and one unit — s, m, h,
// d (days) or w (weeks) — such as "30d" or "12h"; "0" means never. It is the
// format of MemoryPolicy and of the service's config file.
type Duration time.Duration

// ParseDuration parses "30d", "12h", "90m", "2w", "45s" or "0".
func ParseDuration(s string) (Duration, error) {
	s = strings.TrimSpace(s)
	if s == "0" {
		return 0, nil
	}
	if len(s) < 2 {
		return 0, fmt.Errorf("invalid duration %q: want a number and a unit (s, m, h, d, w), e.g. 30d, or 0", s)
	}
	n, err := strconv.ParseInt(s[:len(s)-1], 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("invalid duration %q: want a number and a unit (s, m, h, d, w), e.g. 30d, or 0", s)
	}
	unit := map[byte]time.Duration{'s': time.Second, 'm': time.Minute, 'h': time.Hour, 'd': 24 * time.Hour, 'w': 7 * 24 * time.Hour}[s[len(s)-1]]
	if unit == 0 {
		return 0, fmt.Errorf("invalid duration %q: unit must be s, m, h, d or w", s)
	}
	// The bound is on the span, not on the number: n * unit must not
	// overflow (999999w would wrap around), and String writes a span in the
	// largest unit that divides it, which may be a small one ("99999h"
	// halved is "2999970m"): every span String writes must parse back.
	if n > int64(MaxDuration)/int64(unit) {
		return 0, fmt.Errorf("invalid duration %q: at most %s (100 years)", s, MaxDuration)
	}
	return Duration(time.Duration(n) * unit), nil
}

// MaxDuration is the longest Duration: 100 years, beyond any policy and
// far from the 292 years where time.Duration overflows.
const MaxDuration = Duration(36500 * 24 * time.Hour)

// String formats d in the largest unit that divides it.
func (d Duration) String() string {
	v := time.Duration(d)
	if v == 0 {
		return "0"
	}
	for _, u := range []struct {
		unit time.Duration
		s    string
	}{{7 * 24 * time.Hour, "w"}, {24 * time.Hour, "d"}, {time.Hour, "h"}, {time.Minute, "m"}} {
		if v%u.unit == 0 {
			return strconv.FormatInt(int64(v/u.unit), 10) + u.s
		}
	}
	return strconv.FormatInt(int64(v/time.Second), 10) + "s"
}

// MarshalJSON writes d as a string such as "30d".
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON reads a string such as "30d".
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string such as \"30d\": %w", err)
	}
	v, err := ParseDuration(s)
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// Category is one kind of memory with its own lifetime.
type Category struct {
	Name string `json:"name"`
	// TTL: memories expire this long after their last write; 0 = never.
	TTL Duration `json:"ttl"`
	// HalfLife of the decay score; 0 = no decay.
	HalfLife Duration `json:"halfLife"`
	// Priority orders categories in context rendering, higher first.
	Priority int `json:"priority"`
	// Pinned categories are always rendered first in context.
	Pinned bool `json:"pinned"`
	// Protected categories accept writes only from source "user".
	Protected bool `json:"protected"`
	// Description tells the extraction model what belongs in the category (optional).
	Description string `json:"description,omitempty"`
	// Global categories hold tenant-wide memories (under GlobalOwner),
	// written only with source user or system, included in every owner's
	// search and context, untouched by erasing an owner.
	Global bool `json:"global,omitempty"`
}

// Arbitration modes of Dedup.
const (
	ArbitrationLLM  = "LLM"
	ArbitrationNone = "None"
)

// Dedup is the two-threshold deduplication of writes.
type Dedup struct {
	AutoMergeThreshold   float64 `json:"autoMergeThreshold"`
	ArbitrationThreshold float64 `json:"arbitrationThreshold"`
	Arbitration          string  `json:"arbitration"`
}

// MaxMemoriesPerOwnerLimit is the largest limits.maxMemoriesPerOwner (the
// CRD's maximum is the same). Every search, context and add scans all of an
// owner's rows (exact per-owner search) and compaction compares them
// pairwise, so an owner costs in proportion to its size: at 2,000 a search's
// database work stays within the 10 ms design target at the median on the
// reference machine, at 5,000 hybrid search takes 16 ms
// (docs/performance.md#owner-size).
const MaxMemoriesPerOwnerLimit = 2_000

// Limits bound what one owner and one request may use.
type Limits struct {
	MaxMemoriesPerOwner   int `json:"maxMemoriesPerOwner"`
	MaxContentBytes       int `json:"maxContentBytes"`
	MaxQueryBytes         int `json:"maxQueryBytes"`
	MaxTopK               int `json:"maxTopK"`
	MaxFactsPerExtraction int `json:"maxFactsPerExtraction"`
	// The quotas below came later: 0 (a config written before them) means
	// the default, like the conversation policy's fields.

	// MaxSessionsPerOwner bounds the conversation sessions one owner keeps.
	MaxSessionsPerOwner int `json:"maxSessionsPerOwner,omitempty"`
	// MaxEpisodesPerOwner bounds the episodes one owner keeps.
	MaxEpisodesPerOwner int `json:"maxEpisodesPerOwner,omitempty"`
	// MaxDocumentVersions is how many versions of one profile or
	// constraints document are kept (older ones are pruned).
	MaxDocumentVersions int `json:"maxDocumentVersions,omitempty"`
	// MaxDocumentsPerOwner bounds the profile and constraints documents
	// of one owner (one of each per agent id).
	MaxDocumentsPerOwner int `json:"maxDocumentsPerOwner,omitempty"`
	// MaxHistoryPerMemory is how many of a memory's newest history rows
	// are kept, beside the row that created it (older ones are pruned).
	MaxHistoryPerMemory int `json:"maxHistoryPerMemory,omitempty"`
}

// Defaults and largest values of the quotas in Limits (the CRD's are the
// same); docs/security.md ("Bounds: turns and quotas") says why each.
const (
	DefaultMaxSessionsPerOwner = 10_000
	MaxSessionsPerOwnerLimit   = 1_000_000
	// Episode search and every context read score all of an owner's
	// episodes, like memories (MaxMemoriesPerOwnerLimit), so their cap is
	// of the same order.
	DefaultMaxEpisodesPerOwner = 2_000
	MaxEpisodesPerOwnerLimit   = 10_000
	DefaultMaxDocumentVersions = 100
	MaxDocumentVersionsLimit   = 10_000
	// Agent ids are chosen by clients: without a bound, one owner's
	// documents (each with up to maxDocumentVersions versions) and its
	// changelog grow with every new agent id. 100 is 50 agents with both
	// documents.
	DefaultMaxDocumentsPerOwner = 100
	MaxDocumentsPerOwnerLimit   = 10_000
	// Every update of a memory adds a history row; the newest 100 are a
	// long audit trail of one fact, and its first row says who created it.
	DefaultMaxHistoryPerMemory = 100
	MaxHistoryPerMemoryLimit   = 10_000
)

var defaultLimits = Limits{MaxMemoriesPerOwner: 1000, MaxContentBytes: 500, MaxQueryBytes: 1000, MaxTopK: 100, MaxFactsPerExtraction: 5,
	MaxSessionsPerOwner: DefaultMaxSessionsPerOwner, MaxEpisodesPerOwner: DefaultMaxEpisodesPerOwner, MaxDocumentVersions: DefaultMaxDocumentVersions,
	MaxDocumentsPerOwner: DefaultMaxDocumentsPerOwner, MaxHistoryPerMemory: DefaultMaxHistoryPerMemory}

// WithQuotaDefaults sets the zero quotas to their defaults.
func (l Limits) WithQuotaDefaults() Limits {
	for _, q := range []struct {
		v   *int
		def int
	}{{&l.MaxSessionsPerOwner, DefaultMaxSessionsPerOwner}, {&l.MaxEpisodesPerOwner, DefaultMaxEpisodesPerOwner},
		{&l.MaxDocumentVersions, DefaultMaxDocumentVersions}, {&l.MaxDocumentsPerOwner, DefaultMaxDocumentsPerOwner},
		{&l.MaxHistoryPerMemory, DefaultMaxHistoryPerMemory}} {
		if *q.v == 0 {
			*q.v = q.def
		}
	}
	return l
}

// Forgetting configures the decay job.
type Forgetting struct {
	// MinDecayScore: active memories below it are forgotten by the decay job; 0 = off.
	MinDecayScore float64 `json:"minDecayScore"`
}

// Retention configures the purge job.
type Retention struct {
	// PurgeInactiveAfter: inactive memories are hard-deleted this long after deactivation.
	PurgeInactiveAfter Duration `json:"purgeInactiveAfter"`
}

// Injection guard modes of Redaction.
const (
	GuardReject = "Reject"
	GuardFlag   = "Flag"
	GuardOff    = "Off"
)

// Redaction configures secret redaction and the prompt-injection guard.
type Redaction struct {
	BuiltinPatterns bool     `json:"builtinPatterns"`
	Patterns        []string `json:"patterns,omitempty"`
	InjectionGuard  string   `json:"injectionGuard"`
}

// Policy is everything a MemoryPolicy says, resolved: no field is left to a
// default. It is also the "policy" section of the service's config file.
type Policy struct {
	Categories []Category `json:"categories"`
	Dedup      Dedup      `json:"dedup"`
	Limits     Limits     `json:"limits"`
	Search     Search     `json:"search"`
	Forgetting Forgetting `json:"forgetting"`
	Retention  Retention  `json:"retention"`
	Redaction  Redaction  `json:"redaction"`
	// Conversation configures sessions, windows and the summary DAG.
	Conversation ConversationPolicy `json:"conversation"`
	Reranking    *Reranking         `json:"reranking,omitempty"` // nil: no second stage of search (reranking.go)
}

const day = Duration(24 * time.Hour)

// DefaultCategories is the category set used when a policy names none.
func DefaultCategories() []Category {
	return []Category{
		{Name: "identity", TTL: 0, HalfLife: 0, Priority: 100, Pinned: true},
		{Name: "preference", TTL: 90 * day, HalfLife: 45 * day, Priority: 80},
		{Name: "project", TTL: 60 * day, HalfLife: 30 * day, Priority: 60},
		{Name: "contextual", TTL: 30 * day, HalfLife: 15 * day, Priority: 40},
	}
}

// DefaultPolicy is the policy of a runtime without a MemoryPolicy; its values
// equal the defaults of the MemoryPolicy CRD.
func DefaultPolicy() Policy {
	return Policy{
		Categories:   DefaultCategories(),
		Dedup:        Dedup{AutoMergeThreshold: 0.95, ArbitrationThreshold: 0.85, Arbitration: ArbitrationLLM},
		Limits:       defaultLimits,
		Search:       Search{VectorWeight: 0.6, TextWeight: 0.2, DecayWeight: 0.2, DefaultTopK: 10, TextSearchConfig: DefaultTextSearchConfig},
		Forgetting:   Forgetting{MinDecayScore: 0.05},
		Retention:    Retention{PurgeInactiveAfter: 30 * day},
		Redaction:    Redaction{BuiltinPatterns: true, InjectionGuard: GuardReject},
		Conversation: DefaultConversationPolicy(),
	}
}

// DefaultCategory is the category of a write that names none: "contextual"
// when the policy has it, else the category of lowest priority.
func (p *Policy) DefaultCategory() string {
	if _, ok := p.Category("contextual"); ok {
		return "contextual"
	}
	best := p.Categories[0]
	for _, c := range p.Categories[1:] {
		if c.Priority < best.Priority {
			best = c
		}
	}
	return best.Name
}

// Category returns the category called name.
func (p *Policy) Category(name string) (Category, bool) {
	for _, c := range p.Categories {
		if c.Name == name {
			return c, true
		}
	}
	return Category{}, false
}

// CategoryNames returns the names of the categories in policy order.
func (p *Policy) CategoryNames() []string {
	out := make([]string, len(p.Categories))
	for i, c := range p.Categories {
		out[i] = c.Name
	}
	return out
}

// RenderOrder returns the categories in context order: pinned first, then by
// priority (higher first), then by name.
func (p *Policy) RenderOrder() []Category {
	out := append([]Category(nil), p.Categories...)
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Pinned != out[j].Pinned {
			return out[i].Pinned
		}
		if out[i].Priority != out[j].Priority {
			return out[i].Priority > out[j].Priority
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// Validate checks the policy as a whole and returns every problem found, one
// per line, with the field it concerns. The operator uses it for the Valid
// condition of a MemoryPolicy (checks CEL cannot do, such as compiling regular
// expressions) and the service refuses to start with an invalid policy.
func (p *Policy) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	if len(p.Categories) == 0 {
		bad("categories", "at least one category is required")
	}
	seen := map[string]bool{}
	for i, c := range p.Categories {
		f := fmt.Sprintf("categories[%d]", i)
		if !categoryName.MatchString(c.Name) {
			bad(f+".name", "%q must be 1-32 characters of [a-z0-9_-], starting with a letter", c.Name)
		}
		if seen[c.Name] {
			bad(f+".name", "%q appears twice", c.Name)
		}
		seen[c.Name] = true
		if c.Global && c.Protected {
			bad(f, "a global category cannot also be protected: global categories already accept writes only from source user or system")
		}
		if len(c.Description) > 500 {
			bad(f+".description", "is %d bytes, more than the limit of 500", len(c.Description))
		}
		if c.TTL < 0 || c.HalfLife < 0 {
			bad(f, "ttl and halfLife must not be negative")
		}
		// In floating point: ten times a long ttl overflows time.Duration.
		if c.TTL > 0 && float64(c.HalfLife) > 10*float64(c.TTL) {
			bad(f+".halfLife", "%s is more than ten times the ttl %s: memories would expire long before they decay", c.HalfLife, c.TTL)
		}
	}
	d := p.Dedup
	if !(d.ArbitrationThreshold > 0 && d.ArbitrationThreshold <= d.AutoMergeThreshold && d.AutoMergeThreshold <= 1) {
		bad("dedup", "thresholds must satisfy 0 < arbitrationThreshold (%g) <= autoMergeThreshold (%g) <= 1", d.ArbitrationThreshold, d.AutoMergeThreshold)
	}
	if d.Arbitration != ArbitrationLLM && d.Arbitration != ArbitrationNone {
		bad("dedup.arbitration", "%q must be LLM or None", d.Arbitration)
	}
	l := p.Limits.WithQuotaDefaults()
	if l.MaxMemoriesPerOwner > MaxMemoriesPerOwnerLimit {
		bad("limits.maxMemoriesPerOwner", "%d is more than the largest owner Engram supports, %d (docs/performance.md#owner-size)", l.MaxMemoriesPerOwner, MaxMemoriesPerOwnerLimit)
	}
	for _, v := range []struct {
		field string
		val   int
		min   int
	}{{"limits.maxMemoriesPerOwner", l.MaxMemoriesPerOwner, 1}, {"limits.maxContentBytes", l.MaxContentBytes, 16},
		{"limits.maxQueryBytes", l.MaxQueryBytes, 16}, {"limits.maxTopK", l.MaxTopK, 1}, {"limits.maxFactsPerExtraction", l.MaxFactsPerExtraction, 1}} {
		if v.val < v.min {
			bad(v.field, "%d must be at least %d", v.val, v.min)
		}
	}
	for _, q := range []struct {
		field    string
		val, max int
	}{{"limits.maxSessionsPerOwner", l.MaxSessionsPerOwner, MaxSessionsPerOwnerLimit},
		{"limits.maxEpisodesPerOwner", l.MaxEpisodesPerOwner, MaxEpisodesPerOwnerLimit},
		{"limits.maxDocumentVersions", l.MaxDocumentVersions, MaxDocumentVersionsLimit},
		{"limits.maxDocumentsPerOwner", l.MaxDocumentsPerOwner, MaxDocumentsPerOwnerLimit},
		{"limits.maxHistoryPerMemory", l.MaxHistoryPerMemory, MaxHistoryPerMemoryLimit}} {
		if q.val < 1 || q.val > q.max {
			bad(q.field, "%d must be within 1..%d", q.val, q.max)
		}
	}
	s := p.Search
	for _, w := range []struct {
		field string
		v     float64
	}{{"search.vectorWeight", s.VectorWeight}, {"search.textWeight", s.TextWeight}, {"search.decayWeight", s.DecayWeight}} {
		if !(w.v >= 0 && w.v <= 1) { // also refuses NaN: the hybrid bound needs weights in [0, 1]
			bad(w.field, "%g must be within [0, 1]", w.v)
		}
	}
	if s.VectorWeight+s.TextWeight+s.DecayWeight <= 0 {
		bad("search", "at least one weight must be above 0")
	}
	if s.DefaultTopK < 1 || s.DefaultTopK > l.MaxTopK {
		bad("search.defaultTopK", "%d must be within 1..limits.maxTopK (%d)", s.DefaultTopK, l.MaxTopK)
	}
	errs = append(errs, s.textSearchErrors()...)
	if f := p.Forgetting.MinDecayScore; f < 0 || f > 1 {
		bad("forgetting.minDecayScore", "%g must be within [0, 1]", f)
	}
	if p.Retention.PurgeInactiveAfter < 0 {
		bad("retention.purgeInactiveAfter", "must not be negative")
	}
	switch p.Redaction.InjectionGuard {
	case GuardReject, GuardFlag, GuardOff:
	default:
		bad("redaction.injectionGuard", "%q must be Reject, Flag or Off", p.Redaction.InjectionGuard)
	}
	for i, pat := range p.Redaction.Patterns {
		re, err := regexp.Compile(pat)
		if err != nil {
			bad(fmt.Sprintf("redaction.patterns[%d]", i), "not a valid RE2 regular expression: %v", err)
			continue
		}
		if re.MatchString("") {
			bad(fmt.Sprintf("redaction.patterns[%d]", i), "%q matches the empty string, which would redact nothing useful and everything in between", pat)
		}
	}
	if err := p.Conversation.Validate(); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, p.validateReranking())
	return errors.Join(errs...)
}

var categoryName = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,31}$`)

// HasGlobal reports whether the policy has a global category (its memories
// belong to every owner of the tenant).
func (p *Policy) HasGlobal() bool {
	for _, c := range p.Categories {
		if c.Global {
			return true
		}
	}
	return false
}
