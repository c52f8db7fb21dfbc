package write

import (
	"context"

	"github.com/engram-dev/engram/internal/memory/core"
)

// Merges keep the lowest trust. A merge writes one row from two writers'
// text; the row must not claim more trust than the less trusted of them,
// or an agent's words would come out of an arbiter (or batch dedup) merge
// as the user's, in a category only the user may write.

// mergeSource is the source of a row whose text the arbiter or the batch
// dedup merged from the neighbour's and the write's: the less trusted of
// the two (core.LeastTrusted; a row stored without a known source counts as agent).
func mergeSource(nb *Neighbour, p *Prepared) core.Source {
	return core.LeastTrusted(nb.source, p.Req.Source)
}

// mergeCategory is the category of a row merged from nb and p whose source
// is src: the more important of the two (mergedCategory) among those the
// merged row may have. A protected category (or one the policy no longer
// has) is allowed only when src is user — so the row still satisfies
// "protected categories accept only source user" — and when the writer who
// chose it is at least as trusted as the other, so the category never
// becomes protected on the less trusted writer's word. ok is false when
// neither category is allowed, or when one of them is protected and src
// is not user: merging would take a protected fact out of its protection
// (or put the other writer's words into it); the caller keeps the two apart.
func (s *Store) mergeCategory(nb *Neighbour, p *Prepared, src core.Source) (string, bool) {
	protected := func(category string) bool { return s.protectedFor(category, core.SourceAgent) }
	if src != core.SourceUser && (protected(nb.category) || protected(p.Req.Category)) {
		return "", false
	}
	allowed := func(category string, chooser, other core.Source) bool {
		return !protected(category) || chooser.Trust() >= other.Trust()
	}
	existing := allowed(nb.category, nb.source, p.Req.Source)
	incoming := allowed(p.Req.Category, p.Req.Source, nb.source)
	switch {
	case existing && incoming:
		return s.mergedCategory(nb.category, p.Req.Category), true
	case existing:
		return nb.category, true
	case incoming:
		return p.Req.Category, true
	}
	return "", false
}

// mergeDetails adds both writers' sources to a merge's history details.
func mergeDetails(details map[string]any, nb *Neighbour, p *Prepared) map[string]any {
	details["existingSource"] = string(nb.source)
	details["incomingSource"] = string(p.Req.Source)
	return details
}

// mergeRewrite rewrites nb with the text w holds (content, vectors,
// category, source and action), merged from the write p: the row takes
// the write's importance, scope, flags, metadata and tags and the expiry
// of its category; its history row names the writer as actor, and its
// details are details with the similarity, both sources and the write's
// labels added.
func (s *Store) mergeRewrite(ctx context.Context, tx core.DBTX, nb *Neighbour, p *Prepared, w rewrite, details map[string]any) (Memory, error) {
	w.importance, w.actor, w.agent, w.session = p.Req.Importance, p.Req.Source, p.Req.Agent, p.Req.Session
	w.sourceSession, w.flags = p.Req.SourceSession, p.Flags
	w.expiry = s.ExpirySeconds(w.category, p.ttl)
	details["similarity"] = nb.Sim
	w.details = labelDetails(mergeDetails(details, nb, p), p)
	w.owner, w.metadata, w.tags = p.Req.Owner, p.Req.Metadata, p.Req.Tags
	return s.rewrite(ctx, tx, nb, w)
}
