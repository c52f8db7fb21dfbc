package controller

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgconn"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/memory"
	"github.com/engram-dev/engram/internal/naming"
	"github.com/engram-dev/engram/internal/tenant"
)

// reasonError is an error that knows the condition reason it stands for.
type reasonError struct {
	reason string
	err    error
}

func (e *reasonError) Error() string { return e.err.Error() }
func (e *reasonError) Unwrap() error { return e.err }

func withReason(reason string, format string, args ...any) error {
	return &reasonError{reason: reason, err: fmt.Errorf(format, args...)}
}

// reasonOf returns the condition reason of err, or fallback.
func reasonOf(err error, fallback string) string {
	var re *reasonError
	if errors.As(err, &re) {
		return re.reason
	}
	return fallback
}

// adminURL resolves the admin connection of a runtime: the Secret named by
// spec.database.connectionSecretRef in the runtime's namespace, or the Secret
// of the operator's namespace labelled memory.engram.dev/connection=<clusterConnection>.
// While the tenant is to be moved to another server, the connection it
// lives on (see connectionID).
func adminURL(ctx context.Context, c client.Reader, rt *memoryv1alpha1.MemoryRuntime, operatorNamespace string) (string, error) {
	db := rt.Spec.Database
	if via := moveSourceVia(rt); via != "" {
		var err error
		if db, err = viaDatabase(rt, via); err != nil {
			return "", err
		}
	}
	return databaseSpecURL(ctx, c, rt, db, operatorNamespace)
}

// databaseSpecURL resolves the admin connection db names for rt.
func databaseSpecURL(ctx context.Context, c client.Reader, rt *memoryv1alpha1.MemoryRuntime, db memoryv1alpha1.DatabaseSpec, operatorNamespace string) (string, error) {
	if db.ClusterConnection != "" {
		return clusterConnectionURL(ctx, c, db.ClusterConnection, operatorNamespace)
	}
	if db.ConnectionSecretRef == nil {
		return "", withReason(memoryv1alpha1.ReasonConnectionInvalid, "spec.database names no connection")
	}
	ref := db.ConnectionSecretRef
	var s corev1.Secret
	if err := c.Get(ctx, client.ObjectKey{Namespace: rt.Namespace, Name: ref.Name}, &s); err != nil {
		if apierrors.IsNotFound(err) {
			return "", withReason(memoryv1alpha1.ReasonConnectionSecretNotFound,
				"the connection Secret %q does not exist in namespace %q", ref.Name, rt.Namespace)
		}
		return "", fmt.Errorf("reading the connection Secret %q: %w", ref.Name, err)
	}
	url, err := tenant.ConnectionURL(s.Data, ref.KeyOr(memoryv1alpha1.DefaultConnectionKey))
	if err == nil {
		// The tenant wrote this Secret: it may set only the parameters
		// that touch no file of the operator's, and the operator's events
		// and node runners know a server by the URL's host, so it must be
		// the one the connection reaches.
		err = tenant.CheckTenantURL(url)
	}
	if err != nil {
		return "", withReason(memoryv1alpha1.ReasonConnectionInvalid, "the connection Secret %q: %v%s", ref.Name, err, overBoundNote(&s))
	}
	return url, nil
}

func clusterConnectionURL(ctx context.Context, c client.Reader, name, operatorNamespace string) (string, error) {
	if operatorNamespace == "" {
		return "", withReason(memoryv1alpha1.ReasonConnectionSecretNotFound,
			"clusterConnection %q cannot be resolved: the operator does not know its namespace (set --operator-namespace or POD_NAMESPACE)", name)
	}
	var list corev1.SecretList
	if err := c.List(ctx, &list, client.InNamespace(operatorNamespace), client.MatchingLabels{naming.LabelConnection: name}); err != nil {
		return "", fmt.Errorf("listing the connection Secrets of %q: %w", operatorNamespace, err)
	}
	switch len(list.Items) {
	case 0:
		return "", withReason(memoryv1alpha1.ReasonConnectionSecretNotFound,
			"no Secret in the operator namespace %q has the label %s=%s", operatorNamespace, naming.LabelConnection, name)
	case 1:
	default:
		return "", withReason(memoryv1alpha1.ReasonConnectionInvalid,
			"%d Secrets in the operator namespace %q have the label %s=%s; keep exactly one", len(list.Items), operatorNamespace, naming.LabelConnection, name)
	}
	s := list.Items[0]
	url, err := tenant.ConnectionURL(s.Data, memoryv1alpha1.DefaultConnectionKey)
	if err != nil {
		return "", withReason(memoryv1alpha1.ReasonConnectionInvalid, "the connection Secret %s/%s: %v%s", operatorNamespace, s.Name, err, overBoundNote(&s))
	}
	return url, nil
}

// databaseURL resolves the admin connection of a MemoryDatabase: the Secret
// spec.secretRef names in the operator's namespace (today's formats, and
// CloudNativePG's <cluster>-superuser Secret), pointed at
// spec.databaseName when it is set.
func databaseURL(ctx context.Context, c client.Reader, db *memoryv1alpha1.MemoryDatabase, operatorNamespace string) (string, error) {
	ref := db.Spec.SecretRef
	if operatorNamespace == "" {
		return "", withReason(memoryv1alpha1.ReasonConnectionSecretNotFound,
			"the Secret %q cannot be read: the operator does not know its namespace (set --operator-namespace or POD_NAMESPACE)", ref.Name)
	}
	var s corev1.Secret
	if err := c.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: ref.Name}, &s); err != nil {
		if apierrors.IsNotFound(err) {
			return "", withReason(memoryv1alpha1.ReasonConnectionSecretNotFound,
				"the Secret %q does not exist in the operator namespace %q", ref.Name, operatorNamespace)
		}
		return "", fmt.Errorf("reading the Secret %s/%s: %w", operatorNamespace, ref.Name, err)
	}
	url, err := tenant.ConnectionURL(s.Data, ref.KeyOr(memoryv1alpha1.DefaultConnectionKey))
	if err == nil && db.Spec.DatabaseName != "" {
		url, err = tenant.WithDatabase(url, db.Spec.DatabaseName)
	}
	if err != nil {
		return "", withReason(memoryv1alpha1.ReasonConnectionInvalid, "the Secret %s/%s: %v%s", operatorNamespace, ref.Name, err, overBoundNote(&s))
	}
	return url, nil
}

// provisionReason classifies a provisioning error into a condition reason.
func provisionReason(err error) string {
	switch {
	case errors.Is(err, tenant.ErrNotManaged):
		return memoryv1alpha1.ReasonSchemaNotManaged
	case errors.Is(err, tenant.ErrOwnedByOther):
		return memoryv1alpha1.ReasonSchemaOwnedByOther
	case errors.Is(err, tenant.ErrExtensionMissing):
		return memoryv1alpha1.ReasonExtensionMissing
	case errors.Is(err, tenant.ErrDimensionsMismatch):
		return memoryv1alpha1.ReasonDimensionsMismatch
	case errors.As(err, new(*tenant.BlockedError)):
		return memoryv1alpha1.ReasonProvisioningBlocked
	case errors.Is(err, tenant.ErrCitusUnsupported):
		return memoryv1alpha1.ReasonCitusUnsupported
	case errors.Is(err, tenant.ErrConnectionShareExhausted):
		return memoryv1alpha1.ReasonConnectionShareExhausted
	case isAuthError(err):
		return memoryv1alpha1.ReasonConnectionInvalid
	case isConnectError(err):
		return memoryv1alpha1.ReasonDatabaseUnreachable
	}
	return reasonOf(err, memoryv1alpha1.ReasonProvisioningFailed)
}

// isConnectError reports whether err means PostgreSQL cannot be used right
// now: it cannot be reached, or the connection broke, or the server is
// restarting, in recovery or shutting down (memory.IsUnavailable, the
// service's 503), or the attempt timed out. A server that answered with
// any other error (a missing database, a permission) is not an outage:
// the condition names that error instead. Either way the reconcile is
// retried with backoff.
func isConnectError(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return memory.IsUnavailable(pgErr)
	}
	return memory.IsUnavailable(err) || errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err)
}

// isAuthError reports whether PostgreSQL refused the admin credentials.
func isAuthError(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && strings.HasPrefix(pgErr.Code, "28")
}

// isUnknownDatabase reports whether the server said the database the
// connection names does not exist: the Secret (or databaseName) is wrong.
func isUnknownDatabase(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "3D000"
}

// scrubAdmin removes the admin user's name from a message meant for a
// condition or an event, which tenants read: pgx quotes it in connection
// errors ("user=postgres") and PostgreSQL in some permission errors.
func scrubAdmin(msg, adminURL string) string {
	user := tenant.AdminUser(adminURL)
	if user == "" {
		return msg
	}
	for _, form := range []string{"user=" + user, `"` + user + `"`, "role " + user, "user " + user} {
		msg = strings.ReplaceAll(msg, form, strings.Replace(form, user, "<admin>", 1))
	}
	return msg
}

// localAddr matches the local end of a socket in a network error ("read
// tcp 127.0.0.1:54212->10.0.0.5:5432"): an ephemeral port, new on every
// attempt.
var localAddr = regexp.MustCompile(`\b((?:read|write) (?:tcp|udp)[46]?) \S+->`)

// stableMessage drops what differs between two attempts that failed for the
// same reason, so retrying does not rewrite the condition every time, and
// cuts the message to maxErrorDetail: an error text comes from the server,
// and a tenant's own server sent 8 MiB of it, which the CRD (32,768
// characters a message) refused, so the runtime kept a stale status
// (issue 26's eighth review, LOW).
func stableMessage(msg string) string {
	return cutMessage(localAddr.ReplaceAllString(msg, "$1 "), maxErrorDetail)
}

// maxErrorDetail bounds a database error in a condition or event: the
// operator's own context and PostgreSQL's message fit with room to spare.
const maxErrorDetail = 1024

// cutMessage cuts msg to at most n bytes on a character boundary, saying so.
func cutMessage(msg string, n int) string {
	if len(msg) <= n {
		return msg
	}
	i := n
	for i > 0 && !utf8.RuneStart(msg[i]) {
		i--
	}
	return msg[:i] + " …(cut)"
}
