package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	pgv "github.com/pgvector/pgvector-go"

	"github.com/engram-dev/engram/internal/memory"
)

// The pgbench cross-check of conversation memory: the raw side's statements
// run by PostgreSQL's own client right after each cell, so service/raw of
// the windows and of append rests on the same footing as the searches'
// (raw/pgbench near 1 says the harness's client path does not limit raw).

// convPgbench returns the scripts of workload name at concurrency conc, or
// nil when it has none.
func (h *harness) convPgbench(ctx context.Context, api *apiClient, raw *rawConversation, name string, conc int) ([]string, error) {
	switch name {
	case "token window", "summary window":
		s, err := raw.windowScript(ctx, convOwner, convLong, name == "summary window", convBudget)
		if err != nil {
			return nil, err
		}
		return []string{s}, nil
	case "append turn":
		ids := h.workerSessions(ctx, api, "pgb", conc)
		// Client k of pgbench appends to ids[k]: the ids differ only in
		// the worker's number.
		prefix, suffix, ok := strings.Cut(ids[0], "-w0-")
		if !ok {
			return nil, fmt.Errorf("session id %q: no worker number", ids[0])
		}
		s, err := raw.appendScript(ctx, convOwner, prefix+"-w", "-"+suffix, benchTurn(0))
		if err != nil {
			return nil, err
		}
		return []string{s}, nil
	}
	return nil, nil
}

// windowScript runs one window and renders the statements it ran as one
// pgbench transaction (the same isolation; the window of the long session
// reads the same pages every time, the appends going to other sessions).
func (r *rawConversation) windowScript(ctx context.Context, owner, session string, summary bool, budget int) (string, error) {
	var rec []pgStmt
	if _, err := r.windowRecorded(ctx, owner, session, summary, budget, &rec); err != nil {
		return "", fmt.Errorf("recording a window: %w", err)
	}
	lines := []string{"BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY;"}
	for _, st := range rec {
		l, err := literalSQL(st.sql, st.args)
		if err != nil {
			return "", err
		}
		lines = append(lines, l+";")
	}
	return strings.Join(append(lines, "END;"), "\n") + "\n", nil
}

// appendScript is appendTurn as a pgbench transaction: the session row
// locked (its count read with \gset), the messages inserted in one
// pipeline (appendTurn sends them as one batch), the counters bumped.
// Client k appends to session idPrefix+k+idSuffix; the embeddings are
// computed once here (the raw side computes them per turn, in the harness).
func (r *rawConversation) appendScript(ctx context.Context, owner, idPrefix, idSuffix string, msgs []map[string]any) (string, error) {
	texts := make([]string, len(msgs))
	for i, m := range msgs {
		texts[i] = m["content"].(string)
	}
	vecs, err := r.embedder.Embed(ctx, texts)
	if err != nil {
		return "", fmt.Errorf("embedding the turn: %w", err)
	}
	q := func(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
	sid := fmt.Sprintf("(%s || :client_id::text || %s)", q(idPrefix), q(idSuffix))
	lines := []string{"BEGIN;",
		fmt.Sprintf(`SELECT message_count AS cnt, archived FROM %s WHERE owner_id = %s AND id = %s FOR UPDATE \gset`, r.sessions, q(owner), sid),
		`\startpipeline`}
	tokens := 0
	for i, m := range msgs {
		n := memory.CountTokens(texts[i])
		tokens += n
		lines = append(lines, fmt.Sprintf(`INSERT INTO %s (owner_id, session_id, seq, role, content, tool_name, tool_call_id, tokens, flags, embedding) VALUES (%s, %s, :cnt + %d, %s, %s, '', '', %d, '{}', %s) RETURNING created_at;`,
			r.messages, q(owner), sid, i+1, q(m["role"].(string)), q(texts[i]), n, q(pgv.NewVector(vecs[i]).String())))
	}
	lines = append(lines, `\endpipeline`,
		fmt.Sprintf(`UPDATE %s SET message_count = message_count + %d, next_seq = next_seq + %d, token_count = token_count + %d, last_active_at = now() WHERE owner_id = %s AND id = %s;`,
			r.sessions, len(msgs), len(msgs), tokens, q(owner), sid),
		"END;")
	return strings.Join(lines, "\n") + "\n", nil
}

// literalSQL renders a statement with its arguments as literals, on one line.
func literalSQL(sql string, args []any) (string, error) {
	lits := make([]string, len(args))
	for i, a := range args {
		lit, err := sqlLiteral(a)
		if err != nil {
			return "", fmt.Errorf("argument $%d: %w", i+1, err)
		}
		lits[i] = lit
	}
	body := placeholder.ReplaceAllStringFunc(sql, func(p string) string {
		n, _ := strconv.Atoi(p[1:]) // the pattern's digits
		return lits[n-1]
	})
	return strings.Join(strings.Fields(body), " "), nil
}

// convCrossCheck runs pgbench on the raw side's statements of wl's cell,
// when pgbench is found, and records it in wl.
func (h *harness) convCrossCheck(ctx context.Context, api *apiClient, raw *rawConversation, url string, wl *Workload) error {
	bin := pgbenchBinary()
	if bin == nil {
		return nil
	}
	scripts, err := h.convPgbench(ctx, api, raw, wl.Name, wl.Concurrency)
	if err != nil || scripts == nil {
		return err
	}
	pb, err := h.crossCheck(ctx, bin, url, func(context.Context) ([]string, error) { return scripts, nil }, wl.Concurrency, wl.Raw.Throughput)
	if err != nil {
		return fmt.Errorf("%s c=%d: pgbench cross-check: %w", wl.Name, wl.Concurrency, err)
	}
	wl.Pgbench = pb
	h.logf("conversation: %-16s c=%d  pgbench %7.1f tps (raw/pgbench %.2f)", wl.Name, wl.Concurrency, pb.TPS, pb.RawRatio)
	return nil
}
