// Package bootstrap holds what `manager serve` and `manager job` share:
// loading the service config file, the logger, and opening the tenant's
// pool and memory store (the environment variables they read are in
// internal/naming). Keeping it in one place means the service and the
// maintenance jobs can never disagree on how a tenant is configured.
package bootstrap
