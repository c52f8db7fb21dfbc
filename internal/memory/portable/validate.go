package portable

import (
	"strings"
	"time"

	"github.com/engram-dev/engram/internal/memory/core"
	"github.com/engram-dev/engram/internal/memory/policy"
	"github.com/engram-dev/engram/internal/memory/write"
)

// checker validates the fields of one line; its FieldErrors prefix names
// the line ("lines[12].content").
type checker struct {
	fe     *core.FieldErrors
	policy *policy.Policy
}

func (c checker) add(field, format string, args ...any) { c.fe.Add(field, format, args...) }

func (c checker) owner(owner string) {
	if owner != write.GlobalOwner && !core.ValidScopeID(owner) {
		c.add("owner", core.ScopeIDRule)
	}
}

func (c checker) scopeID(field, v string, required bool) {
	if (required || v != "") && !core.ValidScopeID(v) {
		c.add(field, core.ScopeIDRule)
	}
}

func (c checker) uuid(field, v string) {
	if !core.ValidID(v) {
		c.add(field, "must be a UUID")
	}
}

func (c checker) optUUID(field string, v *string) {
	if v != nil {
		c.uuid(field, *v)
	}
}

// clockSkew is how far in the future an imported time may be.
const clockSkew = time.Hour

// time checks a time of the past (when something happened): a time far in
// the future would keep a memory from ever ranking down or being evicted.
func (c checker) time(field string, t time.Time) {
	switch {
	case t.IsZero():
		c.add(field, "is required (an RFC 3339 time)")
	case t.After(time.Now().Add(clockSkew)):
		c.add(field, "is in the future (%s)", t.UTC().Format(time.RFC3339))
	}
}

// within refuses a text longer than the write path allows: an import is
// held to the bounds every other write is held to, so no read of what it
// brings costs more than theirs (issue 26, nineteenth review, MEDIUM 2).
func (c checker) within(field, s string, limit int, what string) {
	if len(s) > limit {
		c.add(field, "is %d bytes, more than %s (%d)", len(s), what, limit)
	}
}

// toolRef checks a tool name or call id as an append does.
func (c checker) toolRef(field, s string) {
	if s != "" && !core.ValidToolRef(s) {
		c.add(field, "%s", core.ToolRefRule)
	}
}

// maxImportedCount bounds counters an import brings (access counts):
// far past any real count, far from bigint's end, so adding to them never
// overflows (issue 26, nineteenth review, LOW 2).
const maxImportedCount = 1 << 40

func (c checker) count(field string, v int64) {
	if v < 0 || v > maxImportedCount {
		c.add(field, "must be within 0..%d", int64(maxImportedCount))
	}
}

// summaryBound is the most a summary or an episode may hold.
func (c checker) summaryBound() int {
	return max(core.MinSummaryBoundBytes, c.policy.Conversation.Limits.MaxMessageBytes)
}

// text refuses what PostgreSQL text cannot hold (NUL); JSON strings are
// valid UTF-8 already.
func (c checker) text(field, s string, required bool) {
	if required && strings.TrimSpace(s) == "" {
		c.add(field, "is required and must not be blank")
	}
	if strings.ContainsRune(s, 0) {
		c.add(field, "contains NUL, which PostgreSQL text cannot hold")
	}
}

func (c checker) oneOf(field, v string, allowed ...string) {
	for _, a := range allowed {
		if v == a {
			return
		}
	}
	c.add(field, "%q must be one of %s", v, strings.Join(allowed, ", "))
}

func (c checker) atLeast(field string, v, min int64) {
	if v < min {
		c.add(field, "must be at least %d", min)
	}
}

var sources = []string{"user", "agent", "system", "job"}

// flagInjection is the one flag a message carries (textguard.FlagInjection).
const flagInjection = "injection"

var methods = []string{"llm", "llm-aggressive", "extractive"}

func (c checker) session(r *sessionRec) {
	c.scopeID("id", r.ID, true)
	c.scopeID("agentId", r.AgentID, false)
	c.text("title", r.Title, false)
	c.within("title", r.Title, core.MaxSessionTitleBytes, "a session title's bound")
	c.time("createdAt", r.CreatedAt)
	c.time("lastActiveAt", r.LastActiveAt)
	c.atLeast("messageCount", r.MessageCount, 0)
	if lim := c.policy.Conversation.Limits.MaxMessagesPerSession; lim > 0 && r.MessageCount > int64(lim) {
		c.add("messageCount", "is %d, more than limits.maxMessagesPerSession (%d) of this runtime's policy", r.MessageCount, lim)
	}
	if r.NextSeq != r.MessageCount+1 {
		c.add("nextSeq", "must be messageCount + 1")
	}
	if r.SummarizedThrough < 0 || r.SummarizedThrough >= r.NextSeq {
		c.add("summarizedThrough", "must be within 0..nextSeq-1")
	}
}

func (c checker) message(r *messageRec) {
	c.scopeID("sessionId", r.SessionID, true)
	c.atLeast("seq", r.Seq, 1)
	c.oneOf("role", r.Role, "user", "assistant", "system", "tool")
	c.oneOf("source", r.Source, sources...)
	c.text("content", r.Content, false)
	c.toolRef("toolName", r.ToolName)
	c.toolRef("toolCallId", r.ToolCallID)
	if r.Role == "tool" && r.ToolCallID == "" {
		c.add("toolCallId", "is required of a tool message")
	}
	if len(r.Flags) > 1 || (len(r.Flags) == 1 && r.Flags[0] != flagInjection) {
		c.add("flags", "may only be [%q] (the injection guard's flag)", flagInjection)
	}
	if lim := c.policy.Conversation.Limits.MaxMessageBytes; lim > 0 && len(r.Content) > lim {
		c.add("content", "is %d bytes, more than limits.maxMessageBytes (%d) of this runtime's policy", len(r.Content), lim)
	}
	// The file's count is not trusted: the turn limits and the windows
	// add tokens up, and a message of 0 tokens would fit any budget
	// (issue 26, eighteenth review, MEDIUM 2). Counted as an append counts.
	r.Tokens = int64(core.CountTokens(r.Content))
	c.time("createdAt", r.CreatedAt)
}

func (c checker) summary(r *summaryRec) {
	c.uuid("id", r.ID)
	c.scopeID("sessionId", r.SessionID, true)
	if r.Depth < 0 || r.Depth > 8 {
		c.add("depth", "must be within 0..8")
	}
	c.text("content", r.Content, true)
	c.within("content", r.Content, c.summaryBound(), "a summary's bound, limits.maxMessageBytes or 64 KiB")
	c.text("expandHint", r.ExpandHint, false)
	c.within("expandHint", r.ExpandHint, core.MaxSessionTitleBytes, "an expand hint's bound")
	c.atLeast("earliestSeq", r.EarliestSeq, 1)
	if r.LatestSeq < r.EarliestSeq {
		c.add("latestSeq", "must be at least earliestSeq")
	}
	c.time("earliestAt", r.EarliestAt)
	c.time("latestAt", r.LatestAt)
	r.Tokens = int64(core.CountTokens(r.Content)) // counted anew, as for messages
	c.atLeast("descendantCount", r.DescendantCount, 1)
	c.oneOf("method", r.Method, methods...)
	c.optUUID("parentId", r.ParentID)
	c.time("createdAt", r.CreatedAt)
}

func (c checker) summarySource(r *summarySourceRec) {
	c.uuid("summaryId", r.SummaryID)
	c.atLeast("ord", r.Ord, 0)
	c.optUUID("childId", r.ChildID)
	child, rng := r.ChildID != nil && r.FromSeq == nil && r.ToSeq == nil,
		r.ChildID == nil && r.FromSeq != nil && r.ToSeq != nil && *r.ToSeq > *r.FromSeq
	if !child && !rng {
		c.add("childId", "a source is either a childId or a fromSeq < toSeq range, not both")
	}
}

func (c checker) episode(r *episodeRec) {
	c.uuid("id", r.ID)
	c.scopeID("sessionId", r.SessionID, true)
	c.scopeID("agentId", r.AgentID, false)
	c.text("summary", r.Summary, true)
	c.within("summary", r.Summary, c.summaryBound(), "an episode's bound, limits.maxMessageBytes or 64 KiB")
	c.oneOf("method", r.Method, methods...)
	c.atLeast("userTurns", r.UserTurns, 0)
	c.time("startedAt", r.StartedAt)
	c.time("endedAt", r.EndedAt)
	c.time("createdAt", r.CreatedAt)
}

func (c checker) document(r *documentRec) {
	c.scopeID("agentId", r.AgentID, false)
	c.oneOf("type", r.Type, "profile", "constraints")
	c.atLeast("version", r.Version, 1)
	c.text("content", r.Content, false)
	c.within("content", r.Content, core.MaxDocumentBytes, "a document's bound")
	c.text("source", r.Source, true)
	c.time("updatedAt", r.UpdatedAt)
}

func (c checker) documentChange(r *documentChangeRec) {
	c.scopeID("agentId", r.AgentID, false)
	c.oneOf("type", r.Type, "profile", "constraints")
	c.atLeast("version", r.Version, 1)
	c.text("source", r.Source, true)
	c.text("before", r.Before, false)
	c.text("after", r.After, false)
	c.within("before", r.Before, core.MaxDocumentBytes, "a document's bound")
	c.within("after", r.After, core.MaxDocumentBytes, "a document's bound")
	c.time("createdAt", r.CreatedAt)
}

func (c checker) memory(r *memoryRec) {
	c.uuid("id", r.ID)
	c.scopeID("agentId", r.AgentID, false)
	c.scopeID("sessionId", r.SessionID, false)
	c.scopeID("sourceSession", r.SourceSession, false)
	c.oneOf("source", r.Source, sources...)
	if _, ok := c.policy.Category(r.Category); !ok {
		c.add("category", "%q is not a category of this runtime's policy (one of: %s)", r.Category, strings.Join(c.policy.CategoryNames(), ", "))
	}
	c.text("content", r.Content, true)
	c.within("content", r.Content, c.policy.Limits.MaxContentBytes, "limits.maxContentBytes of this runtime's policy")
	if r.Importance < 1 || r.Importance > 10 {
		c.add("importance", "must be within 1..10")
	}
	r.Metadata = c.fe.Metadata("metadata", r.Metadata) // its compact form, the engine's limits
	c.fe.Tags("tags", r.Tags)
	c.optUUID("supersededBy", r.SupersededBy)
	if r.SupersededBy != nil && *r.SupersededBy == r.ID {
		c.add("supersededBy", "must not be the memory itself")
	}
	if !r.Active && r.DeactivatedAt == nil {
		c.add("deactivatedAt", "is required when active is false")
	}
	c.time("createdAt", r.CreatedAt)
	c.time("updatedAt", r.UpdatedAt)
	c.count("accessCount", r.AccessCount)
	if r.Access != nil {
		c.count("access.count", r.Access.Count)
		c.time("access.lastAccessedAt", r.Access.LastAccessedAt)
	}
}

// globalScope keeps the tenant-wide memories and the owners' apart: a
// memory of the global owner has a global category of this runtime's
// policy, an owner's memory does not.
func (c checker) globalScope(r *memoryRec) {
	cat, ok := c.policy.Category(r.Category)
	switch {
	case !ok:
	case r.Owner == write.GlobalOwner && !cat.Global:
		c.add("category", "%q is not a global category of this runtime's policy, and owner %s holds the tenant-wide memories", r.Category, write.GlobalOwner)
	case r.Owner != write.GlobalOwner && cat.Global:
		c.add("category", "%q is a global category of this runtime's policy: only owner %s holds its memories", r.Category, write.GlobalOwner)
	}
}

func (c checker) history(r *historyRec) {
	before := c.fe.Len()
	c.uuid("memoryId", r.MemoryID)
	c.text("action", r.Action, true)
	c.oneOf("actor", r.Actor, sources...)
	if r.OldContent != nil {
		c.text("oldContent", *r.OldContent, false)
		c.within("oldContent", *r.OldContent, c.policy.Limits.MaxContentBytes, "limits.maxContentBytes of this runtime's policy")
	}
	if r.NewContent != nil {
		c.text("newContent", *r.NewContent, false)
		c.within("newContent", *r.NewContent, c.policy.Limits.MaxContentBytes, "limits.maxContentBytes of this runtime's policy")
	}
	if d := c.fe.HistoryDetails("details", r.Details); d != nil {
		r.Details = d // its compact form, bounded as stored
	} else if c.fe.Len() == before {
		c.add("details", "must be a JSON object")
	}
	c.time("createdAt", r.CreatedAt)
}

// vector checks a record's vector against the dimensions it is stored in,
// and that it has a direction pgvector can compare: one without would make
// every search of its owner fail, as a client's vector would
// (core.VectorDirection).
func (c checker) vector(v []float32, dims int) {
	if v == nil {
		return
	}
	if len(v) != dims {
		c.add("embedding", "has %d dimensions; this runtime stores %d", len(v), dims)
		return
	}
	if msg := core.VectorDirection(v); msg != "" {
		c.add("embedding", "%s", msg)
	}
}
