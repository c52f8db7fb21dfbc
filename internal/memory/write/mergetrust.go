package memory

// Merges keep the lowest trust. A merge writes one row from two writers'
// text; the row must not claim more trust than the less trusted of them,
// or an agent's words would come out of an arbiter (or batch dedup) merge
// as the user's, in a category only the user may write.

// mergeSource is the source of a row whose text the arbiter or the batch
// dedup merged from the neighbour's and the write's: the less trusted of
// the two (LeastTrusted; a row stored without a known source counts as agent).
func mergeSource(nb *neighbour, p *preparedAdd) Source {
	return LeastTrusted(nb.source, p.req.Source)
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
func (s *writer) mergeCategory(nb *neighbour, p *preparedAdd, src Source) (string, bool) {
	protected := func(category string) bool { return s.protectedFor(category, SourceAgent) }
	if src != SourceUser && (protected(nb.category) || protected(p.req.Category)) {
		return "", false
	}
	allowed := func(category string, chooser, other Source) bool {
		return !protected(category) || chooser.Trust() >= other.Trust()
	}
	existing := allowed(nb.category, nb.source, p.req.Source)
	incoming := allowed(p.req.Category, p.req.Source, nb.source)
	switch {
	case existing && incoming:
		return s.mergedCategory(nb.category, p.req.Category), true
	case existing:
		return nb.category, true
	case incoming:
		return p.req.Category, true
	}
	return "", false
}

// mergeDetails adds both writers' sources to a merge's history details.
func mergeDetails(details map[string]any, nb *neighbour, p *preparedAdd) map[string]any {
	details["existingSource"] = string(nb.source)
	details["incomingSource"] = string(p.req.Source)
	return details
}
