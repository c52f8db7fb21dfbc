package demo

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/engram-dev/engram/internal/memory"
)

// EpisodeReport is what the episode step did, for the e2e assertions.
type EpisodeReport struct {
	// Episode is the one ending the 3-turn session wrote (nil: none).
	Episode *memory.Episode
	// Found: the episode search ranked it first.
	Found bool
}

const demoRecap = "demo-trip-recap"

// episode ends a session of 3 user turns through the API: it is archived
// and gets an episode (no LLM in the demo: the extractive summary), which
// the episode search then finds.
func (s *Scenario) episode(ctx context.Context, r *Report) error {
	api, err := s.api(ctx, r)
	if err != nil {
		return err
	}
	base := "/v1/owners/alice/sessions"
	var se *StatusError
	if err := api.Do(ctx, http.MethodDelete, base+"/"+demoRecap, nil, nil); err != nil && !(errors.As(err, &se) && se.Status == http.StatusNotFound) {
		return err
	}
	if err := api.Do(ctx, http.MethodPost, base, map[string]any{"id": demoRecap, "agent": "support-bot", "title": "Trip recap"}, nil); err != nil {
		return err
	}
	for i, city := range []string{"Lisbon", "Porto", "Sintra"} {
		body := map[string]any{"messages": []map[string]any{
			{"role": "user", "content": fmt.Sprintf("Recap %d: the night train to %s was late, please book day trains from now on.", i+1, city)},
			{"role": "assistant", "content": fmt.Sprintf("Noted for %s: day trains only, window seats when possible.", city)},
		}}
		if err := api.Do(ctx, http.MethodPost, base+"/"+demoRecap+"/messages", body, nil); err != nil {
			return err
		}
	}
	var end memory.EndSessionResult
	if err := api.Do(ctx, http.MethodPost, base+"/"+demoRecap+"/end", nil, &end); err != nil {
		return err
	}
	if end.Episode == nil {
		return errors.New("ending a session of 3 user turns wrote no episode")
	}
	r.Episode.Episode = end.Episode
	s.printf("   POST %s/%s/end -> archived %v, episode of %d user turns (%s): %q\n",
		base, demoRecap, end.Session.Archived, end.Episode.UserTurns, end.Episode.Method, clip(end.Episode.Summary, 100))
	var found struct {
		Results []memory.EpisodeHit `json:"results"`
	}
	query := "night train day trains"
	if err := api.Do(ctx, http.MethodGet, "/v1/owners/alice/episodes?query="+url.QueryEscape(query), nil, &found); err != nil {
		return err
	}
	r.Episode.Found = len(found.Results) > 0 && found.Results[0].Episode.ID == end.Episode.ID
	s.printf("   GET /v1/owners/alice/episodes?query=%s -> %d episodes, the recap first: %v\n", url.QueryEscape(query), len(found.Results), r.Episode.Found)
	return nil
}

// clip shortens s to at most n runes for a printed line.
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
