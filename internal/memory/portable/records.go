package portable

import (
	"encoding/json"
	"time"
)

// The data records as an import reads them. Their JSON names are those
// the export's SQL writes (kinds.go); TestExportMatchesSchema and the
// round trip keep the two in step with docs/export.schema.json.

type sessionRec struct {
	Kind               string     `json:"kind"`
	Owner              string     `json:"owner"`
	ID                 string     `json:"id"`
	AgentID            string     `json:"agentId"`
	Title              string     `json:"title"`
	Archived           bool       `json:"archived"`
	CreatedAt          time.Time  `json:"createdAt"`
	LastActiveAt       time.Time  `json:"lastActiveAt"`
	EndedAt            *time.Time `json:"endedAt"`
	MessageCount       int64      `json:"messageCount"`
	TokenCount         int64      `json:"tokenCount"`
	NextSeq            int64      `json:"nextSeq"`
	SummarizedThrough  int64      `json:"summarizedThrough"`
	SummarizedTokens   int64      `json:"summarizedTokens"`
	SummaryCount       int64      `json:"summaryCount"`
	ExtractedThrough   int64      `json:"extractedThrough"`
	ProfileVersion     int64      `json:"profileVersion"`
	ConstraintsVersion int64      `json:"constraintsVersion"`
}

type messageRec struct {
	Kind       string    `json:"kind"`
	Owner      string    `json:"owner"`
	SessionID  string    `json:"sessionId"`
	Seq        int64     `json:"seq"`
	Role       string    `json:"role"`
	Source     string    `json:"source"`
	Content    string    `json:"content"`
	ToolName   string    `json:"toolName"`
	ToolCallID string    `json:"toolCallId"`
	Tokens     int64     `json:"tokens"`
	Flags      []string  `json:"flags"`
	CreatedAt  time.Time `json:"createdAt"`
	Embedding  []float32 `json:"embedding,omitempty"`
}

type summaryRec struct {
	Kind            string    `json:"kind"`
	Owner           string    `json:"owner"`
	ID              string    `json:"id"`
	SessionID       string    `json:"sessionId"`
	Depth           int64     `json:"depth"`
	Content         string    `json:"content"`
	ExpandHint      string    `json:"expandHint"`
	EarliestSeq     int64     `json:"earliestSeq"`
	LatestSeq       int64     `json:"latestSeq"`
	EarliestAt      time.Time `json:"earliestAt"`
	LatestAt        time.Time `json:"latestAt"`
	Tokens          int64     `json:"tokens"`
	DescendantCount int64     `json:"descendantCount"`
	Method          string    `json:"method"`
	ParentID        *string   `json:"parentId"`
	CreatedAt       time.Time `json:"createdAt"`
	Embedding       []float32 `json:"embedding,omitempty"`
}

type summarySourceRec struct {
	Kind      string  `json:"kind"`
	Owner     string  `json:"owner"`
	SummaryID string  `json:"summaryId"`
	Ord       int64   `json:"ord"`
	ChildID   *string `json:"childId"`
	FromSeq   *int64  `json:"fromSeq"`
	ToSeq     *int64  `json:"toSeq"`
}

type episodeRec struct {
	Kind      string    `json:"kind"`
	Owner     string    `json:"owner"`
	ID        string    `json:"id"`
	SessionID string    `json:"sessionId"`
	AgentID   string    `json:"agentId"`
	Summary   string    `json:"summary"`
	Method    string    `json:"method"`
	UserTurns int64     `json:"userTurns"`
	StartedAt time.Time `json:"startedAt"`
	EndedAt   time.Time `json:"endedAt"`
	CreatedAt time.Time `json:"createdAt"`
	Embedding []float32 `json:"embedding,omitempty"`
}

type documentRec struct {
	Kind      string    `json:"kind"`
	Owner     string    `json:"owner"`
	AgentID   string    `json:"agentId"`
	Type      string    `json:"type"`
	Version   int64     `json:"version"`
	Content   string    `json:"content"`
	Source    string    `json:"source"`
	UpdatedAt time.Time `json:"updatedAt"`
}

type documentChangeRec struct {
	Kind      string    `json:"kind"`
	Owner     string    `json:"owner"`
	AgentID   string    `json:"agentId"`
	Type      string    `json:"type"`
	Version   int64     `json:"version"`
	Source    string    `json:"source"`
	ActorID   string    `json:"actorId"`
	Before    string    `json:"before"`
	After     string    `json:"after"`
	CreatedAt time.Time `json:"createdAt"`
}

type accessRec struct {
	Count          int64     `json:"count"`
	LastAccessedAt time.Time `json:"lastAccessedAt"`
}

type memoryRec struct {
	Kind          string   `json:"kind"`
	Owner         string   `json:"owner"`
	ID            string   `json:"id"`
	AgentID       string   `json:"agentId"`
	SessionID     string   `json:"sessionId"`
	SourceSession string   `json:"sourceSession"`
	Source        string   `json:"source"`
	Category      string   `json:"category"`
	Content       string   `json:"content"`
	Importance    int64    `json:"importance"`
	Flags         []string `json:"flags"`
	// Metadata and Tags are absent in files written before they existed
	// (issue 31): they then import as none.
	Metadata       json.RawMessage `json:"metadata,omitempty"`
	Tags           []string        `json:"tags,omitempty"`
	Active         bool            `json:"active"`
	SupersededBy   *string         `json:"supersededBy"`
	ExpiresAt      *time.Time      `json:"expiresAt"`
	CreatedAt      time.Time       `json:"createdAt"`
	UpdatedAt      time.Time       `json:"updatedAt"`
	DeactivatedAt  *time.Time      `json:"deactivatedAt"`
	AccessCount    int64           `json:"accessCount"`
	LastAccessedAt *time.Time      `json:"lastAccessedAt"`
	Access         *accessRec      `json:"access"`
	Embedding      []float32       `json:"embedding,omitempty"`
}

type historyRec struct {
	Kind       string          `json:"kind"`
	Owner      string          `json:"owner"`
	MemoryID   string          `json:"memoryId"`
	Action     string          `json:"action"`
	Actor      string          `json:"actor"`
	ActorID    string          `json:"actorId"`
	OldContent *string         `json:"oldContent"`
	NewContent *string         `json:"newContent"`
	Details    json.RawMessage `json:"details"`
	CreatedAt  time.Time       `json:"createdAt"`
}
