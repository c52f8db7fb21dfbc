package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/controller/specs"
	"github.com/engram-dev/engram/internal/memory"
	"github.com/engram-dev/engram/internal/naming"
	"github.com/engram-dev/engram/internal/tenant"
)

// A re-embed (issue 29, docs/decisions.md "Re-embedding on a model
// change"): a spec.embedding change on a tenant with vectors begins one
// (memory.ReembedBegin, as the owner role), a Job owned by the runtime fills the
// new vectors with the spec's embedder (`manager job --ops=reembed`) and
// keeps filling the rows the service writes until the switch; whenever the
// operator reads no row left (while the Job runs, or once it completed) it
// switches the columns (memory.ReembedSwitch, which counts again under its
// lock) and records the new embedder in status.embedding; the
// reconcile then rolls the service out with it. Until then the service's
// config and Deployment keep the recorded embedder and name the spec's as
// the next (dual writes, memoryruntime_dual.go); the rest of the spec
// rolls out as usual.

// Timing of a re-embed's reconciles.
const (
	// reembedPoll: how often a running Job's progress is read (the Job's
	// own events wake the reconcile at its end); reembedPollNear when at
	// most reembedNearRows rows are left: the switch is tried whenever a
	// read finds none, and the Job keeps up with the service's writes
	// until then (hostile review H4), so the sooner the better.
	reembedPoll     = 15 * time.Second
	reembedPollNear = 2 * time.Second
	reembedNearRows = 256
	// reembedRetryAfter: the pause after a failed Job before the next.
	reembedRetryAfter = time.Minute
)

// reembedder drives a runtime's re-embed (its own type: the reconciler's
// method set stays within the tree's bound).
type reembedder struct{ *MemoryRuntimeReconciler }

func reembedActive(re *memoryv1alpha1.ReembedStatus) bool {
	return re != nil && (re.Phase == memoryv1alpha1.ReembedFilling || re.Phase == memoryv1alpha1.ReembedPaused)
}

func reembedID(e memoryv1alpha1.RuntimeEmbedder) memory.ReembedEmbedder {
	return memory.ReembedNamed(string(e.Provider), e.Model, int(e.Dimensions))
}

func reembedTarget(s *runtimeScope) memory.ReembedTarget {
	return memory.ReembedTarget{Schema: s.schema, Owner: tenant.OwnerRole(s.schema), Login: tenant.LoginRole(s.schema)}
}

// beginReembed starts re-embedding the tenant's vectors from to.
func (r reembedder) beginReembed(ctx context.Context, s *runtimeScope, from, to memoryv1alpha1.RuntimeEmbedder) (bool, error) {
	prev := s.rt.Status.Reembed
	// Job names go on counting across re-embeds: a Job of an earlier one
	// that the cache still holds is never taken for this one's.
	var runs int32
	if prev != nil {
		runs = prev.Runs
	}
	now := metav1.Now()
	next := &memoryv1alpha1.ReembedStatus{From: from, To: to, Phase: memoryv1alpha1.ReembedFilling, StartedAt: &now, Runs: runs + 1}
	if !reembedActive(prev) {
		// The intent first, in a status write of its own: a re-embed begun
		// in the database is always one status records, so a status write
		// lost after Begin cannot leave one that nothing aborts when
		// spec.embedding is set back (hostile review M1).
		if err := r.recordReembedIntent(ctx, s, next); err != nil {
			return false, err
		}
	}
	dbctx, cancel := context.WithTimeout(ctx, r.passTimeout(s))
	defer cancel()
	t := reembedTarget(s)
	err := memory.ReembedBegin(dbctx, s.pool, t, reembedID(from), reembedID(to))
	if errors.Is(err, memory.ErrReembedBusy) {
		// One toward another embedder, which status no longer records (a
		// status write lost): the status is the record, so it goes.
		if err = memory.ReembedAbort(dbctx, s.pool, t); err == nil {
			err = memory.ReembedBegin(dbctx, s.pool, t, reembedID(from), reembedID(to))
		}
	}
	if errors.Is(err, memory.ErrReembedCitus) {
		msg := fmt.Sprintf("spec.embedding names %s, but this tenant's stored vectors were made with %s (status.embedding), and re-embedding "+
			"a tenant on Citus is not supported yet, so the change is not rolled out and the service keeps %s. Set spec.embedding back to %s, "+
			"or create a runtime with the new embedder and move the data into it: export without vectors, import into the new runtime, "+
			"which embeds every record again (docs/export.md)", embedderName(to), embedderName(from), embedderName(from), embedderName(from))
		s.rt.Status.Reembed = prev // nothing begun: the intent goes with this pass's status write
		r.warnEmbedderOnce(s, msg)
		s.facts.block(memoryv1alpha1.ConditionReady, memoryv1alpha1.ReasonEmbeddingChangeNeedsReembed, msg)
		s.requeue.at(r.opts.GrantCheckInterval)
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("beginning the re-embed from %s to %s: %s", embedderName(from), embedderName(to), scrubAdmin(err.Error(), s.admin))
	}
	s.rt.Status.Reembed = next.DeepCopy()
	r.eventer().normal(s.rt, memoryv1alpha1.ReasonReembedding, "Reembed", "re-embedding the tenant's vectors: %s → %s", embedderName(from), embedderName(to))
	return r.driveReembed(ctx, s, to)
}

// recordReembedIntent writes status.reembed = next before Begin (as
// recordPlacement writes the placement before provisioning). A Begin that
// then fails leaves a Filling status whose next pass reads an idle tenant:
// it begins again, or, spec.embedding set back, aborts (a no-op).
func (r reembedder) recordReembedIntent(ctx context.Context, s *runtimeScope, next *memoryv1alpha1.ReembedStatus) error {
	obj := s.orig.DeepCopy()
	obj.Status.Reembed = next.DeepCopy()
	// Optimistically locked: the decision to begin rests on status.embedding
	// as this pass read it, and a pass that read the cache before its own
	// last status write (status.embedding not yet the model the spec just
	// moved to on an empty tenant) would begin a re-embed from a stale
	// embedder. The conflict sends it back to read again.
	patch := client.MergeFromWithOptions(s.orig, client.MergeFromWithOptimisticLock{})
	if err := r.client.Status().Patch(ctx, obj, patch, client.FieldOwner(naming.FieldOwner)); err != nil {
		return fmt.Errorf("recording the re-embed to %s before beginning it: %w", embedderName(next.To), err)
	}
	s.orig.Status.Reembed = next.DeepCopy()
	s.rt.Status.Reembed = next.DeepCopy()
	// The final patch names the latest version (see ensureFinalizer).
	s.rt.ResourceVersion = obj.ResourceVersion
	return nil
}

// driveReembed moves the re-embed under way one step: a rollback or a
// change of target, a Job to start or wait for, or the switch.
func (r reembedder) driveReembed(ctx context.Context, s *runtimeScope, want memoryv1alpha1.RuntimeEmbedder) (bool, error) {
	re := s.rt.Status.Reembed
	// The database first: status is written after the step it records, so
	// a lost write leaves status behind the tenant, never ahead of it.
	dbctx, cancel := context.WithTimeout(ctx, r.opts.DatabaseTimeout)
	defer cancel()
	p, err := memory.ReadReembedProgress(dbctx, s.pool, reembedTarget(s))
	if err != nil {
		return false, fmt.Errorf("%s", scrubAdmin(err.Error(), s.admin))
	}
	if p.Phase != memory.ReembedPhaseFilling && p.Current == reembedID(re.To) {
		// Switched, the status write lost: the column holds re.To's vectors
		// whatever the spec now says, so that is recorded before a rollback
		// (which would otherwise record re.From over re.To's vectors) or a
		// new target is acted on, in the next pass.
		if err := r.finishSwitch(ctx, s, re); err != nil {
			return false, err
		}
		s.requeue.at(time.Second)
		return true, nil
	}
	if want == re.From {
		return false, r.abortReembed(ctx, s, re, "spec.embedding was set back")
	}
	if want != re.To {
		// A third embedder: what was filled is of no use to it.
		if err := r.abortReembed(ctx, s, re, fmt.Sprintf("spec.embedding now names %s", embedderName(want))); err != nil {
			return false, err
		}
		return r.beginReembed(ctx, s, re.From, want)
	}
	if p.Phase != memory.ReembedPhaseFilling {
		return r.beginReembed(ctx, s, re.From, re.To) // resumes an interrupted Begin
	}
	if p.Next != reembedID(re.To) || p.Current != reembedID(re.From) {
		// The tenant fills toward another embedder than status records (a
		// retarget whose status write was lost): Begin aborts it (ErrBusy)
		// and begins toward re.To, so a Job of the other target can never
		// fill the rows a switch then records as re.To's.
		return r.beginReembed(ctx, s, re.From, re.To)
	}
	re.Filled, re.Left = p.Filled, p.LeftTotal
	if re.Left == 0 && re.Filled == 0 {
		// Nothing to embed (a change of dimensions on a tenant without a
		// vector): the switch re-types the columns without a Job. A row
		// written since the read goes to a Job, below.
		if switched, err := r.switchNothingFilled(ctx, s, re); switched || err != nil {
			return false, err
		}
	}
	job, err := r.ensureReembedJob(ctx, s, re)
	if err != nil {
		return false, err
	}
	complete := jobFinished(job, batchv1.JobComplete) != nil
	switch {
	case jobFinished(job, batchv1.JobFailed) != nil:
		return r.reembedJobFailed(ctx, s, re, job)
	case re.Left == 0:
		// Running or complete: the switch recounts under its lock; a row
		// written since the read above leaves it to the next poll.
		return r.switchReembed(ctx, s, re, complete)
	case complete:
		// The run ended with rows left (its time bound): the next one.
		return r.nextReembedRun(ctx, s, re)
	}
	r.reembedFillingWaits(s, re)
	return true, nil
}

// reembedFillingWaits: the Job runs; its progress is read again soon.
func (r reembedder) reembedFillingWaits(s *runtimeScope, re *memoryv1alpha1.ReembedStatus) {
	re.Phase = memoryv1alpha1.ReembedFilling
	r.reembedWaits(s, memoryv1alpha1.ReasonReembedding, fmt.Sprintf("re-embedding %s → %s: %d rows filled, %d left (Job %s); the service keeps %s and writes %s's vectors too "+
		"until the switch; set spec.embedding back to cancel", embedderName(re.From), embedderName(re.To), re.Filled, re.Left,
		naming.ReembedJobName(s.rt.Name, re.Runs), embedderName(re.From), embedderName(re.To)), reembedPollFor(re.Left))
}

func reembedPollFor(left int64) time.Duration {
	if left <= reembedNearRows {
		return reembedPollNear
	}
	return reembedPoll
}

func (r reembedder) reembedWaits(s *runtimeScope, reason, msg string, after time.Duration) {
	s.facts.block(memoryv1alpha1.ConditionReady, reason, msg)
	s.requeue.at(after)
}

// switchReembed swaps the columns once the progress read no row left.
// Rows written since (ErrRowsLeft): the running Job fills them and the
// next poll tries again; a completed Job is followed by the next run.
func (r reembedder) switchReembed(ctx context.Context, s *runtimeScope, re *memoryv1alpha1.ReembedStatus, complete bool) (bool, error) {
	dbctx, cancel := context.WithTimeout(ctx, r.passTimeout(s))
	defer cancel()
	err := memory.ReembedSwitch(dbctx, s.pool, reembedTarget(s))
	if errors.Is(err, memory.ErrReembedRowsLeft) {
		if complete {
			return r.nextReembedRun(ctx, s, re)
		}
		r.reembedFillingWaits(s, re)
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("switching the re-embed to %s: %s", embedderName(re.To), scrubAdmin(err.Error(), s.admin))
	}
	return false, r.finishSwitch(ctx, s, re)
}

// switchNothingFilled tries the switch of a re-embed with no row filled
// nor left; false (and no error) when a row was written since the count.
func (r reembedder) switchNothingFilled(ctx context.Context, s *runtimeScope, re *memoryv1alpha1.ReembedStatus) (bool, error) {
	dbctx, cancel := context.WithTimeout(ctx, r.passTimeout(s))
	defer cancel()
	err := memory.ReembedSwitch(dbctx, s.pool, reembedTarget(s))
	if errors.Is(err, memory.ErrReembedRowsLeft) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("switching the re-embed to %s: %s", embedderName(re.To), scrubAdmin(err.Error(), s.admin))
	}
	return true, r.finishSwitch(ctx, s, re)
}

func (r reembedder) finishSwitch(ctx context.Context, s *runtimeScope, re *memoryv1alpha1.ReembedStatus) error {
	to := re.To
	s.rt.Status.Embedding = &to
	now := metav1.Now()
	re.Phase, re.Left, re.FinishedAt = memoryv1alpha1.ReembedSwitched, 0, &now
	r.eventer().normal(s.rt, memoryv1alpha1.ReasonReembedSwitched, "Reembed", "every vector is now %s's (%d rows re-embedded); rolling the service out with it",
		embedderName(to), re.Filled)
	return r.deleteReembedJob(ctx, s, re.Runs)
}

func (r reembedder) abortReembed(ctx context.Context, s *runtimeScope, re *memoryv1alpha1.ReembedStatus, why string) error {
	dbctx, cancel := context.WithTimeout(ctx, r.opts.DatabaseTimeout)
	defer cancel()
	if err := memory.ReembedAbort(dbctx, s.pool, reembedTarget(s)); err != nil {
		return fmt.Errorf("aborting the re-embed to %s: %s", embedderName(re.To), scrubAdmin(err.Error(), s.admin))
	}
	if err := r.deleteReembedJob(ctx, s, re.Runs); err != nil {
		return err
	}
	now := metav1.Now()
	re.Phase, re.FinishedAt = memoryv1alpha1.ReembedAborted, &now
	r.eventer().normal(s.rt, memoryv1alpha1.ReasonReembedAborted, "Reembed", "re-embed to %s cancelled (%s); the vectors stay %s's",
		embedderName(re.To), why, embedderName(re.From))
	return nil
}

// reembedJobFailed pauses the re-embed and starts the next Job after
// reembedRetryAfter: it resumes where the rows left off.
func (r reembedder) reembedJobFailed(ctx context.Context, s *runtimeScope, re *memoryv1alpha1.ReembedStatus, job *batchv1.Job) (bool, error) {
	c := jobFinished(job, batchv1.JobFailed)
	wait := reembedRetryAfter - time.Since(c.LastTransitionTime.Time)
	if wait <= 0 {
		return r.nextReembedRun(ctx, s, re)
	}
	re.Phase = memoryv1alpha1.ReembedPaused
	reason, why := memoryv1alpha1.ReasonReembedJobFailed, "failed (its logs say why)"
	if c.Reason == batchv1.JobReasonPodFailurePolicy {
		reason, why = memoryv1alpha1.ReasonEmbedderUnreachable, "stopped: the new embedder kept failing (its logs name the error)"
	}
	r.reembedWaits(s, reason, fmt.Sprintf("re-embed to %s paused: Job %s %s; %d rows filled, %d left, nothing lost; the next Job starts in %s and resumes",
		embedderName(re.To), job.Name, why, re.Filled, re.Left, wait.Round(time.Second)), wait)
	return true, nil
}

// nextReembedRun replaces the finished Job by the next one.
func (r reembedder) nextReembedRun(ctx context.Context, s *runtimeScope, re *memoryv1alpha1.ReembedStatus) (bool, error) {
	if err := r.deleteReembedJob(ctx, s, re.Runs); err != nil {
		return false, err
	}
	re.Runs++
	if _, err := r.ensureReembedJob(ctx, s, re); err != nil {
		return false, err
	}
	re.Phase = memoryv1alpha1.ReembedFilling
	r.reembedWaits(s, memoryv1alpha1.ReasonReembedding, fmt.Sprintf("re-embedding %s → %s: %d rows filled, %d left; Job %s started",
		embedderName(re.From), embedderName(re.To), re.Filled, re.Left, naming.ReembedJobName(s.rt.Name, re.Runs)), reembedPollFor(re.Left))
	return true, nil
}

// ensureReembedJob returns the re-embed's current Job, creating it when
// absent (creating it again is harmless: AlreadyExists is a Job the cache
// has not seen yet, and running).
func (r reembedder) ensureReembedJob(ctx context.Context, s *runtimeScope, re *memoryv1alpha1.ReembedStatus) (*batchv1.Job, error) {
	if re.Runs == 0 {
		re.Runs = 1
	}
	job := &batchv1.Job{}
	key := client.ObjectKey{Namespace: s.rt.Namespace, Name: naming.ReembedJobName(s.rt.Name, re.Runs)}
	err := r.client.Get(ctx, key, job)
	if err == nil {
		if !metav1.IsControlledBy(job, s.rt) {
			return nil, fmt.Errorf("the Job %s is not this runtime's: delete or rename it", key.Name)
		}
		return job, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("reading the re-embed Job %s: %w", key.Name, err)
	}
	image := specs.Image(s.rt, r.opts.ServiceImage)
	if image == "" {
		return nil, errors.New("no image for the re-embed Job: set spec.service.image or the operator's --service-image")
	}
	job = specs.ReembedJob(s.rt, image, re.To, re.Runs)
	if err := r.client.Create(ctx, job); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating the re-embed Job %s: %w", key.Name, err)
	}
	return &batchv1.Job{ObjectMeta: job.ObjectMeta}, nil
}

func (r reembedder) deleteReembedJob(ctx context.Context, s *runtimeScope, run int32) error {
	if run == 0 {
		return nil
	}
	job := &batchv1.Job{}
	err := r.client.Get(ctx, client.ObjectKey{Namespace: s.rt.Namespace, Name: naming.ReembedJobName(s.rt.Name, run)}, job)
	if apierrors.IsNotFound(err) || (err == nil && !metav1.IsControlledBy(job, s.rt)) {
		return nil // gone, or someone else's: never deleted
	}
	if err == nil {
		err = r.client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground),
			client.Preconditions{UID: &job.UID})
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting the re-embed Job %s: %w", naming.ReembedJobName(s.rt.Name, run), err)
	}
	return nil
}

// jobFinished is the Job's condition of type t when True, else nil.
func jobFinished(job *batchv1.Job, t batchv1.JobConditionType) *batchv1.JobCondition {
	for i := range job.Status.Conditions {
		if c := &job.Status.Conditions[i]; c.Type == t && c.Status == corev1.ConditionTrue {
			return c
		}
	}
	return nil
}
