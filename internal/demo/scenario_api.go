package demo

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/engram-dev/engram/internal/memory"
)

func (s *Scenario) writeMemories(ctx context.Context, r *Report) error {
	api, err := s.api(ctx, r)
	if err != nil {
		return err
	}
	s.printf("   service %s (in the cluster: %s)\n", r.LocalEndpoint, r.ClusterEndpoint)
	// Start from a clean slate so a second run tells the same story.
	for _, owner := range []string{"alice", "bob"} {
		if err := api.Do(ctx, http.MethodDelete, "/v1/owners/"+owner, nil, nil); err != nil {
			return err
		}
	}
	for _, m := range demoMemories {
		var res memory.AddResult
		err := api.Do(ctx, http.MethodPost, "/v1/owners/"+m.owner+"/memories", m.body, &res)
		var se *StatusError
		if errors.As(err, &se) && se.Status == http.StatusUnprocessableEntity {
			r.InjectionRejected, r.InjectionProblem = true, problemText(se.Problem)
			s.printf("   %-5s %-9s %q\n         -> %d %s: %s\n", m.owner, "REJECTED", m.body["content"], se.Status, se.Problem.Title, problemText(se.Problem))
			continue
		}
		if err != nil {
			return err
		}
		r.Actions[string(res.Action)]++
		r.Redactions = append(r.Redactions, res.Redactions...)
		line := fmt.Sprintf("   %-5s %-9s %q", m.owner, strings.ToUpper(string(res.Action)), res.Memory.Content)
		if res.Action == memory.ActionMerged {
			line += fmt.Sprintf("  (similarity %.2f, into %s)", res.Similarity, res.Memory.ID[:8])
		}
		if len(res.Redactions) > 0 {
			line += fmt.Sprintf("  (redacted: %s)", strings.Join(res.Redactions, ", "))
		}
		s.printf("%s\n", line)
	}
	for owner, n := range map[string]*int{"alice": &r.ActiveAlice, "bob": &r.ActiveBob} {
		var page memory.ListPage
		if err := api.Do(ctx, http.MethodGet, "/v1/owners/"+owner+"/memories?limit=100", nil, &page); err != nil {
			return err
		}
		*n = len(page.Items)
	}
	s.printf("   alice has %d memories, bob %d (12 writes: one merged, one rejected)\n", r.ActiveAlice, r.ActiveBob)
	return nil
}

func problemText(p Problem) string {
	if len(p.Errors) > 0 {
		return p.Errors[0].Field + ": " + p.Errors[0].Message
	}
	return p.Detail
}

func (s *Scenario) search(ctx context.Context, r *Report) error {
	api, err := s.api(ctx, r)
	if err != nil {
		return err
	}
	body := map[string]any{"query": "which editor theme does alice like", "mode": "hybrid", "topK": 3}
	s.printf("   POST /v1/owners/alice/search %v\n", body)
	var res struct {
		Results []memory.SearchHit `json:"results"`
	}
	if err := api.Do(ctx, http.MethodPost, "/v1/owners/alice/search", body, &res); err != nil {
		return err
	}
	for _, h := range res.Results {
		s.printf("   %.3f  (vector %.2f, text %.2f, decay %.2f)  %s\n", h.Score, h.VectorScore, h.TextScore, h.DecayScore, h.Memory.Content)
	}
	if len(res.Results) > 0 {
		r.SearchTop = res.Results[0].Memory.Content
	}
	return nil
}

func (s *Scenario) context(ctx context.Context, r *Report) error {
	api, err := s.api(ctx, r)
	if err != nil {
		return err
	}
	var res memory.ContextResult
	body := map[string]any{"maxTokens": 120}
	if err := api.Do(ctx, http.MethodPost, "/v1/owners/alice/context", body, &res); err != nil {
		return err
	}
	r.Context = res.Text
	s.printf("   POST /v1/owners/alice/context {\"maxTokens\": 120} -> %d tokens, %d memories, %d left out:\n\n", res.Tokens, len(res.IDs), res.Omitted)
	for _, line := range strings.Split(strings.TrimRight(res.Text, "\n"), "\n") {
		s.printf("   | %s\n", line)
	}
	return nil
}

func (s *Scenario) erase(ctx context.Context, r *Report) error {
	api, err := s.api(ctx, r)
	if err != nil {
		return err
	}
	if err := api.Do(ctx, http.MethodDelete, "/v1/owners/bob", nil, &r.Erased); err != nil {
		return err
	}
	var page memory.ListPage
	if err := api.Do(ctx, http.MethodGet, "/v1/owners/bob/memories?includeInactive=true", nil, &page); err != nil {
		return err
	}
	r.BobAfterErase = len(page.Items)
	s.printf("   DELETE /v1/owners/bob -> %d memories and %d history entries deleted; bob now has %d\n", r.Erased.Memories, r.Erased.History, r.BobAfterErase)
	return nil
}
