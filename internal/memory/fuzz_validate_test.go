package memory

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/engram-dev/engram/internal/memory/core"
	"github.com/engram-dev/engram/internal/memory/textguard"
	"github.com/engram-dev/engram/internal/memory/write"
)

// fuzzStore is a Store with a policy and a redactor and nothing else:
// write.Store.Prepare, the whole validation of a write, never reaches the database.
func fuzzStore(t testing.TB, guard string) *Store {
	t.Helper()
	p := DefaultPolicy()
	p.Limits.MaxContentBytes = 200
	p.Categories[0].Protected = true // identity
	p.Redaction.InjectionGuard = guard
	r, err := newRedactor(p.Redaction)
	if err != nil {
		t.Fatal(err)
	}
	st := &core.State{Policy: p, Redactor: r}
	return &Store{core: st, w: write.New(st, 0)}
}

// FuzzPrepareAdd: a write is either refused with errors that name their
// fields, or what it stores keeps every promise of the API: valid ids,
// known source and category, importance 1-10, content that is valid UTF-8
// without control characters, within the limit after redaction, with no
// secret left, and (guard Reject) nothing the injection guard catches.
func FuzzPrepareAdd(f *testing.F) {
	guards := []string{GuardReject, GuardFlag, GuardOff}
	stores := make([]*Store, len(guards))
	for i, g := range guards {
		stores[i] = fuzzStore(f, g)
	}
	f.Fuzz(func(t *testing.T, owner, agent, session, source, content, category string, importance int, ttl string, guard uint8) {
		mode := guards[int(guard)%len(guards)]
		s := stores[int(guard)%len(guards)]
		req := AddRequest{Owner: owner, Agent: agent, Session: session, Source: Source(source),
			Content: content, Category: category, Importance: importance, TTL: ttl}
		p, err := s.w.Prepare(req, &core.FieldErrors{})
		if err != nil {
			if errors.Is(err, ErrProtected) {
				return
			}
			v, ok := IsValidation(err)
			if !ok || len(v.Fields) == 0 {
				t.Fatalf("refused with %T %v, want a ValidationError", err, err)
			}
			for _, fe := range v.Fields {
				if fe.Field == "" || fe.Message == "" {
					t.Fatalf("field error without field or message: %+v", v.Fields)
				}
			}
			return
		}
		if !ValidScopeID(owner) || (agent != "" && !ValidScopeID(agent)) || (session != "" && !ValidScopeID(session)) {
			t.Fatalf("accepted ids owner=%q agent=%q session=%q", owner, agent, session)
		}
		if !slices.Contains([]Source{SourceUser, SourceAgent, SourceSystem, SourceJob}, p.Req.Source) {
			t.Fatalf("accepted source %q", p.Req.Source)
		}
		if _, ok := s.core.Policy.Category(p.Req.Category); !ok {
			t.Fatalf("accepted category %q", p.Req.Category)
		}
		if p.Req.Importance < 1 || p.Req.Importance > 10 {
			t.Fatalf("accepted importance %d", p.Req.Importance)
		}
		if p.TTL() != nil && (*p.TTL() < 0 || *p.TTL() > time.Duration(MaxDuration)) {
			t.Fatalf("accepted ttl %q as %v", ttl, *p.TTL())
		}
		stored := p.Content
		switch {
		case !utf8.ValidString(stored):
			t.Fatalf("stores invalid UTF-8 %q", stored)
		case len(stored) > s.core.Policy.Limits.MaxContentBytes:
			t.Fatalf("stores %d bytes, over the limit", len(stored))
		case strings.TrimSpace(stored) == "":
			t.Fatalf("stores blank content from %q", content)
		case strings.IndexFunc(stored, core.IsForbiddenControl) >= 0:
			t.Fatalf("stores a control character: %q", stored)
		case stored != s.core.Redactor.Redacted(content):
			t.Fatalf("stores %q, not the redacted input", stored)
		}
		if left := s.core.Redactor.Leftover(stored); left != "" {
			t.Fatalf("stores a secret (%s) in %q", left, stored)
		}
		reason := textguard.DetectInjection(stored)
		if mode == GuardReject && reason != "" {
			t.Fatalf("guard Reject stored %q (%s)", stored, reason)
		}
		if mode == GuardFlag && (reason != "") != slices.Contains(p.Flags, FlagInjection) {
			t.Fatalf("guard Flag: reason %q, flags %v", reason, p.Flags)
		}
	})
}

// FuzzPolicyJSON: the policy section of the service's config file (what
// the operator writes into the ConfigMap). Validate never panics; a
// policy it accepts can build a Store's redactor (so the service starts)
// and survives the JSON round trip unchanged.
func FuzzPolicyJSON(f *testing.F) {
	f.Fuzz(func(t *testing.T, raw []byte) {
		var p Policy
		if err := json.Unmarshal(raw, &p); err != nil {
			return
		}
		if err := p.Validate(); err != nil {
			if err.Error() == "" {
				t.Fatal("empty validation error")
			}
			return
		}
		if _, err := newRedactor(p.Redaction); err != nil {
			t.Fatalf("valid policy, but its redaction does not build: %v", err)
		}
		if len(p.Categories) == 0 || p.DefaultCategory() == "" {
			t.Fatalf("valid policy without a default category: %+v", p.Categories)
		}
		js, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		var back Policy
		if err := json.Unmarshal(js, &back); err != nil {
			t.Fatalf("the policy's own JSON does not load: %v\n%s", err, js)
		}
		if !reflect.DeepEqual(normalizePolicy(p), normalizePolicy(back)) {
			t.Fatalf("JSON round trip changed the policy:\n%+v\n%+v", p, back)
		}
		if err := back.Validate(); err != nil {
			t.Fatalf("valid policy is invalid after the round trip: %v", err)
		}
	})
}

// normalizePolicy makes nil and empty pattern lists equal (omitempty).
func normalizePolicy(p Policy) Policy {
	if len(p.Redaction.Patterns) == 0 {
		p.Redaction.Patterns = nil
	}
	return p
}
