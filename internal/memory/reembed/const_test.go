package reembed

import (
	"testing"

	"github.com/engram-dev/engram/internal/tenant"
)

// TestOwnerVectorsMaxDimsMatchesTenant: Switch builds the covering index
// of memories on the shadow column for exactly the sizes migration 12
// builds it for.
func TestOwnerVectorsMaxDimsMatchesTenant(t *testing.T) {
	if ownerVectorsMaxDims != tenant.OwnerVectorsMaxDims {
		t.Errorf("ownerVectorsMaxDims = %d, tenant.OwnerVectorsMaxDims = %d", ownerVectorsMaxDims, tenant.OwnerVectorsMaxDims)
	}
}
