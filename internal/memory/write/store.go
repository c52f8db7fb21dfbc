package write

import (
	"time"

	"github.com/engram-dev/engram/internal/memory/core"
)

// Store is the write path of one tenant over the engine's shared state. It
// is safe for concurrent use.
type Store struct {
	core *core.State
	sql  tables
	// decayNames and decaySeconds are the categories' half-lives as SQL
	// array parameters of DecayExpr (eviction ranks by decayed value).
	decayNames   []string
	decaySeconds []float64
	// ownerVectorsMaxDims: vectors of at most that many dimensions take the
	// owner-local lookup of the covering index (tenant.OwnerVectorsMaxDims).
	ownerVectorsMaxDims int
	// workerAdd: whether the schema has add_memory (Citus, citusadd.go).
	workerAdd workerAddProbe
}

// tables are the quoted names of the tables the write path writes.
type tables struct {
	memories, history, access string
	// columns and insertColumns are Columns and InsertColumns.
	columns, insertColumns string
}

// New returns the write path over st; ownerVectorsMaxDims is the largest
// vector the tenant's covering index holds (tenant.OwnerVectorsMaxDims).
func New(st *core.State, ownerVectorsMaxDims int) *Store {
	access := st.Table("memory_access")
	s := &Store{
		core: st,
		sql: tables{
			memories:      st.Table("memories"),
			history:       st.Table("memory_history"),
			access:        access,
			columns:       Columns(access),
			insertColumns: InsertColumns(),
		},
		ownerVectorsMaxDims: ownerVectorsMaxDims,
	}
	s.decayNames, s.decaySeconds = DecayParams(st)
	return s
}

// DecayParams are the categories' names and half-lives in seconds, as the
// two array parameters of DecayExpr.
func DecayParams(st *core.State) (names []string, seconds []float64) {
	for _, c := range st.Policy.Categories {
		names = append(names, c.Name)
		seconds = append(seconds, time.Duration(c.HalfLife).Seconds())
	}
	return names, seconds
}

// ownerVectors reports whether vectors of dims dimensions take the
// owner-local lookup.
func (s *Store) ownerVectors(dims int) bool { return dims > 0 && dims <= s.ownerVectorsMaxDims }
