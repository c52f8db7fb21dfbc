// Package extractive summarizes a conversation without a model: it picks
// whole sentences of the covered turns by salience and writes them back in
// their original order, each under its speaker, within a token budget.
//
// It is what compaction (internal/memory/conversation) and episodes
// (internal/memory/longterm) fall back on when a runtime has no LLM, or
// the LLM fails: deterministic (the same turns and budget give the same
// summary, byte for byte), pure Go, and bounded in cost. It is a leaf of
// the engine: it imports no Engram package, and the caller passes the
// token counter, so a budget means what it means everywhere else.
//
// The steps (docs/conversation.md, "The extractive summarizer"):
//   - split every turn into sentences (split.go);
//   - score them (rank.go): TF-IDF vectors, TextRank centrality over their
//     cosine similarities for the best MaxRanked sentences by TF-IDF
//     (the rest keep their TF-IDF order, after them), boosted for user
//     turns and for names, numbers and dates;
//   - pick them best first, skipping near-duplicates of a picked one and
//     any that no longer fits the budget (summarize.go);
//   - when not even one sentence fits, cut the best one at a word boundary
//     and end it with "…" (cut.go): the only case where a summary holds
//     part of a sentence.
package extractive
