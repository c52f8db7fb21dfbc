package controller

import "testing"

// scenarioWidth is how many independent scenarios run at once: enough to
// overlap their waits on the operator, few enough for a shared 2-core CI
// machine (the operator reconciles 4 runtimes at once).
const scenarioWidth = 4

// scenario is one envtest scenario of TestOperator. It creates its own
// namespace and objects (e.newNamespace, e.readyRuntime, e.botNamespace)
// and reads no other scenario's, so it runs alone with -run.
type scenario struct {
	name string
	run  func(*operatorEnv, *testing.T)
	// serial scenarios observe the whole operator or database, not only
	// their own objects (global metrics, sessions of every tenant, a
	// snapshot that blocks every provisioning): they run one at a time,
	// after the concurrent ones.
	serial bool
}

// operatorScenarios lists TestOperator's scenarios; the idle check, which
// must come last, is not among them. A new scenario file adds one line here.
func operatorScenarios() []scenario {
	return []scenario{
		{name: "CEL", run: (*operatorEnv).testCEL},
		{name: "Lifecycle", run: (*operatorEnv).testLifecycle},
		{name: "PolicyChange", run: (*operatorEnv).testPolicyChange},
		{name: "MissingPolicy", run: (*operatorEnv).testMissingPolicy},
		{name: "DatabaseDown", run: (*operatorEnv).testDatabaseDown},
		{name: "Drift", run: (*operatorEnv).testDrift},
		{name: "RotateAndPause", run: (*operatorEnv).testRotateAndPause},
		{name: "RetentionJob", run: (*operatorEnv).testRetentionJob},
		{name: "RunNowAndLastRun", run: (*operatorEnv).testRunNowAndLastRun},
		{name: "Delete", run: (*operatorEnv).testDelete},
		{name: "ForeignObjects", run: (*operatorEnv).testForeignObjects},
		{name: "ForeignCronJobAndJob", run: (*operatorEnv).testForeignCronJobAndJob},
		{name: "NetworkPolicy", run: (*operatorEnv).testNetworkPolicy},
		{name: "Scheduling", run: (*operatorEnv).testScheduling},
		{name: "PodDisruptionBudget", run: (*operatorEnv).testPodDisruptionBudget},
		{name: "ServiceTLS", run: (*operatorEnv).testServiceTLS},
		{name: "WorkloadCEL", run: (*operatorEnv).testWorkloadCEL},
		{name: "ResponseByteCap", run: (*operatorEnv).testResponseByteCap},
		{name: "UserSecretsNotCached", run: (*operatorEnv).testUserSecretsNotCached},
		{name: "Samples", run: (*operatorEnv).testSamples},
		{name: "TenantBoundary", run: (*operatorEnv).testTenantBoundary},
		{name: "LegacyClaimNeedsStatus", run: (*operatorEnv).testReviewLegacyClaimWithoutStatus},
		{name: "DatabaseCEL", run: (*operatorEnv).testDatabaseCEL},
		{name: "Databases", run: (*operatorEnv).testDatabases},
		{name: "DatabaseServerDown", run: (*operatorEnv).testDatabaseServerDown},
		{name: "OperatorFaults", run: (*operatorEnv).testOperatorFaults},
		{name: "KStatus", run: (*operatorEnv).testKStatus},
		{name: "Citus", run: (*operatorEnv).testCitus},
		// Its snapshots block every tenant's index builds, and the
		// operator ends the blockers of any provisioning.
		{name: "TenantSnapshot", run: (*operatorEnv).testTenantSnapshot, serial: true},
		// Its reaper ends long transactions over the operator's pools.
		{name: "TenantTransactionReaped", run: (*operatorEnv).testTenantTransactionReaped, serial: true},
		// It counts the operator's provisionings in a global histogram.
		{name: "RestartAndMetrics", run: (*operatorEnv).testRestartAndMetrics, serial: true},
	}
}
