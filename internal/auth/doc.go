// Package auth is the credential model of the memory service: who a bearer
// token speaks for, and what it may do.
//
// A credential has a role (agent ⊂ app ⊂ admin), an optional owner binding
// and an identity that history records. Two kinds of tokens carry one:
//
//   - static tokens, the lines of the <runtime>-api-token Secret's `tokens`
//     key ("TOKEN [role=admin|app|agent] [owner=OWNER] [name=NAME]");
//   - signed tokens ("egm1.<claims>.<mac>"), minted by an application backend
//     with the Secret's `signing-key`, short-lived and usually bound to one
//     owner, so per-user agent tokens need no Kubernetes round trip.
//
// The package has no HTTP and no Kubernetes imports: the service verifies
// with it, the operator generates the Secret's initial content with it, and
// `manager token` mints with it. docs/security.md describes the model.
package auth
