package kubectlengram

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/naming"
)

// RuntimeStatus is what `status RUNTIME` shows (and -o json|yaml prints).
type RuntimeStatus struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Ready is the status of the Ready condition (True, False, Unknown).
	Ready         string            `json:"ready"`
	Reason        string            `json:"reason,omitempty"`
	Message       string            `json:"message,omitempty"`
	Paused        bool              `json:"paused"`
	Conditions    []ConditionStatus `json:"conditions"`
	Schema        string            `json:"schema,omitempty"`
	SchemaVersion int32             `json:"schemaVersion,omitempty"`
	// Database is where the tenant lives: the MemoryDatabase it was placed
	// on, "(placing)", or connection/NAME, secret/NAME.
	Database string `json:"database,omitempty"`
	// CitusWorker is the Citus worker holding the schema (empty: plain PostgreSQL).
	CitusWorker string `json:"citusWorker,omitempty"`
	// CitusMove is the last move to another worker (move-to-worker annotation).
	CitusMove *memoryv1alpha1.CitusMoveStatus `json:"citusMove,omitempty"`
	// Embedding is the embedder of the stored vectors (status.embedding).
	Embedding *memoryv1alpha1.RuntimeEmbedder `json:"embedding,omitempty"`
	// Reembed is the re-embed under way or the last one (status.reembed).
	Reembed *memoryv1alpha1.ReembedStatus `json:"reembed,omitempty"`
	// ServerMove is the move to another server under way or the last one
	// (status.serverMove).
	ServerMove *memoryv1alpha1.ServerMoveStatus `json:"serverMove,omitempty"`
	// Policy is "<name> (generation N)" or "built-in defaults".
	Policy      string            `json:"policy"`
	Replicas    *ReplicaStatus    `json:"replicas,omitempty"`
	Endpoint    string            `json:"endpoint,omitempty"`
	Credentials *CredentialStatus `json:"credentials,omitempty"`
	Jobs        []JobStatus       `json:"retentionJobs"`
	Memories    *statsResult      `json:"memories,omitempty"`
	// Unavailable lists what could not be read, and why (RBAC, service down).
	Unavailable []string `json:"unavailable,omitempty"`
}

// ConditionStatus is one condition with its age.
type ConditionStatus struct {
	Type               string      `json:"type"`
	Status             string      `json:"status"`
	Reason             string      `json:"reason"`
	Message            string      `json:"message,omitempty"`
	LastTransitionTime metav1.Time `json:"lastTransitionTime"`
	Age                string      `json:"age"`
}

// ReplicaStatus of the memory service Deployment.
type ReplicaStatus struct {
	Desired int32 `json:"desired"`
	Ready   int32 `json:"ready"`
}

// CredentialStatus says when the login role's password was last written.
type CredentialStatus struct {
	Secret      string      `json:"secret"`
	LastWritten metav1.Time `json:"lastWritten"`
	Age         string      `json:"age"`
}

// JobStatus is a RetentionJob that maintains the runtime.
type JobStatus struct {
	Name        string                  `json:"name"`
	Schedule    string                  `json:"schedule"`
	Suspended   bool                    `json:"suspended"`
	DryRun      bool                    `json:"dryRun"`
	LastRun     *memoryv1alpha1.LastRun `json:"lastRun,omitempty"`
	NextRun     *metav1.Time            `json:"nextRun,omitempty"`
	LastSuccess *metav1.Time            `json:"lastSuccessfulTime,omitempty"`
}

func runStatus(ctx context.Context, a *app, args []string) error {
	k, err := a.kubeClient()
	if err != nil {
		return err
	}
	if len(args) == 0 {
		return listRuntimes(ctx, a, k)
	}
	rt, err := k.getRuntime(ctx, args[0])
	if err != nil {
		return err
	}
	st := a.runtimeStatus(ctx, k, rt, time.Now())
	return a.printData(st, func(w io.Writer) error { return printRuntimeStatus(w, st, time.Now()) })
}

// runtimeStatus gathers one runtime's screen. What cannot be read (RBAC,
// a service not up) is listed in Unavailable instead of failing the whole.
func (a *app) runtimeStatus(ctx context.Context, k *kube, rt *memoryv1alpha1.MemoryRuntime, now time.Time) *RuntimeStatus {
	st := &RuntimeStatus{Namespace: rt.Namespace, Name: rt.Name, Ready: "Unknown", Paused: rt.Spec.Paused,
		Schema: rt.Status.Schema, SchemaVersion: rt.Status.SchemaVersion, CitusWorker: rt.Status.CitusWorker, CitusMove: rt.Status.CitusMove, Endpoint: rt.Status.Endpoint,
		Embedding: rt.Status.Embedding, Reembed: rt.Status.Reembed, ServerMove: rt.Status.ServerMove,
		Policy: "built-in defaults", Conditions: []ConditionStatus{}, Jobs: []JobStatus{}, Database: databaseOf(rt)}
	if c := rt.GetCondition(memoryv1alpha1.ConditionReady); c != nil {
		st.Ready, st.Reason, st.Message = string(c.Status), c.Reason, c.Message
	}
	for _, c := range rt.Status.Conditions {
		st.Conditions = append(st.Conditions, ConditionStatus{Type: c.Type, Status: string(c.Status), Reason: c.Reason,
			Message: c.Message, LastTransitionTime: c.LastTransitionTime, Age: age(c.LastTransitionTime.Time, now)})
	}
	if p := rt.Status.Policy; p != nil && p.Name != "" {
		st.Policy = fmt.Sprintf("%s (generation %d)", p.Name, p.Generation)
	} else if rt.PolicyName() != "" {
		st.Policy = rt.PolicyName() + " (not applied yet)"
	}
	note := func(what string, err error) { st.Unavailable = append(st.Unavailable, what+": "+err.Error()) }

	var dep appsv1.Deployment
	if err := k.c.Get(ctx, client.ObjectKey{Namespace: rt.Namespace, Name: naming.DeploymentName(rt.Name)}, &dep); err != nil {
		note("replicas", apiError(err, "get", resDeployments, rt.Namespace, naming.DeploymentName(rt.Name)))
	} else {
		st.Replicas = &ReplicaStatus{Desired: rt.Replicas(), Ready: dep.Status.ReadyReplicas}
	}
	if cred, err := credentialStatus(ctx, k, rt, now); err != nil {
		note("credentials", err)
	} else {
		st.Credentials = cred
	}
	if jobs, err := jobsOf(ctx, k, rt); err != nil {
		note("retention jobs", err)
	} else {
		st.Jobs = jobs
	}
	if stats, err := a.stats(ctx, k, rt); err != nil {
		note("memories", err)
	} else {
		st.Memories = stats
	}
	return st
}

// credentialStatus reads only the metadata of the <runtime>-db Secret (never
// the password): the newest write of its managed fields is when the
// operator last set the password (creation or rotation).
func credentialStatus(ctx context.Context, k *kube, rt *memoryv1alpha1.MemoryRuntime, now time.Time) (*CredentialStatus, error) {
	name := rt.Status.CredentialsSecret
	if name == "" {
		name = naming.CredentialsSecretName(rt.Name)
	}
	meta := &metav1.PartialObjectMetadata{}
	meta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	if err := k.c.Get(ctx, client.ObjectKey{Namespace: rt.Namespace, Name: name}, meta); err != nil {
		return nil, apiError(err, "get", resSecrets, rt.Namespace, name)
	}
	last := meta.CreationTimestamp
	for _, mf := range meta.ManagedFields {
		if mf.Time != nil && mf.Time.After(last.Time) {
			last = *mf.Time
		}
	}
	return &CredentialStatus{Secret: name, LastWritten: last, Age: age(last.Time, now)}, nil
}

// jobsOf lists the RetentionJobs that maintain rt: by runtimeRef, or by a
// CronJob of their status named for rt (runtimeSelector).
func jobsOf(ctx context.Context, k *kube, rt *memoryv1alpha1.MemoryRuntime) ([]JobStatus, error) {
	var list memoryv1alpha1.RetentionJobList
	if err := k.c.List(ctx, &list, client.InNamespace(rt.Namespace)); err != nil {
		return nil, apiError(err, "list", resRetentionJobs, rt.Namespace, "")
	}
	out := []JobStatus{}
	for _, rj := range list.Items {
		byRef := rj.Spec.RuntimeRef != nil && rj.Spec.RuntimeRef.Name == rt.Name
		if !byRef && !slices.Contains(rj.Status.CronJobs, naming.CronJobName(rj.Name, rt.Name)) {
			continue
		}
		js := JobStatus{Name: rj.Name, Schedule: rj.Spec.Schedule, Suspended: rj.Spec.Suspend, DryRun: rj.Spec.DryRun,
			NextRun: rj.Status.NextScheduleTime, LastSuccess: rj.Status.LastSuccessfulTime}
		if lr := rj.Status.LastRun; lr != nil && (lr.Runtime == "" || lr.Runtime == rt.Name) {
			js.LastRun = lr
		}
		out = append(out, js)
	}
	return out, nil
}

// printRuntimeStatus is the human screen of one runtime.
func printRuntimeStatus(w io.Writer, st *RuntimeStatus, now time.Time) error {
	line := func(k, v string) { fmt.Fprintf(w, "%-15s %s\n", k+":", v) }
	line("MemoryRuntime", st.Namespace+"/"+st.Name)
	ready := st.Ready
	if st.Reason != "" {
		ready += " (" + st.Reason + ")"
	}
	if st.Message != "" && st.Ready != "True" {
		ready += ": " + st.Message
	}
	line("Ready", ready)
	if st.Paused {
		line("Paused", "yes: the operator leaves this runtime alone (kubectl engram resume "+st.Name+")")
	}
	line("Database", orDash(st.Database))
	line("Schema", orDash(st.Schema)+versionText(st.SchemaVersion))
	if st.CitusWorker != "" {
		line("Citus worker", st.CitusWorker)
	}
	if m := st.CitusMove; m != nil {
		when := ""
		switch {
		case m.FinishedAt != nil:
			when = ", " + age(m.FinishedAt.Time, now) + " ago"
		case m.StartedAt != nil:
			when = ", started " + age(m.StartedAt.Time, now) + " ago"
		}
		line("Last move", fmt.Sprintf("%s to %s%s: %s", m.Result, m.To, when, m.Message))
	}
	if mv := st.ServerMove; mv != nil {
		line(serverMoveText(mv, st.Name, now))
	}
	if e := st.Embedding; e != nil {
		line("Embedder", embedderText(*e))
	}
	if re := st.Reembed; re != nil {
		line("Re-embed", reembedText(re, now))
	}
	line("Policy", st.Policy)
	if st.Replicas != nil {
		line("Replicas", fmt.Sprintf("%d/%d ready", st.Replicas.Ready, st.Replicas.Desired))
	}
	line("Endpoint", orDash(st.Endpoint))
	if st.Credentials != nil {
		line("Credentials", fmt.Sprintf("Secret %s, password last written %s ago", st.Credentials.Secret, st.Credentials.Age))
	}
	if m := st.Memories; m != nil {
		line("Memories", fmt.Sprintf("%d active, %d inactive, %d owners", m.Active, m.Inactive, m.Owners))
	}
	fmt.Fprintln(w, "\nConditions:")
	rows := [][]string{}
	for _, c := range st.Conditions {
		rows = append(rows, []string{"  " + c.Type, c.Status, c.Reason, c.Age, clip(c.Message, 80)})
	}
	if err := table(w, []string{"  TYPE", "STATUS", "REASON", "AGE", "MESSAGE"}, rows); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nRetention jobs:")
	if len(st.Jobs) == 0 {
		fmt.Fprintln(w, "  none")
	}
	for _, j := range st.Jobs {
		printJob(w, j, now)
	}
	if len(st.Unavailable) > 0 {
		fmt.Fprintln(w, "\nNot shown:")
		for _, u := range st.Unavailable {
			fmt.Fprintln(w, "  "+u)
		}
	}
	return nil
}

func versionText(v int32) string {
	if v == 0 {
		return ""
	}
	return " (migration version " + strconv.Itoa(int(v)) + ")"
}

// printJob is the block of one RetentionJob on the status screen.
func printJob(w io.Writer, j JobStatus, now time.Time) {
	flags := []string{}
	if j.Suspended {
		flags = append(flags, "suspended")
	}
	if j.DryRun {
		flags = append(flags, "dry run")
	}
	head := fmt.Sprintf("  %s  schedule %q", j.Name, j.Schedule)
	if len(flags) > 0 {
		head += " (" + strings.Join(flags, ", ") + ")"
	}
	fmt.Fprintln(w, head)
	if j.NextRun != nil {
		fmt.Fprintf(w, "    next run:  %s (in %s)\n", j.NextRun.UTC().Format(time.RFC3339), age(now, j.NextRun.Time))
	}
	lr := j.LastRun
	if lr == nil {
		fmt.Fprintln(w, "    last run:  none yet")
		return
	}
	when := "-"
	if lr.CompletionTime != nil {
		when = age(lr.CompletionTime.Time, now) + " ago"
	}
	dry := ""
	if lr.DryRun {
		dry = " (dry run)"
	}
	fmt.Fprintf(w, "    last run:  %s%s, %s, Job %s\n", lr.Result, dry, when, lr.JobName)
	if lr.Message != "" {
		fmt.Fprintf(w, "    message:   %s\n", clip(lr.Message, 100))
	}
	for _, op := range lr.Operations {
		fmt.Fprintf(w, "    %-8s   scanned %d, affected %d, %dms\n", op.Name, op.Scanned, op.Affected, op.DurationMillis)
	}
}

// RuntimeRow is one line of the runtime table.
type RuntimeRow struct {
	Namespace     string      `json:"namespace"`
	Name          string      `json:"name"`
	Ready         string      `json:"ready"`
	Reason        string      `json:"reason,omitempty"`
	Paused        bool        `json:"paused"`
	Schema        string      `json:"schema,omitempty"`
	SchemaVersion int32       `json:"schemaVersion,omitempty"`
	Database      string      `json:"database,omitempty"`
	Policy        string      `json:"policy,omitempty"`
	Endpoint      string      `json:"endpoint,omitempty"`
	Created       metav1.Time `json:"created"`
}

// listRuntimes is `status` without a name: one row per runtime.
func listRuntimes(ctx context.Context, a *app, k *kube) error {
	var list memoryv1alpha1.MemoryRuntimeList
	var opts []client.ListOption
	ns := k.namespace
	if a.allNamespaces {
		ns = ""
	} else {
		opts = append(opts, client.InNamespace(ns))
	}
	if err := k.c.List(ctx, &list, opts...); err != nil {
		return apiError(err, "list", resRuntimes, ns, "")
	}
	rows := []RuntimeRow{}
	for _, rt := range list.Items {
		r := RuntimeRow{Namespace: rt.Namespace, Name: rt.Name, Ready: "Unknown", Paused: rt.Spec.Paused, Schema: rt.Status.Schema,
			SchemaVersion: rt.Status.SchemaVersion, Database: databaseOf(&rt), Policy: rt.PolicyName(), Endpoint: rt.Status.Endpoint, Created: rt.CreationTimestamp}
		if c := rt.GetCondition(memoryv1alpha1.ConditionReady); c != nil {
			r.Ready, r.Reason = string(c.Status), c.Reason
		}
		rows = append(rows, r)
	}
	now := time.Now()
	return a.printData(rows, func(w io.Writer) error {
		if len(rows) == 0 {
			where := "namespace " + ns
			if ns == "" {
				where = "any namespace"
			}
			_, err := fmt.Fprintf(w, "No MemoryRuntimes in %s.\n", where)
			return err
		}
		header := []string{"NAME", "READY", "REASON", "DATABASE", "SCHEMA", "VERSION", "POLICY", "AGE"}
		if a.allNamespaces {
			header = append([]string{"NAMESPACE"}, header...)
		}
		var out [][]string
		for _, r := range rows {
			cells := []string{r.Name, r.Ready, orDash(r.Reason), orDash(r.Database), orDash(r.Schema), strconv.Itoa(int(r.SchemaVersion)), orDash(r.Policy), age(r.Created.Time, now)}
			if a.allNamespaces {
				cells = append([]string{r.Namespace}, cells...)
			}
			out = append(out, cells)
		}
		return table(w, header, out)
	})
}

func embedderText(e memoryv1alpha1.RuntimeEmbedder) string {
	if e.Model == "" {
		return fmt.Sprintf("%s (%d dimensions)", e.Provider, e.Dimensions)
	}
	return fmt.Sprintf("%s %s (%d dimensions)", e.Provider, e.Model, e.Dimensions)
}

// reembedText is the re-embed's line: phase, from → to, rows filled and
// left (while it runs) and its age.
func reembedText(re *memoryv1alpha1.ReembedStatus, now time.Time) string {
	s := fmt.Sprintf("%s, %s → %s", re.Phase, embedderText(re.From), embedderText(re.To))
	switch {
	case re.Phase == memoryv1alpha1.ReembedFilling || re.Phase == memoryv1alpha1.ReembedPaused:
		s += fmt.Sprintf(": %d rows filled, %d left", re.Filled, re.Left)
		if re.StartedAt != nil {
			s += ", started " + age(re.StartedAt.Time, now) + " ago"
		}
	case re.FinishedAt != nil:
		s += fmt.Sprintf(": %d rows re-embedded, %s ago", re.Filled, age(re.FinishedAt.Time, now))
	}
	return s
}
