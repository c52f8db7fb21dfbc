package memory

import "github.com/engram-dev/engram/internal/memory/reembed"

// Re-embedding a tenant's vectors with another embedder lives in
// internal/memory/reembed (docs/decisions.md, "Re-embedding on a model
// change"); these names are the façade's: the operator begins, switches
// and aborts, the re-embed Job fills.
type (
	// ReembedEmbedder names what made a vector (reembed.Embedder).
	ReembedEmbedder = reembed.Embedder
	// ReembedTarget is the tenant a re-embed runs on (reembed.Target).
	ReembedTarget = reembed.Target
	// ReembedProgress is how far a re-embed is (reembed.Progress).
	ReembedProgress = reembed.Progress
	// ReembedFiller fills the new vectors batch by batch (reembed.Filler).
	ReembedFiller = reembed.Filler
)

// The re-embed's functions and values (package reembed).
var (
	ReembedNamed        = reembed.Named
	ReembedBegin        = reembed.Begin
	ReembedAbort        = reembed.Abort
	ReembedSwitch       = reembed.Switch
	ReadReembedProgress = reembed.ReadProgress
	NewReembedFiller    = reembed.NewFiller

	ErrReembedBusy       = reembed.ErrBusy
	ErrReembedCitus      = reembed.ErrCitus
	ErrReembedNotFilling = reembed.ErrNotFilling
	ErrReembedRowsLeft   = reembed.ErrRowsLeft
)

// Constants of package reembed.
const (
	ReembedPhaseFilling = reembed.PhaseFilling
	ReembedMaxBatch     = reembed.MaxBatch
)
