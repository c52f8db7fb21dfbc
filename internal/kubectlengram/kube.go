package kubectlengram

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
)

// kube is the connection to the cluster of the kubeconfig.
type kube struct {
	c         client.Client
	cs        *kubernetes.Clientset
	namespace string // -n, or the context's namespace
}

// kubeClient opens the cluster connection once.
func (a *app) kubeClient() (*kube, error) {
	if a.kube != nil {
		return a.kube, nil
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(a.rules, a.overrides)
	ns, _, err := cc.Namespace()
	if err != nil {
		return nil, fmt.Errorf("reading the namespace of the kubeconfig: %w", err)
	}
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading the kubeconfig: %w", err)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = a.timeout
	}
	cfg.UserAgent = "kubectl-engram"
	host, err := apiHost(cfg)
	if err != nil {
		return nil, err
	}
	cfg.Wrap(wrapServiceToken(host)) // below client-go's debug output (proxytoken.go)
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := memoryv1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", cfg.Host, err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", cfg.Host, err)
	}
	a.kube = &kube{c: c, cs: cs, namespace: ns}
	return a.kube, nil
}

// apiError turns an API error into one that says what to do: a missing
// object names its kind and namespace, a refusal names the verb and the
// resource the user's RBAC lacks.
func apiError(err error, verb, resource, namespace, name string) error {
	if err == nil {
		return nil
	}
	where := fmt.Sprintf("in namespace %q", namespace)
	switch {
	case resource == resDatabases:
		where = "in the cluster" // cluster-scoped
	case namespace == "":
		where = "in any namespace"
	}
	switch {
	case apierrors.IsForbidden(err):
		return &ForbiddenError{Verb: verb, Resource: resource, Namespace: namespace, Err: err}
	case apierrors.IsNotFound(err) && name != "":
		return fmt.Errorf("no %s %q %s: %w", resource, name, where, err)
	}
	target := resource
	if name != "" {
		target += " " + name
	}
	return fmt.Errorf("%s %s %s: %w", verb, target, where, err)
}

// ForbiddenError is a request the user's RBAC refused.
type ForbiddenError struct {
	Verb, Resource, Namespace string
	Err                       error
}

func (e *ForbiddenError) Error() string {
	return fmt.Sprintf("forbidden: your RBAC lacks verb %q on resource %q in namespace %q (ask for a Role granting it): %v",
		e.Verb, e.Resource, e.Namespace, e.Err)
}

func (e *ForbiddenError) Unwrap() error { return e.Err }

// Resource names as RBAC spells them (resource.group).
const (
	resRuntimes      = "memoryruntimes.memory.engram.dev"
	resRetentionJobs = "retentionjobs.memory.engram.dev"
	resDeployments   = "deployments.apps"
	resSecrets       = "secrets"
	resJobs          = "jobs.batch"
	resServiceProxy  = "services/proxy"
)

// getRuntime reads one MemoryRuntime.
func (k *kube) getRuntime(ctx context.Context, name string) (*memoryv1alpha1.MemoryRuntime, error) {
	var rt memoryv1alpha1.MemoryRuntime
	err := k.c.Get(ctx, client.ObjectKey{Namespace: k.namespace, Name: name}, &rt)
	if err != nil {
		return nil, apiError(err, "get", resRuntimes, k.namespace, name)
	}
	return &rt, nil
}

// runtime reads the runtime name of the namespace, with the client it
// read it with.
func (a *app) runtime(ctx context.Context, name string) (*kube, *memoryv1alpha1.MemoryRuntime, error) {
	k, err := a.kubeClient()
	if err != nil {
		return nil, nil, err
	}
	rt, err := k.getRuntime(ctx, name)
	if err != nil {
		return nil, nil, err
	}
	return k, rt, nil
}

// isForbidden reports whether err is a refusal of the user's RBAC.
func isForbidden(err error) bool {
	var f *ForbiddenError
	return errors.As(err, &f)
}
