package controller

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/engram-dev/engram/internal/naming"
)

// applyOutcome says what apply did, for events and tests.
type applyOutcome string

const (
	applyUnchanged applyOutcome = ""
	applyCreated   applyOutcome = "Created"
	applyUpdated   applyOutcome = "Updated"
)

// applier writes owned objects with server-side apply, but only when the
// cached live object differs from the desired one, and never over an object
// Engram did not create (see ownership.go).
type applier struct {
	client client.Client // reads from the manager's cache, writes to the API server
	reader client.Reader // uncached reads, on a cache miss only (nil: trust the cache)
	scheme *runtime.Scheme
	// memo remembers which stubs were found, read whole, to hold what the
	// operator wants (apply_memo.go, stub_memo.go); tokens does the same
	// for the API token Secrets, whose want derives from what they hold
	// (memoryruntime_apitoken.go).
	memo, tokens stubMemo
}

// apply makes the live object hold every field of desired (a typed object
// from a builder, with a controller owner reference). It first reads the
// live object (cache, then API server on a miss), refuses with a
// notOwnedError when that object is not Engram's, and otherwise compares it
// with desired (see compare.go) and writes nothing when they agree. It
// returns the live object as it is after the call.
func (a *applier) apply(ctx context.Context, desired client.Object) (client.Object, applyOutcome, error) {
	return a.applyOver(ctx, desired, nil)
}

// applyOver is apply with the live object already read whole from the API
// server by the caller (nil: apply reads it).
func (a *applier) applyOver(ctx context.Context, desired, whole client.Object) (client.Object, applyOutcome, error) {
	gvk, err := apiutil.GVKForObject(desired, a.scheme)
	if err != nil {
		return nil, applyUnchanged, err
	}
	owner, err := controllerRef(desired)
	if err != nil {
		return nil, applyUnchanged, err
	}
	want, err := applyMap(desired, gvk)
	if err != nil {
		return nil, applyUnchanged, err
	}
	what := fmt.Sprintf("%s %s/%s", gvk.Kind, desired.GetNamespace(), desired.GetName())

	live, found, readWhole := whole, whole != nil, whole != nil
	if whole == nil {
		if live, err = a.newObject(gvk); err != nil {
			return nil, applyUnchanged, err
		}
		if found, err = readLive(ctx, a.client, a.reader, client.ObjectKeyFromObject(desired), live); err != nil {
			return nil, applyUnchanged, fmt.Errorf("reading %s: %w", what, err)
		}
	}
	if found && isCacheStub(live) && a.reader != nil && checkOwned(gvk.Kind, live, owner) == nil {
		// Engram's, over the cache's size cap: compare with the whole
		// object, unless it was found to hold want at this version.
		kept, ok, err := a.recallWhole(live, want, gvk)
		if err != nil || ok {
			return kept, applyUnchanged, err
		}
		if found, err = getWhole(ctx, a.reader, live); err != nil {
			return nil, applyUnchanged, fmt.Errorf("reading %s: %w", what, err)
		}
		readWhole = true
	}
	outcome := applyCreated
	if found {
		if err := checkOwned(gvk.Kind, live, owner); err != nil {
			return nil, applyUnchanged, err
		}
		upToDate, err := matches(want, live)
		if err != nil {
			return nil, applyUnchanged, fmt.Errorf("comparing %s: %w", what, err)
		}
		if upToDate {
			if readWhole {
				a.rememberWhole(live, want)
			}
			return live, applyUnchanged, nil
		}
		outcome = applyUpdated
	}

	// A creation takes nothing over: should someone create an object of
	// that name between the read above and this write, the API server
	// answers Conflict for every field both set, instead of handing them to
	// the operator. The retry then finds the object and refuses it.
	u, err := a.serverSideApply(ctx, want, outcome == applyUpdated)
	if apierrors.IsInvalid(err) && outcome == applyUpdated {
		// Someone changed the key of an item of a keyed list the operator
		// owns (a Service port number, say): the apply would add the
		// operator's item next to theirs and the result is invalid. Put the
		// operator's lists back wholesale with a merge patch, then apply
		// again so the operator owns its fields as before.
		if perr := a.mergePatch(ctx, want, live); perr != nil {
			return nil, applyUnchanged, fmt.Errorf("applying %s: %w (repairing with a merge patch: %v)", what, err, perr)
		}
		u, err = a.serverSideApply(ctx, want, true)
	}
	if err != nil {
		return nil, applyUnchanged, fmt.Errorf("applying %s: %w", what, err)
	}
	applied, err := a.newObject(gvk)
	if err != nil {
		return nil, applyUnchanged, err
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, applied); err != nil {
		return nil, applyUnchanged, fmt.Errorf("decoding applied %s: %w", what, err)
	}
	return applied, outcome, nil
}

// serverSideApply applies want with the operator's field owner. With force
// it takes over fields others changed on an object that is Engram's (the
// operator is their controller).
func (a *applier) serverSideApply(ctx context.Context, want map[string]any, force bool) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{Object: runtime.DeepCopyJSON(want)}
	opts := []client.ApplyOption{client.FieldOwner(naming.FieldOwner)}
	if force {
		opts = append(opts, client.ForceOwnership)
	}
	err := a.client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), opts...)
	return u, err
}

// mergePatch writes want over live with a JSON merge patch: maps merge,
// lists are replaced as a whole.
func (a *applier) mergePatch(ctx context.Context, want map[string]any, live client.Object) error {
	body, err := json.Marshal(want)
	if err != nil {
		return err
	}
	return a.client.Patch(ctx, live, client.RawPatch(types.MergePatchType, body), client.FieldOwner(naming.FieldOwner))
}

func (a *applier) newObject(gvk schema.GroupVersionKind) (client.Object, error) {
	o, err := a.scheme.New(gvk)
	if err != nil {
		return nil, err
	}
	obj, ok := o.(client.Object)
	if !ok {
		return nil, fmt.Errorf("%s is not a client.Object", gvk)
	}
	return obj, nil
}

// applyMap is the apply configuration of desired: its JSON without nulls and
// status, with apiVersion and kind, and stamped with AnnotationAppliedHash.
func applyMap(desired client.Object, gvk schema.GroupVersionKind) (map[string]any, error) {
	m, err := toJSONMap(desired)
	if err != nil {
		return nil, err
	}
	pruneNulls(m)
	delete(m, "status")
	m["apiVersion"], m["kind"] = gvk.GroupVersion().String(), gvk.Kind
	meta, _ := m["metadata"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
		m["metadata"] = meta
	}
	for _, k := range []string{"resourceVersion", "uid", "generation", "managedFields", "creationTimestamp"} {
		delete(meta, k)
	}
	hash, err := appliedHash(m)
	if err != nil {
		return nil, err
	}
	annotations, _ := meta["annotations"].(map[string]any)
	if annotations == nil {
		annotations = map[string]any{}
		meta["annotations"] = annotations
	}
	annotations[naming.AnnotationAppliedHash] = hash
	return m, nil
}

// appliedHash hashes an apply configuration (json.Marshal sorts map keys,
// so equal content gives an equal hash).
func appliedHash(m map[string]any) (string, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return "", err
	}
	return naming.SHA256Hex(b)[:16], nil
}

// matches reports whether live already holds everything of want.
func matches(want map[string]any, live client.Object) (bool, error) {
	have, err := toJSONMap(live)
	if err != nil {
		return false, err
	}
	// The cache's typed objects carry no apiVersion/kind.
	cmp := make(map[string]any, len(want))
	for k, v := range want {
		if k != "apiVersion" && k != "kind" {
			cmp[k] = v
		}
	}
	return isSubset(cmp, have), nil
}
