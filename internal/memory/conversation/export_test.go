package conversation

// The pure rules of compaction and history search, for the package's
// external tests (which use convtest, itself an importer of this package).
var (
	ChunkRanges       = chunkRanges
	CondenseGroups    = condenseGroups
	Snippet           = snippet
	ExtractiveSummary = extractiveSummary
)
