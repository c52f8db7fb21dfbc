package controller

import (
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/tenant"
)

// TestProvisionReasonOfAnOutage: every error of an outage — a connection
// closed without a word (a backend that exits when the postmaster is
// killed), a shutdown or recovery SQLSTATE, a connect failure, a timeout —
// is DatabaseUnreachable, as the service's 503 is; an answer of the server
// that is not an outage keeps its own reason (test/faults
// TestOperatorRetriesThroughAnOutage gets the first from a real kill -9).
func TestProvisionReasonOfAnOutage(t *testing.T) {
	cases := []struct {
		err  error
		want string
	}{
		{fmt.Errorf("taking the provisioning lease: %w", io.ErrUnexpectedEOF), memoryv1alpha1.ReasonDatabaseUnreachable},
		{fmt.Errorf("migrating: %w", pgconn.ErrConnClosed), memoryv1alpha1.ReasonDatabaseUnreachable},
		{&pgconn.PgError{Code: "57P01"}, memoryv1alpha1.ReasonDatabaseUnreachable}, // admin_shutdown
		{&pgconn.PgError{Code: "57P03"}, memoryv1alpha1.ReasonDatabaseUnreachable}, // cannot_connect_now: in recovery
		{&pgconn.ConnectError{}, memoryv1alpha1.ReasonDatabaseUnreachable},
		{context.DeadlineExceeded, memoryv1alpha1.ReasonDatabaseUnreachable},
		{&pgconn.PgError{Code: "28P01"}, memoryv1alpha1.ReasonConnectionInvalid},  // invalid_password
		{&pgconn.PgError{Code: "3D000"}, memoryv1alpha1.ReasonProvisioningFailed}, // invalid_catalog_name: not an outage
		{&pgconn.PgError{Code: "42501"}, memoryv1alpha1.ReasonProvisioningFailed}, // insufficient_privilege
		{fmt.Errorf("x: %w", tenant.ErrOwnedByOther), memoryv1alpha1.ReasonSchemaOwnedByOther},
	}
	for _, c := range cases {
		if got := provisionReason(c.err); got != c.want {
			t.Errorf("provisionReason(%v) = %s, want %s", c.err, got, c.want)
		}
	}
}

// TestProvisionReasonOfAnExhaustedShare (issue 26's fifth review,
// MEDIUM 1): a runtime beyond its namespace's connection share is
// ConnectionShareExhausted, a reason the reconcile does not retry soon.
func TestProvisionReasonOfAnExhaustedShare(t *testing.T) {
	err := fmt.Errorf("provisioning schema %q: %w", "s", &tenant.ConnectionShareExhaustedError{Namespace: "team", Share: 25, Slots: 22, Capacity: 5, Roles: 6})
	if got := provisionReason(err); got != memoryv1alpha1.ReasonConnectionShareExhausted {
		t.Fatalf("provisionReason(%v) = %s, want %s", err, got, memoryv1alpha1.ReasonConnectionShareExhausted)
	}
}
