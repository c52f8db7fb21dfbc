package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/controller/specs"
	"github.com/engram-dev/engram/internal/naming"
)

// RetentionJobReconciler keeps one CronJob per target runtime of a
// RetentionJob and reports on its runs.
type RetentionJobReconciler struct {
	client client.Client
	reader client.Reader // uncached: pods are read only when a new run finished
	apply  *applier
	events events.EventRecorder
	opts   Options
}

// retentionScope carries what the phases of one reconcile learn.
type retentionScope struct {
	rj       *memoryv1alpha1.RetentionJob
	targets  []memoryv1alpha1.MemoryRuntime
	cronJobs []*batchv1.CronJob
	next     time.Time
	requeue  requeueTimer
	// notScheduled is the reason the CronJobs are not (all) in place.
	notScheduled, message string
	// refusedCronJob and refusedJob: a CronJob or run-now Job name is taken
	// by an object Engram did not create (see ownership.go).
	refusedCronJob, refusedJob *notOwnedError
	// applied: every target was looked at (status.cronJobs lists the result).
	applied bool
	// heldBack names selected runtimes kept without their spec (too large):
	// no target, but their CronJobs stay as they are, since the operator
	// creates, changes and deletes nothing for such a runtime.
	heldBack map[string]bool
}

// holdBack records a selected runtime kept without its spec.
func (s *retentionScope) holdBack(runtime string) {
	if s.heldBack == nil {
		s.heldBack = map[string]bool{}
	}
	s.heldBack[runtime] = true
}

type retentionPhase func(ctx context.Context, s *retentionScope) (stop bool, err error)

// Reconcile brings one RetentionJob's CronJobs to its declared state.
func (r *RetentionJobReconciler) Reconcile(ctx context.Context, req reconcile.Request) (_ reconcile.Result, retErr error) {
	rj := &memoryv1alpha1.RetentionJob{}
	if done, err := readToReconcile(ctx, r.client, req, rj, retentionStatus); done {
		return doneResult(), err
	}
	if !rj.DeletionTimestamp.IsZero() {
		return doneResult(), nil // the garbage collector removes the CronJobs
	}
	orig := rj.DeepCopy()
	s := &retentionScope{rj: rj}
	defer func() {
		deriveRetentionStatus(rj, s, retErr)
		noteMetadataOverBound(rj)
		retErr = errors.Join(retErr, patchStatus(ctx, r.client, orig, rj, retentionStatus))
	}()

	for _, phase := range []retentionPhase{
		r.checkSchedule,
		r.resolveTargets,
		r.reconcileCronJobs,
		r.pruneCronJobs,
		r.runNow,
		r.observeRuns,
		r.reportRefused,
	} {
		stop, err := phase(ctx, s)
		if err != nil {
			return doneResult(), err
		}
		if stop {
			break
		}
	}
	return s.requeue.result(), nil
}

func (r *RetentionJobReconciler) eventer() eventer { return eventer{rec: r.events} }

// checkSchedule parses the schedule and time zone the way the CronJob
// controller will, and computes the next run.
func (r *RetentionJobReconciler) checkSchedule(_ context.Context, s *retentionScope) (bool, error) {
	next, err := specs.NextSchedule(s.rj.Spec.Schedule, s.rj.Spec.TimeZone, time.Now())
	if err != nil {
		s.notScheduled = memoryv1alpha1.ReasonInvalidSchedule
		s.message = err.Error() + " (the existing CronJobs are left unchanged)"
		return true, nil //nolint:nilerr // the user's schedule is invalid: said in status (InvalidSchedule), not a reconcile error
	}
	s.next = next
	return false, nil
}

// resolveTargets finds the runtimes the job maintains.
func (r *RetentionJobReconciler) resolveTargets(ctx context.Context, s *retentionScope) (bool, error) {
	rj := s.rj
	if ref := rj.Spec.RuntimeRef; ref != nil {
		var rt memoryv1alpha1.MemoryRuntime
		found, err := getOptional(ctx, r.client, client.ObjectKey{Namespace: rj.Namespace, Name: ref.Name}, &rt)
		if err != nil {
			return false, fmt.Errorf("reading MemoryRuntime %q: %w", ref.Name, err)
		}
		if !found || !rt.DeletionTimestamp.IsZero() {
			s.notScheduled = memoryv1alpha1.ReasonRuntimeNotFound
			s.message = fmt.Sprintf("MemoryRuntime %q does not exist in namespace %q", ref.Name, rj.Namespace)
			return false, nil
		}
		if _, over := specOverBound(&rt); over {
			s.holdBack(rt.Name)
			s.notScheduled = memoryv1alpha1.ReasonSpecTooLarge
			s.message = fmt.Sprintf("MemoryRuntime %q is larger than the operator reads (see its Ready condition)", ref.Name)
			return false, nil
		}
		s.targets = []memoryv1alpha1.MemoryRuntime{rt}
		return false, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(rj.Spec.RuntimeSelector)
	if err != nil {
		s.notScheduled, s.message = memoryv1alpha1.ReasonNoRuntimesSelected, "spec.runtimeSelector: "+err.Error()
		return false, nil //nolint:nilerr // the user's selector is invalid: said in status (NoRuntimesSelected), not a reconcile error
	}
	var list memoryv1alpha1.MemoryRuntimeList
	if err := r.client.List(ctx, &list, client.InNamespace(rj.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return false, fmt.Errorf("listing MemoryRuntimes: %w", err)
	}
	for _, rt := range list.Items {
		// A runtime kept without its spec (too large) is no target: its
		// CronJob would be built from an empty spec.
		_, over := specOverBound(&rt)
		switch {
		case over:
			s.holdBack(rt.Name)
		case rt.DeletionTimestamp.IsZero():
			s.targets = append(s.targets, rt)
		}
	}
	slices.SortFunc(s.targets, func(a, b memoryv1alpha1.MemoryRuntime) int { return strings.Compare(a.Name, b.Name) })
	if len(s.targets) == 0 && len(s.heldBack) > 0 {
		s.notScheduled = memoryv1alpha1.ReasonSpecTooLarge
		s.message = fmt.Sprintf("every MemoryRuntime spec.runtimeSelector (%s) matches is larger than the operator reads (see their Ready conditions)", sel)
		return false, nil
	}
	if len(s.targets) == 0 {
		s.notScheduled = memoryv1alpha1.ReasonNoRuntimesSelected
		s.message = fmt.Sprintf("spec.runtimeSelector (%s) matches no MemoryRuntime in namespace %q", sel, rj.Namespace)
	}
	return false, nil
}

// reconcileCronJobs applies one CronJob per target runtime.
func (r *RetentionJobReconciler) reconcileCronJobs(ctx context.Context, s *retentionScope) (bool, error) {
	for i := range s.targets {
		rt := &s.targets[i]
		image := specs.Image(rt, r.opts.ServiceImage)
		if image == "" {
			s.notScheduled = memoryv1alpha1.ReasonImageNotSet
			s.message = fmt.Sprintf("no image for MemoryRuntime %q: set its spec.service.image or start the operator with --service-image", rt.Name)
			continue
		}
		live, outcome, err := r.apply.apply(ctx, specs.CronJob(s.rj, rt, image))
		if refused := asNotOwned(err); refused != nil {
			// Someone else's CronJob has the name: leave it, keep serving
			// the other targets, look again later.
			if s.refusedCronJob == nil {
				s.refusedCronJob = refused
			}
			s.requeue.at(r.opts.NotOwnedRetry)
			continue
		}
		if err != nil {
			return false, err
		}
		if outcome != applyUnchanged {
			r.eventer().changed(s.rj, live, "CronJob", string(outcome), "%s CronJob %s for MemoryRuntime %s", strings.ToLower(string(outcome)), live.GetName(), rt.Name)
		}
		s.cronJobs = append(s.cronJobs, live.(*batchv1.CronJob))
	}
	s.applied = true
	return false, nil
}

// pruneCronJobs deletes the CronJobs of runtimes that are no longer targets.
func (r *RetentionJobReconciler) pruneCronJobs(ctx context.Context, s *retentionScope) (bool, error) {
	var list batchv1.CronJobList
	if err := r.client.List(ctx, &list, client.InNamespace(s.rj.Namespace), client.MatchingLabels{naming.LabelRetentionJob: s.rj.Name}); err != nil {
		return false, fmt.Errorf("listing CronJobs: %w", err)
	}
	keep := map[string]bool{}
	for _, cj := range s.cronJobs {
		keep[cj.Name] = true
	}
	for i := range list.Items {
		cj := &list.Items[i]
		if keep[cj.Name] || !metav1.IsControlledBy(cj, s.rj) {
			continue
		}
		if s.notScheduled == memoryv1alpha1.ReasonImageNotSet {
			continue // a runtime without image is still a target: keep its CronJob
		}
		if s.heldBack[cj.Labels[naming.LabelRuntime]] {
			continue // its runtime is kept without spec: change nothing for it
		}
		err := r.client.Delete(ctx, cj, client.PropagationPolicy(metav1.DeletePropagationBackground), client.Preconditions{UID: &cj.UID})
		if err != nil && !apierrors.IsNotFound(err) {
			return false, fmt.Errorf("deleting CronJob %s: %w", cj.Name, err)
		}
		r.eventer().normal(s.rj, "Deleted", "Delete", "deleted CronJob %s: MemoryRuntime %s is no longer a target", cj.Name, cj.Labels[naming.LabelRuntime])
	}
	return false, nil
}

// runNow starts one Job per target at once when the run-now annotation has
// a value not acted on yet. The Job's name derives from the value, so a
// repeated reconcile (or a stale cache) never starts a second one.
func (r *RetentionJobReconciler) runNow(ctx context.Context, s *retentionScope) (bool, error) {
	value := s.rj.Annotations[naming.AnnotationRunNow]
	if !decideRunNow(value, s.rj.Status.RunNow) {
		return false, nil
	}
	for _, cj := range s.cronJobs {
		job := specs.RunNowJob(cj, value)
		err := r.client.Create(ctx, job, client.FieldOwner(naming.FieldOwner))
		switch {
		case apierrors.IsAlreadyExists(err):
			// Started by an earlier reconcile (the cache may not show it
			// yet), or someone else's Job of that name: a Create never
			// overwrites, but only Engram's own Job counts as started.
			if err := r.checkRunNowJob(ctx, cj, job); err != nil {
				if refused := asNotOwned(err); refused != nil && s.refusedJob == nil {
					s.refusedJob = refused
					continue
				}
				return false, err
			}
			continue
		case err != nil:
			return false, fmt.Errorf("creating Job %s for run-now: %w", job.Name, err)
		}
		runNowJobs.Inc()
		r.eventer().normal(s.rj, "RunNow", "Run", "started Job %s for MemoryRuntime %s (run-now %q)", job.Name, cj.Labels[naming.LabelRuntime], value)
	}
	if s.refusedJob != nil {
		// Not acted on: retried until the name is free.
		s.requeue.at(r.opts.NotOwnedRetry)
		return false, nil //nolint:nilerr // the refused Job is said in status and retried after NotOwnedRetry, not a reconcile error
	}
	if len(s.cronJobs) == 0 {
		r.eventer().warning(s.rj, "RunNowSkipped", "Run", "run-now %q: no target runtime has a CronJob; nothing was started", value)
	}
	s.rj.Status.RunNow = value
	return false, nil
}

// checkRunNowJob reads the existing Job named like job from the API server
// (a foreign Job is not in the cache) and says whether it is Engram's: a
// notOwnedError when it is not. A Job deleted meanwhile counts as started.
func (r *RetentionJobReconciler) checkRunNowJob(ctx context.Context, cj *batchv1.CronJob, job *batchv1.Job) error {
	var existing batchv1.Job
	if err := r.reader.Get(ctx, client.ObjectKeyFromObject(job), &existing); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("reading Job %s: %w", job.Name, err)
	}
	return checkOwned("Job", &existing, *metav1.NewControllerRef(cj, batchv1.SchemeGroupVersion.WithKind("CronJob")))
}

// reportRefused records a Warning event for each object whose name was
// taken (the conditions are derived at the end, in deriveRetentionStatus).
func (r *RetentionJobReconciler) reportRefused(_ context.Context, s *retentionScope) (bool, error) {
	r.warnRefused(s.rj, s)
	return false, nil
}

// warnRefused records a Warning event for each refused object, unless the
// Ready condition already reports it (the event was written when it was news).
func (r *RetentionJobReconciler) warnRefused(rj *memoryv1alpha1.RetentionJob, s *retentionScope) {
	before := rj.GetCondition(memoryv1alpha1.ConditionReady)
	for _, refused := range []*notOwnedError{s.refusedCronJob, s.refusedJob} {
		if refused == nil {
			continue
		}
		msg := refused.Error()
		if before != nil && before.Reason == memoryv1alpha1.ReasonObjectNotOwned && strings.Contains(before.Message, msg) {
			continue
		}
		r.eventer().warning(rj, memoryv1alpha1.ReasonObjectNotOwned, "Apply", "%s", msg)
	}
}

func (r *RetentionJobReconciler) setupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&memoryv1alpha1.RetentionJob{}).
		Owns(&batchv1.CronJob{}).
		Watches(&batchv1.Job{}, handler.EnqueueRequestsFromMapFunc(retentionJobOfJob)).
		Watches(&memoryv1alpha1.MemoryRuntime{}, handler.EnqueueRequestsFromMapFunc(r.retentionJobsOfRuntime)).
		WithOptions(controllerOptions(r.opts.RetentionJobConcurrency, rateLimiter(r.opts))).
		Complete(r)
}

// retentionJobOfJob maps a Job (scheduled or run-now) to its RetentionJob by label.
func retentionJobOfJob(_ context.Context, obj client.Object) []reconcile.Request {
	name := obj.GetLabels()[naming.LabelRetentionJob]
	if name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: obj.GetNamespace(), Name: name}}}
}

// retentionJobsOfRuntime maps a runtime to the RetentionJobs that target it,
// by reference or by selector.
func (r *RetentionJobReconciler) retentionJobsOfRuntime(ctx context.Context, obj client.Object) []reconcile.Request {
	var list memoryv1alpha1.RetentionJobList
	if err := r.client.List(ctx, &list, client.InNamespace(obj.GetNamespace())); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing RetentionJobs for a watch event")
		return nil
	}
	var reqs []reconcile.Request
	for _, rj := range list.Items {
		if targets(&rj, obj) {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&rj)})
		}
	}
	return reqs
}

// targets reports whether rj selects runtime rt.
func targets(rj *memoryv1alpha1.RetentionJob, rt client.Object) bool {
	if ref := rj.Spec.RuntimeRef; ref != nil {
		return ref.Name == rt.GetName()
	}
	sel, err := metav1.LabelSelectorAsSelector(rj.Spec.RuntimeSelector)
	return err == nil && sel.Matches(labels.Set(rt.GetLabels()))
}

// retentionStatus is what a status patch of a retention job compares.
func retentionStatus(o *memoryv1alpha1.RetentionJob) any { return o.Status }
