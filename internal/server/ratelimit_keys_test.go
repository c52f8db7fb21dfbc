package server

import (
	"testing"
	"time"

	"github.com/engram-dev/engram/internal/auth"
)

// What a credential's buckets (requests, LLM calls, in-flight) are keyed by.

// TestLLMBucketKeyedByRoleAndSubject (issue 26's fifth review, LOW): the
// bucket was keyed by a signed token's subject alone, so an agent's token
// minted with the user's subject spent the user's LLM bucket. The role is
// part of the key now.
func TestLLMBucketKeyedByRoleAndSubject(t *testing.T) {
	exp := time.Unix(1_800_000_000, 0)
	agent := auth.Credential{Role: auth.RoleAgent, ID: "alice", Expires: exp}
	app := auth.Credential{Role: auth.RoleApp, ID: "alice", Expires: exp}
	if bucketKey(agent) == bucketKey(app) {
		t.Fatalf("an agent's and an app's token of subject alice share the bucket %q", bucketKey(agent))
	}
	if static := (auth.Credential{Role: auth.RoleAgent, ID: "alice"}); bucketKey(static) == bucketKey(agent) {
		t.Fatalf("a static token named alice shares a signed token's bucket %q", bucketKey(static))
	}
}

// TestSignedSubjectBucketPerOwner (issue 26's sixth review, L2): a signed
// token's buckets were keyed by role and subject, so an app minting one
// agent token per owner with the bot's name as subject gave every owner's
// agent one request bucket, one LLM bucket and one in-flight count. With a
// bucket of 2 (of a clock that stands still), alice's agent spends its own
// and gets 429; bob's agent, same subject, is still served.
func TestSignedSubjectBucketPerOwner(t *testing.T) {
	tn := newTenant(t)
	srv := tn.serve(t, serverSetup{
		args:  []string{"--rate-limit-per-minute=1", "--rate-limit-burst=2"},
		clock: newTestClock().now})
	tok := map[string]string{}
	for _, owner := range []string{"owner-alice8", "owner-bob8"} {
		signed, err := auth.MintAgent(srv.signingKey, owner, "support-bot", time.Hour, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		tok[owner] = signed
	}
	list := func(owner string) *response {
		return srv.do(t, req{method: "GET", path: memPath(owner, "memories"), token: tok[owner]})
	}
	list("owner-alice8").want(t, 200)
	list("owner-alice8").want(t, 200)
	want429(t, list("owner-alice8"), 60)
	list("owner-bob8").want(t, 200)

	exp := time.Unix(1_800_000_000, 0)
	// Owner ids may hold ':' but never '/': no two (owner, subject) pairs share a key.
	a := auth.Credential{Role: auth.RoleAgent, Owner: "a:b", ID: "c", Expires: exp}
	b := auth.Credential{Role: auth.RoleAgent, Owner: "a", ID: "b:c", Expires: exp}
	if bucketKey(a) == bucketKey(b) {
		t.Errorf("owners a:b and a share the bucket %q", bucketKey(a))
	}
}
