package controller

import (
	"fmt"
	"testing"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/tenant"
)

// A Citus cluster tenants cannot live on gets a condition reason of its own
// (not ProvisioningFailed), so a human sees what to change.
func TestProvisionReasonCitusUnsupported(t *testing.T) {
	err := fmt.Errorf("provisioning schema %q: %w: the admin connection reaches a Citus worker node", "s", tenant.ErrCitusUnsupported)
	if got := provisionReason(err); got != memoryv1alpha1.ReasonCitusUnsupported {
		t.Fatalf("provisionReason = %q, want %q", got, memoryv1alpha1.ReasonCitusUnsupported)
	}
}
