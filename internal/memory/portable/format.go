package portable

// FormatVersion is the version of the format a header declares. A reader
// refuses other versions: a change of the meaning of a field is a new one.
const FormatVersion = 1

// The record kinds, in the order an export writes an owner's records: a
// row's parents come before it (a message after its session, a summary's
// sources after the summaries, a memory's history after the memories).
const (
	KindHeader         = "header"
	KindSession        = "session"
	KindMessage        = "message"
	KindSummary        = "summary"
	KindSummarySource  = "summarySource"
	KindEpisode        = "episode"
	KindDocument       = "document"
	KindDocumentChange = "documentChange"
	KindMemory         = "memory"
	KindHistory        = "history"
	KindTrailer        = "trailer"
)

// RecordKinds are the kinds of data records, in export order.
var RecordKinds = []string{KindSession, KindMessage, KindSummary, KindSummarySource, KindEpisode,
	KindDocument, KindDocumentChange, KindMemory, KindHistory}

// Embedder names the embedder whose vectors an export carries (or would
// carry): an import reuses vectors only from the same provider, model and
// dimensions, and embeds again otherwise.
type Embedder struct {
	Provider   string `json:"provider"`
	Model      string `json:"model"`
	Dimensions int    `json:"dimensions"`
}

// Header is the first line of an export (or of each part of a resumed one).
type Header struct {
	Kind          string `json:"kind"`
	FormatVersion int    `json:"formatVersion"`
	EngramVersion string `json:"engramVersion"`
	// Scope is "tenant" or "owner"; Owner is set for "owner".
	Scope    string   `json:"scope"`
	Owner    string   `json:"owner,omitempty"`
	Embedder Embedder `json:"embedder"`
	Policy   string   `json:"policy"`
	Vectors  bool     `json:"vectors"`
	// After is the cursor this part resumes from ("" for a first part).
	After      string `json:"after,omitempty"`
	ExportedAt string `json:"exportedAt"`
	// Counts are the rows of each kind in the scope, in the snapshot the
	// part was read from (the whole scope, not only this part).
	Counts Counts `json:"counts"`
}

// Trailer is the last line of a part: what the part holds, the SHA-256 of
// its lines before the trailer (each line with its "\n"), and, when the
// part stopped before the end (the request's time ran out), the cursor to
// resume from.
type Trailer struct {
	Kind     string `json:"kind"`
	Counts   Counts `json:"counts"`
	Lines    int64  `json:"lines"`
	SHA256   string `json:"sha256"`
	Complete bool   `json:"complete"`
	Next     string `json:"next,omitempty"`
}

// envelope is what every line is read as first: its kind and its owner.
type envelope struct {
	Kind  string `json:"kind"`
	Owner string `json:"owner"`
}
