package jobrun

import (
	"context"
	"testing"

	pgv "github.com/pgvector/pgvector-go"

	"github.com/engram-dev/engram/internal/memory"
)

// TestReembedOperationFillsOtherDimensions: `manager job --ops=reembed`
// toward the builtin embedder of 768 dimensions on a tenant of 128 (a
// change of spec.embedding.dimensions). The Job's config names the
// recorded embedder (128, what the operator renders until the switch) and
// the flags the new one: the run fills every row with a 768-dimension
// vector, and after the switch the column is vector(768) and every memory
// holds the new embedder's vector of its text.
func TestReembedOperationFillsOtherDimensions(t *testing.T) {
	jt := newJobTenant(t)
	jt.addTopics(t, 5, "memory %d about topic %d")
	ctx := context.Background()
	target := jt.beginReembed(t, ctx, memory.ReembedNamed("builtin", "", 768))
	code, sum, _ := runMain(t, jt, "--ops=reembed", "--reembed-provider=builtin", "--reembed-dimensions=768", "--reembed-pace=0", "--reembed-max-run=2s")
	if code != 0 || sum.Result != memory.RunSucceeded || affected(sum)[OpReembed] != 5 {
		t.Fatalf("the run toward 768 dimensions: exit %d, %+v; want 5 rows filled", code, sum)
	}
	if err := memory.ReembedSwitch(ctx, jt.admin, target); err != nil {
		t.Fatal(err)
	}
	var typ string
	if err := jt.admin.QueryRow(ctx, `SELECT format_type(atttypid, atttypmod) FROM pg_attribute
		WHERE attrelid = to_regclass($1) AND attname = 'embedding' AND NOT attisdropped`, jt.schema+".memories").Scan(&typ); err != nil || typ != "vector(768)" {
		t.Fatalf("memories.embedding after the switch: %q (%v), want vector(768)", typ, err)
	}
	emb, err := memory.NewBuiltinEmbedder(768)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := jt.admin.Query(ctx, `SELECT content, embedding FROM `+jt.schema+`.memories`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n, wrong := 0, 0
	for rows.Next() {
		var content string
		var v pgv.Vector
		if err := rows.Scan(&content, &v); err != nil {
			t.Fatal(err)
		}
		n++
		want, err := emb.Embed(ctx, []string{content})
		if err != nil {
			t.Fatal(err)
		}
		if got := v.Slice(); len(got) != 768 || !sameVector(got, want[0]) {
			wrong++
		}
	}
	if rows.Err() != nil || n != 5 || wrong != 0 {
		t.Errorf("after the switch: %d memories, %d without the 768-dimension builtin vector of their text (%v)", n, wrong, rows.Err())
	}
}
