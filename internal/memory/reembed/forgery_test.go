package reembed_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/engram-dev/engram/internal/memory"
	"github.com/engram-dev/engram/internal/memory/reembed"
)

// TestReembedStateIsNotTheTenants: the login role (the tenant's own
// credentials) may not rewrite the re-embed state the operator records and
// trusts: the phase, the embedders, the start. It may update only the
// fill's count, and the fill works with that alone.
func TestReembedStateIsNotTheTenants(t *testing.T) {
	f := newFixture(t)
	f.seed(3)
	to, emb := f.beginBuiltin(t, 512)
	for _, set := range []string{
		"phase = 'idle', next_provider = NULL, next_model = NULL, next_dimensions = NULL",
		"next_model = 'forged'",
		"provider = 'forged', model = 'forged-model'",
		"dimensions = 3",
	} {
		_, err := f.login.Exec(ctx(t), `UPDATE `+f.target.Schema+`.reembed SET `+set)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "42501" {
			t.Errorf("the login role sets %s: %v; want permission denied (42501)", set, err)
		}
	}
	if n := fill(t, reembed.NewFiller(f.login, f.target, to, emb), 64); n == 0 {
		t.Fatal("the fill filled nothing")
	}
	if err := reembed.Switch(ctx(t), f.admin, f.target); err != nil {
		t.Fatal(err)
	}
	st, err := reembed.ReadState(ctx(t), f.admin, f.target)
	if err != nil || st.Current != to {
		t.Errorf("after the switch the current embedder is %+v, %v; want %+v", st.Current, err, to)
	}
}

// TestReembedAbortRemovesLeftovers: a state row reset by hand (by an
// admin) while the shadow columns, indexes and trigger are still there
// leaves Abort something to remove, and a later Begin works.
func TestReembedAbortRemovesLeftovers(t *testing.T) {
	f := newFixture(t)
	f.seed(3)
	to, _ := f.beginBuiltin(t, 512)
	f.sql(`UPDATE %[1]s.reembed SET phase = 'idle', next_provider = NULL, next_model = NULL, next_dimensions = NULL`)
	if err := reembed.Abort(ctx(t), f.admin, f.target); err != nil {
		t.Fatal(err)
	}
	if c, i, tr := f.reembedObjects(); c != 0 || i != 0 || tr != 0 {
		t.Errorf("after Abort: %d shadow columns, %d re-embed indexes, %d triggers; want none", c, i, tr)
	}
	if err := reembed.Begin(ctx(t), f.admin, f.target, f.from, to); err != nil {
		t.Errorf("Begin after the abort: %v", err)
	}
}

// TestReembedRewriteDuringTheEmbedCall: a text rewritten between the
// fill's read and its write (while the embedder runs) does not keep the
// vector of its old text: the write checks the text's md5, the row is left
// for a later batch, and after the switch every memory holds the vector of
// its current text.
func TestReembedRewriteDuringTheEmbedCall(t *testing.T) {
	f := newFixture(t)
	f.seed(5)
	to, emb := f.beginBuiltin(t, 768)
	fill(t, reembed.NewFiller(f.login, f.target, to, &rewriting{Embedder: emb, f: f}), 64)
	if err := reembed.Switch(ctx(t), f.admin, f.target); err != nil {
		t.Fatal(err)
	}
	if n := f.count(`SELECT count(*) FROM %[1]s.memories WHERE content LIKE 'rewritten mid-batch: %%'`); n != 1 {
		t.Fatalf("%d memories rewritten during the embed call; want 1", n)
	}
	f.checkVectors(emb, "memories", "content", "embedding")
}

// rewriting rewrites the first text of its first batch while embedding it.
type rewriting struct {
	memory.Embedder
	f    *fixture
	done bool
}

func (r *rewriting) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if !r.done {
		r.done = true
		r.f.sql(`UPDATE %[1]s.memories SET content = 'rewritten mid-batch: ' || content WHERE content = $1`, texts[0])
	}
	return r.Embedder.Embed(ctx, texts)
}
