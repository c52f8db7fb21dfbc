package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/controller/specs"
	"github.com/engram-dev/engram/internal/memory"
	"github.com/engram-dev/engram/internal/naming"
	"github.com/engram-dev/engram/internal/tenant"
)

// ensureFinalizer adds the reclaim finalizer before anything is created in
// the database, so nothing is ever left behind unnoticed.
func (r *MemoryRuntimeReconciler) ensureFinalizer(ctx context.Context, s *runtimeScope) (bool, error) {
	if controllerutil.ContainsFinalizer(s.rt, naming.Finalizer) {
		return false, nil
	}
	// Patch a copy: the response would overwrite the status this reconcile
	// is building in s.rt.
	patched := s.rt.DeepCopy()
	controllerutil.AddFinalizer(patched, naming.Finalizer)
	if err := r.client.Patch(ctx, patched, client.MergeFromWithOptions(s.rt, client.MergeFromWithOptimisticLock{}), client.FieldOwner(naming.FieldOwner)); err != nil {
		return false, fmt.Errorf("adding the finalizer: %w", err)
	}
	s.rt.Finalizers = patched.Finalizers
	s.rt.ResourceVersion = patched.ResourceVersion
	return false, nil
}

// connect resolves the admin connection and its pool.
func (r *MemoryRuntimeReconciler) connect(ctx context.Context, s *runtimeScope) (bool, error) {
	if s.rt.UsesMemoryDatabase() {
		return r.connectDatabase(ctx, s)
	}
	url, err := adminURL(ctx, r.secrets, s.rt, r.opts.OperatorNamespace)
	return r.useConnection(s, url, err, "")
}

// useConnection opens the pool of s at url (urlErr: reading the URL
// failed) and keeps both. A failure with a reason blocks DatabaseReady,
// its message after prefix, and waits for the Secret to be created or
// fixed (it is watched); one without a reason, an API read, is retried.
func (r *MemoryRuntimeReconciler) useConnection(s *runtimeScope, url string, urlErr error, prefix string) (bool, error) {
	err := urlErr
	if err == nil {
		s.pool, err = r.pools.get(s.connID, url)
		err = withReasonIfNone(err, memoryv1alpha1.ReasonConnectionInvalid)
	}
	if err != nil {
		reason := reasonOf(err, "")
		if reason == "" {
			return false, err // an API read failed: retry
		}
		s.facts.block(memoryv1alpha1.ConditionDatabaseReady, reason, prefix+err.Error())
		return true, nil
	}
	s.admin = url
	return false, nil
}

func withReasonIfNone(err error, reason string) error {
	if err == nil || reasonOf(err, "") != "" {
		return err
	}
	return &reasonError{reason: reason, err: err}
}

// provision creates or verifies the schema, roles, migrations and grants. A
// Ready tenant is verified once per GrantCheckInterval, and before a
// requested rotation (so the rotate-credentials annotation also repairs a
// dropped login role or a revoked grant at once); in between nothing is
// asked of PostgreSQL (and nothing is written to the API server).
func (r *MemoryRuntimeReconciler) provision(ctx context.Context, s *runtimeScope) (bool, error) {
	rt := s.rt
	wantText, err := r.textSearchConfig(ctx, rt)
	if err != nil {
		return false, err
	}
	mem := r.memory.get(rt.UID)
	textConfig := r.paceTextSearch(s, mem, wantText)
	// The text search configuration is in it so that a policy's new one is
	// built at once, not at the next periodic check (or, when paced, at the
	// requeue when its wait ends: the fingerprint holds the one applied).
	fingerprint := fmt.Sprintf("%s|%d|%s|%s|%s", s.schema, recordedDimensions(rt), s.connID, naming.ShortHash(s.admin, 8), textConfig)
	now, dueIn := decideProvision(provisionObserved{
		fingerprint: fingerprint, last: mem.fingerprint,
		dbReady:     observedDBReady(rt, mem),
		rotateAsked: rotationAsked(rt, mem),
		sinceCheck:  time.Since(mem.checkedAt), interval: r.opts.GrantCheckInterval,
	})
	if !now {
		reassertReady(s, mem)
		s.requeue.at(dueIn)
		return false, nil
	}

	bound := r.passTimeout(s)
	dbctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	spec := tenant.Spec{
		Schema:           s.schema,
		Dimensions:       int(recordedDimensions(rt)), // the columns', not the spec's during a re-embed
		SwitchingTo:      switchingToDimensions(rt),
		Owner:            TenantOwner(rt),
		Claim:            TenantClaim(rt, s.recorded, s.schema),
		IndexTimeout:     bound,
		Blockers:         r.blockerPolicy(dbctx, s),
		Connections:      tenant.ConnectionPolicy{Share: r.opts.TenantConnectionShare, Need: connectionNeed(rt)},
		TempFileLimit:    r.opts.TenantTempFileLimit,
		TextSearchConfig: textConfig,
	}
	if r.opts.FailAfter != nil {
		spec.FailAfter = func(step string) error { return r.failAfter(s, step) }
	}
	if r.opts.ReplayMigrations != nil {
		spec.Replay = r.opts.ReplayMigrations(client.ObjectKeyFromObject(rt))
	}
	started := time.Now()
	// A failure to ask fails the pass (an unreachable server: its reason below).
	home, stop, err := r.checkConnection(dbctx, s)
	if stop {
		return true, nil
	}
	var res *tenant.Result
	if err == nil {
		r.memory.update(rt.UID, func(st *runtimeState) { st.text = st.text.attempted(textConfig, started) })
		res, err = tenant.Provision(dbctx, s.pool, spec)
	}
	err = r.explainPassTimeout(ctx, dbctx, s, err)
	provisionSeconds.WithLabelValues(resultLabel(err)).Observe(time.Since(started).Seconds())
	if s.faulted {
		return false, err
	}
	if err != nil {
		reason := provisionReason(err)
		var beforeReason string
		if c := rt.GetCondition(memoryv1alpha1.ConditionDatabaseReady); c != nil {
			beforeReason = c.Reason
		}
		msg := stableMessage(scrubAdmin(err.Error(), s.admin))
		s.facts.block(memoryv1alpha1.ConditionDatabaseReady, reason, msg)
		// One Warning per transition into a failure, not one per retry: a
		// database that stays down must not write an event every few
		// seconds (an event is an API write). The condition says when it
		// started; mem.warned covers a cache that has not seen it yet.
		if beforeReason != reason && mem.warned != reason {
			r.eventer().warning(rt, reason, "Provision", "%s", msg)
			r.memory.update(rt.UID, func(st *runtimeState) { st.warned = reason })
		}
		if reason == memoryv1alpha1.ReasonSchemaNotManaged || reason == memoryv1alpha1.ReasonSchemaOwnedByOther ||
			reason == memoryv1alpha1.ReasonDimensionsMismatch || reason == memoryv1alpha1.ReasonCitusUnsupported ||
			reason == memoryv1alpha1.ReasonConnectionShareExhausted {
			// Retrying soon cannot help: a human has to change the spec or
			// the database. Look again at the grant-check interval.
			s.requeue.at(r.opts.GrantCheckInterval)
			return true, nil
		}
		return false, fmt.Errorf("provisioning the tenant: %s", msg)
	}
	if res.Changed() {
		provisionChanges.Add(float64(len(res.Changes)))
		r.eventer().normal(rt, memoryv1alpha1.ReasonProvisioned, "Provision", "schema %s: %s", s.schema, strings.Join(res.Changes, "; "))
	}
	// Only when the limit was set or changed in this pass (tenant.Result):
	// a default runtime on a 100-connection server has the shortfall on
	// every pass, and a restarted operator must not write an event for
	// what is known.
	if res.ConnectionShortfall != "" {
		r.eventer().warning(rt, memoryv1alpha1.ReasonConnectionShareTooSmall, "Provision", "%s", res.ConnectionShortfall)
	}
	// Once per provisioning pass (the grant check interval): what is left
	// stays visible on the runtime until a DBA repairs it.
	for _, w := range res.Warnings {
		r.eventer().warning(rt, memoryv1alpha1.ReasonDBAActionNeeded, "Provision", "schema %s: %s", s.schema, scrubAdmin(w, s.admin))
	}
	r.pools.prove(s.connID)
	s.created = res.Password
	r.memory.update(rt.UID, func(st *runtimeState) {
		st.checkedAt, st.fingerprint, st.schemaVersion, st.warned = time.Now(), fingerprint, res.Version, ""
		st.text = st.text.paced(textConfig, res.TextSearchSwitched, time.Now())
		st.provisioned = fmt.Sprintf("schema %s at version %d; login role %s", s.schema, res.Version, res.LoginRole)
	})
	// status.schema records a schema only once it is this runtime's: the
	// legacy upgrade rule trusts it (TenantClaim), so a refused runtime
	// must never record the schema it asked for.
	rt.Status.Schema = s.schema
	rt.Status.SchemaVersion = int32(res.Version)
	rt.Status.CitusWorker = res.Worker
	recordConnection(rt, home)
	s.facts.provisioned = fmt.Sprintf("schema %s at version %d; login role %s", s.schema, res.Version, res.LoginRole)
	s.requeue.at(r.opts.GrantCheckInterval)
	return false, nil
}

// passTimeout bounds one provisioning or move pass: MigrationTimeout on
// the platform's connections, where large index builds happen, and the
// much shorter TenantServerTimeout on a server a connectionSecretRef of
// the tenant's namespace names, which the tenant may run itself and which
// need not honour statement_timeout.
func (r *MemoryRuntimeReconciler) passTimeout(s *runtimeScope) time.Duration {
	if platformConnection(s.connID) {
		return r.opts.MigrationTimeout
	}
	return r.opts.TenantServerTimeout
}

// explainPassTimeout says which bound ended a pass on a tenant's own
// server, so the condition tells the team what to look at (a server that
// does not answer) and the platform team which flag applies.
func (r *MemoryRuntimeReconciler) explainPassTimeout(ctx, dbctx context.Context, s *runtimeScope, err error) error {
	if err == nil || platformConnection(s.connID) || ctx.Err() != nil || !errors.Is(dbctx.Err(), context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("the runtime's own database server (connectionSecretRef) did not complete the pass within --tenant-server-timeout %s: %w", r.opts.TenantServerTimeout, err)
}

// reconcileCredentials writes the <name>-db Secret. PostgreSQL only tells the
// login password when it creates the role; afterwards the Secret is the only
// copy. When the Secret is gone, its password was edited, or the
// rotate-credentials annotation has a new value, the operator sets a new
// password (ALTER ROLE) and writes that.
func (r *MemoryRuntimeReconciler) reconcileCredentials(ctx context.Context, s *runtimeScope) (bool, error) {
	rt := s.rt
	mem := r.memory.get(rt.UID)
	key := client.ObjectKey{Namespace: rt.Namespace, Name: naming.CredentialsSecretName(rt.Name)}
	var live corev1.Secret
	found, err := getOptional(ctx, r.client, key, &live)
	if err != nil {
		return false, fmt.Errorf("reading the credentials Secret: %w", err)
	}
	stored, intact := specs.StoredPassword(&live)
	if !found || !intact || (mem.password != "" && stored != mem.password) {
		// Before rotating, make sure this is not the cache lagging behind the
		// operator's own last write: ask the API server (a read, and only in
		// this rare case).
		live = corev1.Secret{}
		if found, err = getOptional(ctx, r.reader, key, &live); err != nil {
			return false, fmt.Errorf("reading the credentials Secret: %w", err)
		}
		stored, intact = specs.StoredPassword(&live)
	}

	rotateValue := rt.Annotations[naming.AnnotationRotateCredentials]
	act := decideCredentials(credentialsObserved{
		created: s.created, found: found, intact: intact, stored: stored,
		rotateAsked: rotationAsked(rt, mem), rotateValue: rotateValue, moved: found && movedAway(s, &live),
	})
	password := act.password
	if act.rotate {
		dbctx, cancel := context.WithTimeout(ctx, r.opts.DatabaseTimeout)
		defer cancel()
		pw, err := tenant.RotatePassword(dbctx, s.pool, s.schema, TenantOwner(rt))
		if err != nil {
			// The tenant may have changed under the operator (its login
			// role dropped, say): the retry verifies and repairs it first
			// instead of waiting for the next grant check.
			r.memory.update(rt.UID, func(st *runtimeState) { st.checkedAt = time.Time{} })
			msg := scrubAdmin(err.Error(), s.admin)
			s.facts.block(memoryv1alpha1.ConditionDatabaseReady, provisionReason(err), "rotating the login password: "+msg)
			return false, fmt.Errorf("rotating the login password: %s", msg)
		}
		password = pw
		passwordRotations.WithLabelValues(act.metric).Inc()
		r.eventer().normal(rt, memoryv1alpha1.ReasonCredentialsRotated, act.action, "new password for role %s: %s", tenant.LoginRole(s.schema), act.why)
	}
	if rotateValue != "" {
		rt.Status.RotatedCredentials = rotateValue
	}

	creds, err := specs.LoginCredentials(s.admin, s.schema, password)
	if err != nil {
		s.facts.block(memoryv1alpha1.ConditionDatabaseReady, memoryv1alpha1.ReasonConnectionInvalid, err.Error())
		return true, nil
	}
	if err := r.applyOwned(ctx, s, specs.CredentialsSecret(rt, creds)); err != nil {
		return false, err
	}
	if err := r.failAfter(s, "credentials secret written"); err != nil {
		return false, err
	}
	r.memory.update(rt.UID, func(st *runtimeState) { st.password, st.rotated = password, rotateValue })
	s.creds = creds
	rt.Status.CredentialsSecret = naming.CredentialsSecretName(rt.Name)
	return false, nil
}

// runtimePolicy resolves the MemoryPolicy name a runtime references, or
// says why it cannot (a Ready reason and message; the running config is
// kept). A policy the cache keeps without its spec is refused, never
// resolved: its empty spec would be the built-in defaults (issue 26's
// sixteenth review, MEDIUM 1).
func runtimePolicy(name string, mp *memoryv1alpha1.MemoryPolicy) (memory.Policy, string, string) {
	if held, over := specOverBound(mp); over {
		return memory.Policy{}, memoryv1alpha1.ReasonSpecTooLarge, fmt.Sprintf(
			"MemoryPolicy %q (the running config is kept): %s", name, specOverBoundMessage(held))
	}
	policy, err := ResolvePolicy(&mp.Spec)
	if err == nil {
		err = policy.Validate()
	}
	if err != nil {
		return memory.Policy{}, memoryv1alpha1.ReasonPolicyInvalid, fmt.Sprintf(
			"MemoryPolicy %q is invalid (the running config is kept): %s", name, oneLine(err))
	}
	return policy, "", ""
}

// reconcileConfig resolves the policy and the API keys into the
// <name>-config ConfigMap and the pod template hash.
func (r *MemoryRuntimeReconciler) reconcileConfig(ctx context.Context, s *runtimeScope) (bool, error) {
	rt := s.rt
	policy := memory.DefaultPolicy()
	var applied *memoryv1alpha1.AppliedPolicy
	if name := rt.PolicyName(); name != "" {
		var mp memoryv1alpha1.MemoryPolicy
		if stop, err := getOrBlock(ctx, r.client, s, "MemoryPolicy", name, &mp, memoryv1alpha1.ReasonPolicyNotFound, fmt.Sprintf(
			"MemoryPolicy %q does not exist in namespace %q: create it, or remove spec.policyRef to use the built-in defaults", name, rt.Namespace)); stop || err != nil {
			return stop, err
		}
		var reason, msg string
		if policy, reason, msg = runtimePolicy(name, &mp); reason != "" {
			s.facts.block(memoryv1alpha1.ConditionReady, reason, msg)
			return true, nil
		}
		applied = &memoryv1alpha1.AppliedPolicy{Name: name, Generation: mp.Generation}
		if r := mp.Spec.Reranking; r != nil {
			s.rerankKey, s.policyName = r.APIKeySecretRef, name
		}
	}

	digests, stop, err := r.apiKeyDigests(ctx, s)
	if err != nil || stop {
		return stop, err
	}
	cfg := s.serviceConfig(s.serviceRuntime(), policy, applied)
	configYAML, err := specs.MarshalServiceConfig(cfg)
	if err != nil {
		s.facts.block(memoryv1alpha1.ConditionReady, memoryv1alpha1.ReasonConfigInvalid, oneLine(err))
		return true, nil
	}
	if err := r.applyOwned(ctx, s, specs.ConfigMap(rt, configYAML)); err != nil {
		return false, err
	}
	s.config, s.apiKeys = configYAML, digests
	s.hash = specs.PodTemplateHash(configYAML, specs.PasswordDigest(s.creds.Password), digests...)
	rt.Status.Policy = applied
	rt.Status.ConfigHash = s.hash
	return false, nil
}

// reconcileDeployment applies the memory service Deployment.
func (r *MemoryRuntimeReconciler) reconcileDeployment(ctx context.Context, s *runtimeScope) (bool, error) {
	s.image = specs.Image(s.rt, r.opts.ServiceImage)
	if s.image == "" {
		s.facts.block(memoryv1alpha1.ConditionReady, memoryv1alpha1.ReasonImageNotSet,
			"no image for the memory service: set spec.service.image or start the operator with --service-image (ENGRAM_IMAGE)")
		return true, nil
	}
	live, outcome, err := r.apply.apply(ctx, specs.Deployment(s.serviceRuntime(), s.image, s.hash, s.serviceKeyEnv()...))
	if err != nil {
		s.facts.block(memoryv1alpha1.ConditionReady, memoryv1alpha1.ReasonApplyFailed, err.Error())
		return false, err
	}
	r.recordApply(s.rt, live, outcome)
	if err := r.failAfter(s, "deployment applied"); err != nil {
		return false, err
	}
	s.deploy = live.(*appsv1.Deployment)
	s.facts.deploy = s.deploy
	if s.rt.Replicas() > 0 && !rolledOut(s.rt.Replicas(), s.deploy) {
		// Not serving on every replica yet: say why when a Pod cannot, and
		// look again (runtime_pods.go).
		trouble, err := r.podTrouble(ctx, s.rt)
		if err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "reading the memory service pods")
		}
		s.facts.podTrouble = trouble
		s.requeue.at(podCheckInterval)
	}
	return false, nil
}

// rotationAsked reports whether the rotate-credentials annotation holds a
// value not acted on yet.
func rotationAsked(rt *memoryv1alpha1.MemoryRuntime, mem runtimeState) bool {
	return rotationPending(rt.Annotations[naming.AnnotationRotateCredentials], rt.Status.RotatedCredentials, mem.rotated)
}

// reconcileService applies the Service and publishes the endpoint.
func (r *MemoryRuntimeReconciler) reconcileService(ctx context.Context, s *runtimeScope) (bool, error) {
	if err := r.applyOwned(ctx, s, specs.Service(s.rt)); err != nil {
		return false, err
	}
	s.rt.Status.Endpoint = Endpoint(s.rt)
	s.facts.endpoint = s.rt.Status.Endpoint
	return false, nil
}

// applyOwned applies an owned object, records an event when it changed, and
// turns a failure into the Ready condition.
func (r *MemoryRuntimeReconciler) applyOwned(ctx context.Context, s *runtimeScope, obj client.Object) error {
	live, outcome, err := r.apply.apply(ctx, obj)
	if err != nil {
		s.facts.block(memoryv1alpha1.ConditionReady, memoryv1alpha1.ReasonApplyFailed, err.Error())
		return err
	}
	r.recordApply(s.rt, live, outcome)
	return nil
}

func (r *MemoryRuntimeReconciler) recordApply(rt *memoryv1alpha1.MemoryRuntime, obj client.Object, outcome applyOutcome) {
	if outcome == applyUnchanged {
		return
	}
	kind := fmt.Sprintf("%T", obj)
	kind = kind[strings.LastIndex(kind, ".")+1:]
	r.eventer().changed(rt, obj, kind, string(outcome), "%s %s %s", strings.ToLower(string(outcome)), kind, obj.GetName())
}

func generationOf(p *memoryv1alpha1.AppliedPolicy) int64 {
	if p == nil {
		return 0
	}
	return p.Generation
}

func resultLabel(err error) string {
	if err != nil {
		return "error"
	}
	return "ok"
}
