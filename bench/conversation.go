package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/engram-dev/engram/internal/memory"
)

// ConversationReport is the conversation memory part of the results:
// appends and windows through the service's HTTP API against the raw SQL
// of the same work, in the same run.
type ConversationReport struct {
	// Messages is the size of the long session the windows are built from.
	Messages int `json:"messages"`
	// SeedSec is how long appending it through the API took (turns of SeedTurn messages).
	SeedSec  float64 `json:"seedSec"`
	SeedTurn int     `json:"seedTurn"`
	// CompactSec is the forced full compaction of the long session (extractive).
	CompactSec float64                      `json:"compactSec"`
	Compaction *memory.CompactSessionResult `json:"compaction,omitempty"`
	Workloads  []Workload                   `json:"workloads"`
}

const (
	convOwner    = "conv-owner"
	convLong     = "long-session"
	convSeedTurn = 50 // messages a seed request appends (the policy's default maxMessagesPerTurn)
	// convBudget is the window budget measured: the policy's default.
	convBudget = 4000
)

// runConversation measures conversation memory: append throughput at each
// concurrency (every worker appends to its own session, as concurrent
// conversations do) and window assembly for a long session.
func (h *harness) runConversation(ctx context.Context) (*ConversationReport, error) {
	sc := h.scale
	rep := &ConversationReport{Messages: sc.ConvMessages, SeedTurn: convSeedTurn}
	tenant, stop, err := h.serveTenant(ctx, "conv", "conversation database", "service-conv")
	defer stop()
	if err != nil {
		return nil, err
	}
	db, loginURL, svc := tenant.db, tenant.loginURL, tenant.svc
	api := svc.api
	pool, err := h.servicePool(ctx, loginURL, memory.SessionSettings{})
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	emb, err := memory.NewBuiltinEmbedder(benchDims)
	if err != nil {
		return nil, err
	}
	raw := newRawConversation(pool, benchSchema, emb)

	if err := h.seedLongSession(ctx, api, rep); err != nil {
		return rep, err
	}
	if err := settleTable(ctx, db.URL, benchSchema); err != nil {
		return rep, err
	}
	var failed []string
	meters := sideMeters{service: cpuMeter{servicePID: svc.proc.pid(), database: db.name}, raw: cpuMeter{database: db.name}}
	ab, err := startConvAB(ctx, h, loginURL, svc, db.name, raw)
	defer ab.stop()
	if err != nil {
		return rep, err
	}
	for i, w := range h.conversationWorkloads(ctx, api, raw) {
		for _, c := range sc.Concurrency {
			var prof *profileRun
			if svc.pprofURL != "" && c == 1 {
				prof = h.startProfile(ctx, svc.pprofURL, "conv-"+strings.ReplaceAll(w.name, " ", "-")+"-c1", cellDuration(sc, 2))
			}
			wl := ab.pair(ctx, h, meters, w, i, c)
			prof.wait()
			svcStats, rawStats := wl.Service, wl.Raw
			h.logf("conversation: %-16s c=%d  service %7.1f/s p50 %6.2fms p99 %6.2fms | raw %7.1f/s p99 %6.2fms | ratio %.2f | %s | load %s",
				w.name, c, svcStats.Throughput, svcStats.Latency.P50, svcStats.Latency.P99, rawStats.Throughput, rawStats.Latency.P99, wl.Ratio, wl.cpuLine(), loadAvg())
			if err := h.convCrossCheck(ctx, api, raw, loginURL, &wl); err != nil {
				failed = append(failed, err.Error())
			}
			rep.Workloads = append(rep.Workloads, wl)
			if n := svcStats.Errors + rawStats.Errors; n > 0 {
				failed = append(failed, fmt.Sprintf("%s c=%d: %d failed requests (service: %s; raw: %s)", w.name, c, n, svcStats.FirstError, rawStats.FirstError))
			}
		}
	}
	if len(failed) > 0 {
		return rep, fmt.Errorf("workloads with failures: %v", failed)
	}
	return rep, nil
}

// seedLongSession appends ConvMessages messages to one session through the
// API, in turns of convSeedTurn, then compacts it fully (no LLM: the
// extractive summarizer), so the summary window has a DAG to read.
func (h *harness) seedLongSession(ctx context.Context, api *apiClient, rep *ConversationReport) error {
	if err := api.post(ctx, ownerPath(convOwner, "/sessions"), map[string]any{"id": convLong, "agent": "bench"}, nil); err != nil {
		return err
	}
	start := time.Now()
	for seq := 0; seq < rep.Messages; seq += convSeedTurn {
		n := min(convSeedTurn, rep.Messages-seq)
		msgs := make([]map[string]any, n)
		for i := range msgs {
			msgs[i] = convMessage(seq + i)
		}
		if err := api.post(ctx, ownerPath(convOwner, "/sessions/"+convLong+"/messages"), map[string]any{"messages": msgs}, nil); err != nil {
			return fmt.Errorf("seeding the long session at message %d: %w", seq, err)
		}
	}
	rep.SeedSec = round3(time.Since(start).Seconds())
	h.logf("conversation: appended %d messages to one session in %.1fs", rep.Messages, rep.SeedSec)
	start = time.Now()
	rep.Compaction = &memory.CompactSessionResult{}
	if err := api.post(ctx, ownerPath(convOwner, "/sessions/"+convLong+"/compact"), map[string]any{"mode": "full", "force": true}, rep.Compaction); err != nil {
		return err
	}
	rep.CompactSec = round3(time.Since(start).Seconds())
	h.logf("conversation: compacted in %.1fs: %d leaves, %d condensed, %d roots (%s)", rep.CompactSec,
		rep.Compaction.LeavesCreated, rep.Compaction.CondensedCreated, len(rep.Compaction.Roots), rep.Compaction.Method)
	rep.Compaction.Roots = nil // the report keeps the counts, not the summaries
	return nil
}

// convMessage is message i of a conversation: user and assistant turns of
// 30-60 tokens, varied enough for the summarizer and the full-text index.
func convMessage(i int) map[string]any {
	topics := []string{"billing", "shipping", "refunds", "the mobile app", "passwords", "the API quota", "invoices", "the webhook"}
	topic := topics[(i/2)%len(topics)]
	if i%2 == 0 {
		return map[string]any{"role": "user", "content": fmt.Sprintf(
			"Message %d: I have a question about %s. Yesterday it stopped working after the update and I could not find the setting again.", i, topic)}
	}
	return map[string]any{"role": "assistant", "content": fmt.Sprintf(
		"Reply %d: thanks, for %s open Settings, then Account, and check the section at the bottom; if it is missing, sign out and in again so the new options load.", i, topic)}
}

// conversationWorkloads are the measured request kinds: append (one turn of
// a user message and an answer, each worker to its own session) and the
// token and summary windows of the long session.
func (h *harness) conversationWorkloads(ctx context.Context, api *apiClient, raw *rawConversation) []workload {
	appendW := workload{name: "append turn",
		service: func(conc int) opFunc {
			ids := h.workerSessions(ctx, api, "svc", conc)
			return func(ctx context.Context, w int) error {
				var res struct {
					Messages []struct {
						Seq int64 `json:"seq"`
					} `json:"messages"`
				}
				if err := api.post(ctx, ownerPath(convOwner, "/sessions/"+ids[w]+"/messages"), map[string]any{"messages": benchTurn(w)}, &res); err != nil {
					return err
				}
				return expectRows(len(res.Messages), 2)
			}
		},
		raw: func(conc int) opFunc {
			ids := h.workerSessions(ctx, api, "raw", conc)
			return func(ctx context.Context, w int) error {
				return raw.appendTurn(ctx, convOwner, ids[w], benchTurn(w))
			}
		}}
	windowW := func(strategy string) workload {
		body := map[string]any{"strategy": strategy, "budget": convBudget}
		return workload{name: strategy + " window",
			service: func(int) opFunc {
				return func(ctx context.Context, _ int) error {
					var win struct {
						Tokens int        `json:"tokens"`
						Items  []struct{} `json:"items"` // counted, not read
					}
					if err := api.post(ctx, ownerPath(convOwner, "/sessions/"+convLong+"/window"), body, &win); err != nil {
						return err
					}
					if win.Tokens > convBudget {
						return fmt.Errorf("window of %d tokens over the budget of %d", win.Tokens, convBudget)
					}
					return expectRows(len(win.Items), 5)
				}
			},
			raw: func(int) opFunc {
				return func(ctx context.Context, _ int) error {
					n, err := raw.window(ctx, convOwner, convLong, strategy == "summary", convBudget)
					if err != nil {
						return err
					}
					return expectRows(n, 5)
				}
			}}
	}
	return []workload{appendW, windowW("token"), windowW("summary")}
}

// workerSessions creates one fresh session per worker (side and
// concurrency in the id, so runs never share one) and returns the ids.
func (h *harness) workerSessions(ctx context.Context, api *apiClient, side string, conc int) []string {
	ids := make([]string, conc)
	stamp := time.Now().UnixNano()
	for w := range ids {
		ids[w] = fmt.Sprintf("%s-c%d-w%d-%d", side, conc, w, stamp)
		if err := api.post(ctx, ownerPath(convOwner, "/sessions"), map[string]any{"id": ids[w]}, nil); err != nil {
			h.logf("conversation: creating session %s: %v (its appends will fail)", ids[w], err)
		}
	}
	return ids
}

// benchTurn is one appended turn: a user message and the answer.
func benchTurn(w int) []map[string]any {
	return []map[string]any{convMessage(2 * w), convMessage(2*w + 1)}
}
