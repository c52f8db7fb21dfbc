package memory

import (
	"fmt"
	"testing"
)

// TestDocumentsPerOwnerQuota: agent ids are the client's choice, so an
// owner's documents (and the changelog they keep) were bounded per
// document only. With maxDocumentsPerOwner 3, a write that would create a
// fourth document is a *QuotaError naming the count and writes nothing (no
// document, no changelog entry); the documents the owner has still take
// new versions, and another owner is not affected.
func TestDocumentsPerOwnerQuota(t *testing.T) {
	f := newFixture(t, withPolicy(func(p *Policy) { p.Limits.MaxDocumentsPerOwner = 3 }))
	put := func(owner, agent string, kind DocumentKind, src Source) error {
		_, err := f.store.PutDocument(ctx(t), PutDocumentRequest{Owner: owner, Agent: agent, Kind: kind,
			Content: "Notes for " + agent, Source: src})
		return err
	}
	for _, agent := range []string{"", "bot1"} {
		if err := put("mallory", agent, DocProfile, SourceAgent); err != nil {
			t.Fatal(err)
		}
	}
	if err := put("mallory", "", DocConstraints, SourceUser); err != nil {
		t.Fatal(err)
	}
	changes := f.n(`SELECT count(*) FROM ` + f.store.sql.docChanges)
	wantQuota(t, put("mallory", "bot2", DocProfile, SourceAgent), QuotaDocumentsPerOwner, 3, 3, 1)
	wantQuota(t, put("mallory", "bot1", DocConstraints, SourceUser), QuotaDocumentsPerOwner, 3, 3, 1)
	if n := f.n(`SELECT count(*) FROM ` + f.store.sql.documents + ` WHERE owner_id = 'mallory'`); n != 3 {
		t.Fatalf("mallory has %d documents, want 3", n)
	}
	if n := f.n(`SELECT count(*) FROM ` + f.store.sql.docChanges); n != changes {
		t.Fatalf("refused writes left %d changelog entries", n-changes)
	}
	if err := put("mallory", "bot1", DocProfile, SourceAgent); err != nil {
		t.Fatalf("a new version of a document mallory has: %v", err)
	}
	if err := put("nina", "bot2", DocProfile, SourceAgent); err != nil {
		t.Fatalf("another owner: %v", err)
	}
}

// TestConcurrentDocumentCreationCannotPassTheQuota: 20 writes of new agent
// ids at once, with room for 4 documents, create exactly 4.
func TestConcurrentDocumentCreationCannotPassTheQuota(t *testing.T) {
	f := newFixture(t, withPolicy(func(p *Policy) { p.Limits.MaxDocumentsPerOwner = 4 }), withMaxConns(16))
	errs := runConcurrently(20, func(i int) error {
		_, err := f.store.PutDocument(ctx(t), PutDocumentRequest{Owner: "mallory", Agent: fmt.Sprintf("bot%d", i),
			Kind: DocProfile, Content: "Mallory's notes", Source: SourceAgent})
		return err
	})
	ok, refused := splitQuotaErrors(t, errs, QuotaDocumentsPerOwner, 4)
	n := f.n(`SELECT count(*) FROM ` + f.store.sql.documents + ` WHERE owner_id = 'mallory'`)
	if ok != 4 || refused != 16 || n != 4 {
		t.Fatalf("%d written, %d refused, %d stored; want 4, 16, 4", ok, refused, n)
	}
}
