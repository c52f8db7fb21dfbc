package kubectlengram

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/naming"
)

// A move to another PostgreSQL server (docs/export.md, "Moving a tenant
// to another server"): the plugin only writes what the operator reads.
// `move` patches spec.database (the new connection, the other one
// cleared, onChange: Move); `move confirm` names the switched run in the
// move-confirmed annotation; `move abort` sets spec.database back to the
// connection the move started from (status.serverMove.from.via).

// runMove dispatches `move RUNTIME`, `move confirm RUNTIME` and
// `move abort RUNTIME`.
func runMove(ctx context.Context, a *app, args []string) error {
	if len(args) == 2 {
		switch args[0] {
		case "confirm":
			return moveConfirm(ctx, a, args[1])
		case "abort":
			return moveAbort(ctx, a, args[1])
		}
		return fmt.Errorf("move takes RUNTIME, confirm RUNTIME or abort RUNTIME (got %q %q); see kubectl engram --help", args[0], args[1])
	}
	if (args[0] == "confirm" || args[0] == "abort") && a.toCluster == "" && a.toSecret == "" {
		return fmt.Errorf("move %s takes RUNTIME; see kubectl engram --help", args[0])
	}
	return moveStart(ctx, a, args[0])
}

// moveTargetPatch is the spec.database merge patch of a move to the
// connection of --to-cluster-connection or --to-secret NAME[/KEY], and
// the connection's id as the operator records it (status.connection.via).
func moveTargetPatch(namespace, toCluster, toSecret string) (map[string]any, string, error) {
	switch {
	case (toCluster == "") == (toSecret == ""):
		return nil, "", fmt.Errorf("move needs exactly one of --to-cluster-connection NAME and --to-secret NAME[/KEY]")
	case toCluster != "":
		db := map[string]any{"clusterConnection": toCluster, "connectionSecretRef": nil, "onChange": string(memoryv1alpha1.OnChangeMove)}
		return map[string]any{"spec": map[string]any{"database": db}}, "cluster/" + toCluster, nil
	}
	name, key, _ := strings.Cut(toSecret, "/")
	if name == "" || strings.Contains(key, "/") {
		return nil, "", fmt.Errorf("--to-secret %q: want NAME or NAME/KEY (a Secret of namespace %s)", toSecret, namespace)
	}
	ref := map[string]any{"name": name}
	if key != "" {
		ref["key"] = key
	} else {
		key = memoryv1alpha1.DefaultConnectionKey
	}
	db := map[string]any{"connectionSecretRef": ref, "clusterConnection": nil, "onChange": string(memoryv1alpha1.OnChangeMove)}
	return map[string]any{"spec": map[string]any{"database": db}}, "secret/" + namespace + "/" + name + "/" + key, nil
}

// viaPatch is the spec.database merge patch that names the connection via
// (status.serverMove.from.via: cluster/<name> or secret/<ns>/<name>/<key>)
// of a runtime of namespace: never a Secret of another namespace.
func viaPatch(namespace, via string) (map[string]any, error) {
	db := map[string]any{}
	if name, ok := strings.CutPrefix(via, "cluster/"); ok && name != "" && !strings.Contains(name, "/") {
		db["clusterConnection"], db["connectionSecretRef"] = name, nil
		return map[string]any{"spec": map[string]any{"database": db}}, nil
	}
	if rest, ok := strings.CutPrefix(via, "secret/"); ok {
		parts := strings.Split(rest, "/")
		if len(parts) == 3 && parts[1] != "" && parts[2] != "" {
			if parts[0] != namespace {
				return nil, fmt.Errorf("the move started from a Secret of namespace %q, not %q: set spec.database back by hand", parts[0], namespace)
			}
			db["connectionSecretRef"], db["clusterConnection"] = map[string]any{"name": parts[1], "key": parts[2]}, nil
			return map[string]any{"spec": map[string]any{"database": db}}, nil
		}
	}
	return nil, fmt.Errorf("the move started from %q, which names no clusterConnection or Secret: set spec.database back by hand", via)
}

func moveStart(ctx context.Context, a *app, name string) error {
	k, rt, err := a.runtime(ctx, name)
	if err != nil {
		return err
	}
	p, to, err := moveTargetPatch(rt.Namespace, a.toCluster, a.toSecret)
	if err != nil {
		return err
	}
	if rt.UsesMemoryDatabase() {
		return fmt.Errorf("memoryruntime %s/%s is placed on MemoryDatabase %q: a move goes from a clusterConnection or connectionSecretRef to another (docs/export.md)",
			rt.Namespace, rt.Name, rt.PlacedDatabase())
	}
	if mv := rt.Status.ServerMove; mv != nil && mv.Phase == memoryv1alpha1.ServerMoveSwitched {
		return fmt.Errorf("move %d of memoryruntime %s/%s switched to %s and is not confirmed: the operator starts no other move until it is (kubectl engram move confirm %s)",
			mv.Run, rt.Namespace, rt.Name, connectionText(mv.To), rt.Name)
	}
	if mv := rt.Status.ServerMove; mv != nil && memoryv1alpha1.ServerMoveRunning(mv.Phase) && mv.To.Via != "" && mv.To.Via != to {
		return fmt.Errorf("memoryruntime %s/%s is being moved to %s (%s): abort it first (kubectl engram move abort %s)", rt.Namespace, rt.Name, mv.To.Via, mv.Phase, rt.Name)
	}
	from := ""
	if c := rt.Status.Connection; c != nil {
		from = c.Via
	}
	if from == "" {
		return fmt.Errorf("memoryruntime %s/%s has not recorded the connection its tenant is on (status.connection.via), so the operator would refuse the move (MoveSourceUnknown): "+
			"wait until the operator has reconciled it once (an operator of this release records it at every pass), then run the move again", rt.Namespace, rt.Name)
	}
	if from == to && (rt.Status.ServerMove == nil || !memoryv1alpha1.ServerMoveRunning(rt.Status.ServerMove.Phase)) {
		return fmt.Errorf("memoryruntime %s/%s lives on %s already", rt.Namespace, rt.Name, to)
	}
	if err := k.patch(ctx, rt, p, a.dryRun, resRuntimes); err != nil {
		return err
	}
	res := ActionResult{Kind: "MemoryRuntime", Namespace: rt.Namespace, Name: rt.Name, Patch: p, DryRun: a.dryRun}
	if a.dryRun {
		res.Message = fmt.Sprintf("dry run: the API server accepts moving memoryruntime %s/%s to %s; nothing was changed", rt.Namespace, rt.Name, to)
	} else {
		res.Message = fmt.Sprintf("asked the operator to move memoryruntime %s/%s from %s to %s (spec.database.onChange: Move). "+
			"The service stays on the old server while the tenant is copied; at the end its writes are refused for a few seconds (503, clients retry). "+
			"Follow it with kubectl engram status %s; once it says Moved, kubectl engram move confirm %s (or abort before: kubectl engram move abort %s)",
			rt.Namespace, rt.Name, orDash(from), to, rt.Name, rt.Name, rt.Name)
	}
	return a.printMessage(res)
}

func moveConfirm(ctx context.Context, a *app, name string) error {
	k, rt, mv, err := a.runtimeMove(ctx, name, "confirm")
	if err != nil {
		return err
	}
	switch {
	case mv.Phase == memoryv1alpha1.ServerMoveConfirmed:
		return fmt.Errorf("move %d of memoryruntime %s/%s is confirmed already", mv.Run, rt.Namespace, rt.Name)
	case mv.Phase != memoryv1alpha1.ServerMoveSwitched:
		return fmt.Errorf("move %d of memoryruntime %s/%s is %s, not Switched: there is nothing to confirm yet", mv.Run, rt.Namespace, rt.Name, mv.Phase)
	}
	value := strconv.Itoa(int(mv.Run))
	p := annotationPatch(naming.AnnotationMoveConfirmed, value)
	what := "kept, read-only (reclaimPolicy Retain): drop it when you no longer need it (the status names it)"
	if rt.ReclaimPolicyOrDefault() == memoryv1alpha1.ReclaimDelete {
		what = "dropped by the operator (reclaimPolicy Delete)"
	}
	res := ActionResult{Kind: "MemoryRuntime", Namespace: rt.Namespace, Name: rt.Name, Patch: p, Value: value, DryRun: a.dryRun,
		Message: fmt.Sprintf("confirmed move %d of memoryruntime %s/%s to %s (%s=%s); the old copy on %s is %s",
			mv.Run, rt.Namespace, rt.Name, connectionText(mv.To), naming.AnnotationMoveConfirmed, value, connectionText(mv.From), what)}
	return a.applyMove(ctx, k, rt, res)
}

func moveAbort(ctx context.Context, a *app, name string) error {
	k, rt, mv, err := a.runtimeMove(ctx, name, "abort")
	if err != nil {
		return err
	}
	switch {
	case mv.Phase == memoryv1alpha1.ServerMoveSwitched || mv.Phase == memoryv1alpha1.ServerMoveConfirmed:
		return fmt.Errorf("move %d of memoryruntime %s/%s has switched: the tenant lives on %s now; a move back is a new move, once this one is confirmed",
			mv.Run, rt.Namespace, rt.Name, connectionText(mv.To))
	case !memoryv1alpha1.ServerMoveRunning(mv.Phase):
		return fmt.Errorf("move %d of memoryruntime %s/%s is %s: nothing to abort", mv.Run, rt.Namespace, rt.Name, mv.Phase)
	}
	p, err := viaPatch(rt.Namespace, mv.From.Via)
	if err != nil {
		return fmt.Errorf("memoryruntime %s/%s: %w", rt.Namespace, rt.Name, err)
	}
	res := ActionResult{Kind: "MemoryRuntime", Namespace: rt.Namespace, Name: rt.Name, Patch: p, DryRun: a.dryRun,
		Message: fmt.Sprintf("set spec.database of memoryruntime %s/%s back to %s: the operator aborts move %d (%s), drops the copy on %s and lets writes resume",
			rt.Namespace, rt.Name, mv.From.Via, mv.Run, mv.Phase, connectionText(mv.To))}
	return a.applyMove(ctx, k, rt, res)
}

// runtimeMove reads the runtime and its status.serverMove; a runtime
// without one is an error naming what there is no move to (verb).
func (a *app) runtimeMove(ctx context.Context, name, verb string) (*kube, *memoryv1alpha1.MemoryRuntime, *memoryv1alpha1.ServerMoveStatus, error) {
	k, rt, err := a.runtime(ctx, name)
	if err != nil {
		return nil, nil, nil, err
	}
	mv := rt.Status.ServerMove
	if mv == nil {
		return nil, nil, nil, fmt.Errorf("memoryruntime %s/%s has no move to %s (status.serverMove is empty)", rt.Namespace, rt.Name, verb)
	}
	return k, rt, mv, nil
}

// applyMove patches the runtime with res.Patch (a dry run with --dry-run,
// its message then saying so) and prints res.
func (a *app) applyMove(ctx context.Context, k *kube, rt *memoryv1alpha1.MemoryRuntime, res ActionResult) error {
	if err := k.patch(ctx, rt, res.Patch, a.dryRun, resRuntimes); err != nil {
		return err
	}
	if a.dryRun {
		res.Message = "dry run: " + res.Message
	}
	return a.printMessage(res)
}

// connectionText names a server of a move: the connection and the
// database on it.
func connectionText(c memoryv1alpha1.RuntimeConnection) string {
	s := orDash(c.Via)
	if c.Database != "" {
		s += " (database " + c.Database + ")"
	}
	return s
}

// serverMoveText is the status screen's line of a move: how far it is
// while it runs, where the tenant went once switched.
func serverMoveText(mv *memoryv1alpha1.ServerMoveStatus, runtime string, now time.Time) (label, text string) {
	rows := fmt.Sprintf("%s/%s rows", thousands(mv.CopiedRows), thousands(mv.TotalRows))
	to := connectionText(mv.To)
	switch mv.Phase {
	case memoryv1alpha1.ServerMovePreparing:
		return "Moving", fmt.Sprintf("Preparing %s", to)
	case memoryv1alpha1.ServerMoveCopying:
		return "Moving", fmt.Sprintf("Copying %s to %s", rows, to)
	case memoryv1alpha1.ServerMoveCatchingUp:
		return "Moving", fmt.Sprintf("CatchingUp pass %d, %s (last pass %s rows) to %s", mv.Passes, rows, thousands(mv.LastDelta), to)
	case memoryv1alpha1.ServerMoveFrozen:
		s := "Frozen: writes refused (503) while the last rows are copied and verified"
		if mv.FreezeStartedAt != nil {
			s += ", for " + age(mv.FreezeStartedAt.Time, now)
		}
		return "Moving", s + ", to " + to
	case memoryv1alpha1.ServerMoveSwitched:
		return "Server move", fmt.Sprintf("Moved to %s (freeze %s); old copy kept on %s: confirm with kubectl engram move confirm %s",
			to, freezeText(mv.FreezeMillis), connectionText(mv.From), runtime)
	case memoryv1alpha1.ServerMoveConfirmed:
		return "Server move", fmt.Sprintf("Moved to %s (freeze %s), confirmed%s", to, freezeText(mv.FreezeMillis), agoText(mv, now))
	}
	s := fmt.Sprintf("%s, to %s%s", mv.Phase, to, agoText(mv, now))
	if mv.Message != "" {
		s += ": " + mv.Message
	}
	return "Server move", s
}

func agoText(mv *memoryv1alpha1.ServerMoveStatus, now time.Time) string {
	if mv.FinishedAt == nil {
		return ""
	}
	return ", " + age(mv.FinishedAt.Time, now) + " ago"
}

func freezeText(ms int64) string { return strconv.FormatFloat(float64(ms)/1000, 'f', 1, 64) + " s" }

// thousands writes n with comma separators: 198,412.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
