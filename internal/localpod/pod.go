package localpod

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/engram-dev/engram/internal/naming"
)

// podSpec is what a local pod needs from a pod template.
type podSpec struct {
	namespace, name string
	template        *corev1.PodTemplateSpec
}

func newPodSpec(namespace, name string, t *corev1.PodTemplateSpec) podSpec {
	return podSpec{namespace: namespace, name: name, template: t}
}

// process is one local container process.
type process struct {
	cmd     *exec.Cmd
	url     string // http(s)://127.0.0.1:PORT for servers
	scheme  string // of url: https when the readiness probe's is
	hash    string // pod template hash of the Deployment it runs
	logPath string
	termLog string // the container's termination message file
	done    chan struct{}
	err     error
	probe   string // readiness path
}

func (p *process) alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// stop sends SIGTERM (graceful shutdown), then SIGKILL after 10 s.
func (p *process) stop() {
	if !p.alive() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// waitReady polls the readiness probe until it answers 200.
func (p *process) waitReady(ctx context.Context, timeout time.Duration) error {
	if p.url == "" {
		return nil
	}
	return WaitOK(ctx, p.url+p.probe, timeout, func() error {
		if !p.alive() {
			return fmt.Errorf("process exited: %v", p.err)
		}
		return nil
	})
}

// start materializes the pod's volumes under dir and starts its first container.
func (k *Kubelet) start(ctx context.Context, pod podSpec, dir string) (*process, error) {
	spec := pod.template.Spec
	if len(spec.Containers) == 0 {
		return nil, fmt.Errorf("pod template has no container")
	}
	c := spec.Containers[0]
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	mounts, err := k.materialize(ctx, pod.namespace, spec.Volumes, c.VolumeMounts, dir)
	if err != nil {
		return nil, err
	}
	env, err := k.environment(ctx, pod, c)
	if err != nil {
		return nil, err
	}
	p := &process{done: make(chan struct{}), logPath: filepath.Join(dir, "container.log"), scheme: "http"}
	p.termLog = filepath.Join(dir, "termination-log")
	if c.ReadinessProbe != nil && c.ReadinessProbe.HTTPGet != nil {
		p.probe = c.ReadinessProbe.HTTPGet.Path
		if c.ReadinessProbe.HTTPGet.Scheme == corev1.URISchemeHTTPS {
			p.scheme = "https" // a runtime with spec.service.tls
		}
	}
	argv, err := k.rewrite(append(append([]string{}, c.Command...), c.Args...), mounts, p)
	if err != nil {
		return nil, err
	}
	logFile, err := os.Create(p.logPath)
	if err != nil {
		return nil, err
	}
	// Not tied to ctx: the process is stopped explicitly (SIGTERM), like a pod.
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env, cmd.Stdout, cmd.Stderr, cmd.Dir = env, logFile, logFile, dir
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %v: %w", argv, err)
	}
	p.cmd = cmd
	go func() {
		p.err = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// materialize writes the ConfigMap, Secret and emptyDir volumes the
// container mounts into dir and returns mount path -> local directory.
func (k *Kubelet) materialize(ctx context.Context, namespace string, volumes []corev1.Volume, mounts []corev1.VolumeMount, dir string) (map[string]string, error) {
	byName := map[string]corev1.Volume{}
	for _, v := range volumes {
		byName[v.Name] = v
	}
	out := map[string]string{}
	for _, m := range mounts {
		v, ok := byName[m.Name]
		if !ok {
			return nil, fmt.Errorf("volume %q is mounted but not defined", m.Name)
		}
		local := filepath.Join(dir, "volumes", m.Name)
		if err := os.MkdirAll(local, 0o700); err != nil {
			return nil, err
		}
		files, err := k.volumeFiles(ctx, namespace, v)
		if err != nil {
			return nil, err
		}
		for name, data := range files {
			if err := os.WriteFile(filepath.Join(local, name), data, 0o600); err != nil {
				return nil, err
			}
		}
		out[m.MountPath] = local
	}
	return out, nil
}

func (k *Kubelet) volumeFiles(ctx context.Context, namespace string, v corev1.Volume) (map[string][]byte, error) {
	switch {
	case v.ConfigMap != nil:
		var cm corev1.ConfigMap
		if err := k.Client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: v.ConfigMap.Name}, &cm); err != nil {
			return nil, fmt.Errorf("volume %q: %w", v.Name, err)
		}
		data := map[string][]byte{}
		for key, val := range cm.Data {
			data[key] = []byte(val)
		}
		return project(data, v.ConfigMap.Items), nil
	case v.Secret != nil:
		var s corev1.Secret
		if err := k.Client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: v.Secret.SecretName}, &s); err != nil {
			return nil, fmt.Errorf("volume %q: %w", v.Name, err)
		}
		return project(s.Data, v.Secret.Items), nil
	case v.EmptyDir != nil:
		return nil, nil
	}
	return nil, fmt.Errorf("volume %q: only configMap, secret and emptyDir volumes run locally", v.Name)
}

// project applies a volume's items (key -> path) like the kubelet does.
func project(data map[string][]byte, items []corev1.KeyToPath) map[string][]byte {
	if len(items) == 0 {
		return data
	}
	out := map[string][]byte{}
	for _, it := range items {
		if v, ok := data[it.Key]; ok {
			out[it.Path] = v
		}
	}
	return out
}

// environment resolves the container's env (values, Secret and ConfigMap
// keys, the downward API's namespace and name) on top of a minimal base.
func (k *Kubelet) environment(ctx context.Context, pod podSpec, c corev1.Container) ([]string, error) {
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "TMPDIR=" + os.TempDir()}
	for _, e := range c.Env {
		val := e.Value
		if src := e.ValueFrom; src != nil {
			var err error
			if val, err = k.envValue(ctx, pod, src); err != nil {
				return nil, fmt.Errorf("env %s: %w", e.Name, err)
			}
		}
		env = append(env, e.Name+"="+val)
	}
	return env, nil
}

func (k *Kubelet) envValue(ctx context.Context, pod podSpec, src *corev1.EnvVarSource) (string, error) {
	switch {
	case src.SecretKeyRef != nil:
		var s corev1.Secret
		if err := k.Client.Get(ctx, types.NamespacedName{Namespace: pod.namespace, Name: src.SecretKeyRef.Name}, &s); err != nil {
			return "", err
		}
		v, ok := s.Data[src.SecretKeyRef.Key]
		if !ok {
			return "", fmt.Errorf("secret %s has no key %s", src.SecretKeyRef.Name, src.SecretKeyRef.Key)
		}
		return string(v), nil
	case src.ConfigMapKeyRef != nil:
		var cm corev1.ConfigMap
		if err := k.Client.Get(ctx, types.NamespacedName{Namespace: pod.namespace, Name: src.ConfigMapKeyRef.Name}, &cm); err != nil {
			return "", err
		}
		return cm.Data[src.ConfigMapKeyRef.Key], nil
	case src.FieldRef != nil:
		switch src.FieldRef.FieldPath {
		case "metadata.namespace":
			return pod.namespace, nil
		case "metadata.name":
			return pod.name + "-local", nil
		}
	}
	return "", fmt.Errorf("unsupported env source")
}

// rewrite maps the container's command line onto this machine: /manager is
// the local binary, mount paths are the materialized directories, a listen
// address (API or metrics) becomes a free port on 127.0.0.1, and the
// termination log is a file of the pod's directory.
func (k *Kubelet) rewrite(argv []string, mounts map[string]string, p *process) ([]string, error) {
	if len(argv) == 0 {
		return nil, fmt.Errorf("container has no command")
	}
	if filepath.Base(argv[0]) != "manager" {
		return nil, fmt.Errorf("container command %q is not the Engram manager", argv[0])
	}
	paths := make([]string, 0, len(mounts))
	for m := range mounts {
		paths = append(paths, m)
	}
	sort.Slice(paths, func(i, j int) bool { return len(paths[i]) > len(paths[j]) }) // longest first
	out := []string{k.Binary}
	for _, a := range argv[1:] {
		switch {
		case strings.HasPrefix(a, "--listen="):
			port, err := FreePort()
			if err != nil {
				return nil, err
			}
			p.url = p.scheme + "://127.0.0.1:" + strconv.Itoa(port)
			a = "--listen=127.0.0.1:" + strconv.Itoa(port)
		case strings.HasPrefix(a, "--metrics-listen="):
			// A port of its own too: pods of several runtimes share this host.
			port, err := FreePort()
			if err != nil {
				return nil, err
			}
			a = "--metrics-listen=127.0.0.1:" + strconv.Itoa(port)
		case strings.HasPrefix(a, "--termination-log="):
			a = "--termination-log=" + p.termLog
		default:
			a = mapPath(a, paths, mounts)
		}
		out = append(out, a)
	}
	return out, nil
}

// mapPath replaces a mount path at the start of an argument's value
// ("--config=/etc/engram/config/config.yaml" or "/etc/x") by its local
// directory, once, using the longest matching mount.
func mapPath(arg string, paths []string, mounts map[string]string) string {
	prefix, value := "", arg
	if i := strings.IndexByte(arg, '='); i >= 0 && strings.HasPrefix(arg, "-") {
		prefix, value = arg[:i+1], arg[i+1:]
	}
	for _, m := range paths { // longest first
		if value == m || strings.HasPrefix(value, strings.TrimSuffix(m, "/")+"/") {
			return prefix + mounts[m] + value[len(m):]
		}
	}
	return arg
}

// templateHash identifies a pod template, so a changed one means a rollout.
func templateHash(t *corev1.PodTemplateSpec) string {
	b, _ := json.Marshal(t)
	return naming.ShortHash(string(b), 8)
}
