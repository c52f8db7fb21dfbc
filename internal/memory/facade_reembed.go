package memory

import (
	"time"

	"github.com/engram-dev/engram/internal/memory/core"
	"github.com/engram-dev/engram/internal/memory/reembed"
)

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

// DualWriteOutcomes are the outcomes NextEmbedder.Count is given.
var DualWriteOutcomes = []string{core.NextWritten, core.NextFailed, core.NextTimedOut, core.NextStale}

// Constants of package reembed.
const (
	ReembedPhaseFilling = reembed.PhaseFilling
	ReembedMaxBatch     = reembed.MaxBatch
)

// NextEmbedder is the embedder a re-embed of the tenant fills toward, as
// the service's configuration names it (Config.Next): while the tenant's
// reembed row says it fills toward ID, every write of a vector writes
// Embedder's vector of its text into embedding_next too, computed
// alongside the current one (docs/decisions.md, "Dual writes during a
// re-embed").
type NextEmbedder struct {
	ID       ReembedEmbedder
	Embedder Embedder
	// Timeout bounds one call of Embedder (default 2 s): past it, or when
	// Embedder fails, the write is stored without its next vector, which
	// the re-embed Job's fill gives it later.
	Timeout time.Duration
	// Count, when set, counts every dual write's outcome: written, failed,
	// timeout, or stale (the re-embed ended before the write's commit).
	Count func(outcome string)
}

// core is the engine's view of n; nil without one.
func (n *NextEmbedder) core() *core.Next {
	if n == nil || n.Embedder == nil {
		return nil
	}
	return &core.Next{Provider: n.ID.Provider, Model: n.ID.Model, Dimensions: n.ID.Dimensions,
		Embedder: n.Embedder, Timeout: n.Timeout, Count: n.Count}
}
