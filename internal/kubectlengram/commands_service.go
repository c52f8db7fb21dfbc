package kubectlengram

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/engram-dev/engram/internal/memory"
)

// statsResult is the answer of GET /v1/stats.
type statsResult = memory.Stats

// MemoryRow is one memory of `memories` (a listed one has no score).
type MemoryRow struct {
	memory.Memory
	Score *float64 `json:"score,omitempty"`
}

func runMemories(ctx context.Context, a *app, args []string) error {
	if a.limit < 1 || a.limit > 500 {
		return fmt.Errorf("--limit %d: use 1 to 500", a.limit)
	}
	filter, s, err := a.filteredService(ctx, args[0])
	if err != nil {
		return err
	}
	owner := args[1]
	rows := []MemoryRow{}
	if a.search != "" {
		var res struct {
			Results []memory.SearchHit `json:"results"`
		}
		body := map[string]any{"query": a.search, "topK": a.limit}
		if filter != nil {
			body["filter"] = filter
		}
		if err := s.call(ctx, http.MethodPost, ownerPath(owner, "/search"), nil, body, &res); err != nil {
			return err
		}
		for _, h := range res.Results {
			score := h.Score
			rows = append(rows, MemoryRow{Memory: h.Memory, Score: &score})
		}
	} else {
		var page memory.ListPage
		q := url.Values{"limit": {strconv.Itoa(a.limit)}}
		if filter != nil {
			q.Set("filter", string(filter))
		}
		if err := s.call(ctx, http.MethodGet, ownerPath(owner, "/memories"), q, nil, &page); err != nil {
			return err
		}
		for _, m := range page.Items {
			rows = append(rows, MemoryRow{Memory: m})
		}
	}
	now := time.Now()
	return a.printData(rows, func(w io.Writer) error {
		if len(rows) == 0 {
			_, err := fmt.Fprintf(w, "No memories of owner %q.\n", owner)
			return err
		}
		header := []string{"ID", "CATEGORY", "IMPORTANCE", "UPDATED", "CONTENT"}
		if a.search != "" {
			header = append([]string{"SCORE"}, header...)
		}
		var out [][]string
		for _, r := range rows {
			cells := []string{r.ID, orDash(r.Category), strconv.Itoa(r.Importance), age(r.UpdatedAt, now), clip(r.Content, 70)}
			if r.Score != nil {
				cells = append([]string{strconv.FormatFloat(*r.Score, 'f', 3, 64)}, cells...)
			}
			out = append(out, cells)
		}
		return table(w, header, out)
	})
}

func runContext(ctx context.Context, a *app, args []string) error {
	if a.query == "" {
		return errors.New("context needs --query: what the prompt is about")
	}
	filter, s, err := a.filteredService(ctx, args[0])
	if err != nil {
		return err
	}
	body := map[string]any{"query": a.query}
	if filter != nil {
		body["filter"] = filter
	}
	var res memory.ContextResult
	if err := s.call(ctx, http.MethodPost, ownerPath(args[1], "/context"), nil, body, &res); err != nil {
		return err
	}
	return a.printData(res, func(w io.Writer) error {
		_, err := fmt.Fprintf(w, "%s\n\n(%d memories, %d tokens, %d left out for the budget)\n", res.Text, len(res.IDs), res.Tokens, res.Omitted)
		return err
	})
}

// filteredService is --filter (parsedFilter) and the service of runtime
// name (serviceFor), for the commands that read memories.
func (a *app) filteredService(ctx context.Context, name string) (json.RawMessage, *service, error) {
	filter, err := a.parsedFilter()
	if err != nil {
		return nil, nil, err
	}
	s, err := a.serviceFor(ctx, name)
	if err != nil {
		return nil, nil, err
	}
	return filter, s, nil
}

// parsedFilter is --filter as raw JSON (nil without it). Only its shape
// is checked here, so a typo fails before any call; the grammar is the
// service's to check, and its 422 names the offending part.
func (a *app) parsedFilter() (json.RawMessage, error) {
	if a.filter == "" {
		return nil, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(a.filter), &obj); err != nil || obj == nil {
		return nil, fmt.Errorf(`--filter %q: not a JSON object; e.g. --filter '{"tags": {"eq": "travel"}}'`, clip(a.filter, 80))
	}
	return json.RawMessage(a.filter), nil
}

func runErase(ctx context.Context, a *app, args []string) error {
	if !a.yes {
		return fmt.Errorf("erase deletes every memory and all history of owner %q for good; add --yes to confirm", args[1])
	}
	s, err := a.serviceFor(ctx, args[0])
	if err != nil {
		return err
	}
	var res memory.EraseResult
	if err := s.call(ctx, http.MethodDelete, ownerPath(args[1]), nil, nil, &res); err != nil {
		return err
	}
	return a.printData(res, func(w io.Writer) error {
		_, err := fmt.Fprintf(w, "Erased owner %q: %d memories and %d history entries deleted.\n", args[1], res.Memories, res.History)
		return err
	})
}
