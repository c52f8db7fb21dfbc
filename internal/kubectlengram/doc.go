// Package kubectlengram is `kubectl engram`, the kubectl plugin of Engram
// (cmd/kubectl-engram): one screen of status per tenant, the one-off
// actions (run-now, rotate-credentials, pause, resume) without remembering
// annotation names, and the memory service's owner routes through the
// Kubernetes API server's service proxy, so the user's own RBAC decides.
// docs/operations.md documents it.
package kubectlengram
