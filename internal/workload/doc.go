// Package workload holds what the operator's workloads — the memory service
// (`manager serve`) and the maintenance jobs (`manager job`) — share to
// start: loading the service config file, the logger, and opening the
// tenant's pool and memory store (the environment variables they read are
// named in internal/naming). Keeping it in one place means the service and
// the jobs can never disagree on how a tenant is configured. The operator
// (`manager controller`) uses its log handler too.
package workload
