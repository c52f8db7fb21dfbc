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
// must come last, is not among them. A new scenario file defines
// func scenarioX(e *operatorEnv, t *testing.T) and adds one line here (a
// method of operatorEnv fits too: run: (*operatorEnv).testX).
func operatorScenarios() []scenario {
	return []scenario{
		{name: "CEL", run: scenarioCEL},
		{name: "Lifecycle", run: scenarioLifecycle},
		{name: "PolicyChange", run: scenarioPolicyChange},
		{name: "TextSearchChange", run: scenarioTextSearchChange},
		{name: "MissingPolicy", run: scenarioMissingPolicy},
		{name: "Drift", run: scenarioDrift},
		{name: "RotateAndPause", run: scenarioRotateAndPause},
		{name: "RetentionJob", run: scenarioRetentionJob},
		{name: "RunNowAndLastRun", run: scenarioRunNowAndLastRun},
		{name: "Delete", run: scenarioDelete},
		{name: "ForeignObjects", run: scenarioForeignObjects},
		{name: "ForeignCronJobAndJob", run: scenarioForeignCronJobAndJob},
		{name: "NetworkPolicy", run: scenarioNetworkPolicy},
		{name: "Scheduling", run: scenarioScheduling},
		{name: "PodDisruptionBudget", run: scenarioPodDisruptionBudget},
		{name: "ServiceTLS", run: scenarioServiceTLS},
		{name: "WorkloadCEL", run: scenarioWorkloadCEL},
		{name: "ResponseByteCap", run: scenarioResponseByteCap},
		{name: "UserSecretsNotCached", run: scenarioUserSecretsNotCached},
		{name: "Samples", run: scenarioSamples},
		{name: "TenantBoundary", run: scenarioTenantBoundary},
		{name: "MultiHostSecretRefused", run: scenarioMultiHostSecretRefused},
		{name: "SilentTenantServer", run: scenarioSilentTenantServer},
		{name: "TenantURLFileRefused", run: scenarioTenantURLFileRefused},
		{name: "LegacyClaimNeedsStatus", run: scenarioReviewLegacyClaimWithoutStatus},
		{name: "DatabaseCEL", run: scenarioDatabaseCEL},
		{name: "Databases", run: scenarioDatabases},
		{name: "DatabaseAccess", run: scenarioDatabaseAccess},
		{name: "DatabaseServerDown", run: scenarioDatabaseServerDown},
		{name: "ConnectionChanged", run: scenarioConnectionChanged},
		{name: "ServerMove", run: scenarioServerMove},
		{name: "ServerMoveAbort", run: scenarioServerMoveAbort},
		{name: "ServerMoveSourceUnknown", run: scenarioServerMoveSourceUnknown},
		{name: "ServerMoveFreezeTooLong", run: scenarioServerMoveFreezeTooLong},
		{name: "ServerMoveFinishedThenLate", run: scenarioServerMoveFinishedThenLate},
		{name: "ServerMovePausedWhileFrozen", run: scenarioServerMovePausedWhileFrozen},
		{name: "EmbeddingChange", run: scenarioEmbeddingChange},
		{name: "DimensionsChange", run: scenarioDimensionsChange},
		{name: "ReembedLostDimsSwitch", run: scenarioReembedLostDimsSwitch},
		{name: "ReembedLostSwitchThenRollback", run: scenarioReembedLostSwitchThenRollback},
		{name: "ReembedTwice", run: scenarioReembedTwice},
		{name: "ReembedLostBeginThenBack", run: scenarioReembedLostBeginThenBack},
		{name: "ReembedLostRetargetThenBack", run: scenarioReembedLostRetargetThenBack},
		{name: "ReembedCEL", run: scenarioReembedCEL},
		{name: "ReembedDualWriteKeys", run: scenarioReembedDualWriteKeys},
		{name: "ReembedThirdModelThrough", run: scenarioReembedThirdModelThrough},
		{name: "OperatorFaults", run: scenarioOperatorFaults},
		{name: "Citus", run: scenarioCitus},
		{name: "CitusWorkerRefused", run: scenarioCitusWorkerRefused},
		{name: "KStatus", run: scenarioKStatus},
		{name: "SpecOverBound", run: scenarioSpecOverBound},
		{name: "CELSpecBounds", run: scenarioCELSpecBounds},
		{name: "Reranking", run: scenarioReranking},
		// It judges the backoff of the operator's connection attempts by
		// their timing: among 4 other scenarios it once saw a burst of
		// attempts 20-40 ms apart that it never saw alone.
		{name: "DatabaseDown", run: scenarioDatabaseDown, serial: true},
		// Its snapshots block every tenant's index builds, and the
		// operator ends the blockers of any provisioning.
		{name: "TenantSnapshot", run: scenarioTenantSnapshot, serial: true},
		// Its reaper ends long transactions over the operator's pools.
		{name: "TenantTransactionReaped", run: scenarioTenantTransactionReaped, serial: true},
		// It counts the operator's provisionings in a global histogram.
		{name: "RestartAndMetrics", run: scenarioRestartAndMetrics, serial: true},
		// They fill the shared lock table (every tenant feels it) and count
		// the watchdog's and the watcher's events.
		{name: "LocksExceeded", run: scenarioLocksExceeded, serial: true},
		{name: "LocksExceededOtherDatabase", run: scenarioLocksExceededOtherDatabase, serial: true},
		{name: "BlockerEventOwnDatabase", run: scenarioBlockerEventOwnDatabase, serial: true},
		// It holds every worker of the operator and judges the queue's order.
		{name: "BegunRuntimeFirst", run: scenarioBegunRuntimeFirst, serial: true},
	}
}
