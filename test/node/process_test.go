package node

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/engram-dev/engram/internal/naming"
)

// nodeCgroup is the kubelet's cgroupRoot on the node of hack/cluster.sh.
const nodeCgroup = "/sys/fs/cgroup/memory/engram-node"

// checkProcess looks at a service container from the node's side (its
// /proc): the process runs as uid 65532 on a read-only root filesystem,
// and the API token Secret is mounted read-only, readable by its group
// (the Pod's fsGroup) with the volume's mode.
func (e *env) checkProcess(t *testing.T, p *corev1.Pod) {
	t.Helper()
	pid, err := containerPID(p)
	if err != nil {
		t.Errorf("finding the process of %s: %v", p.Name, err)
		return
	}
	if uid := statusField(t, pid, "Uid:"); len(uid) < 2 || uid[1] != "65532" {
		t.Errorf("%s: the service runs as uid %v, want 65532 (the image's nonroot user)", p.Name, uid)
	}
	mounts := readMountinfo(t, pid)
	if opts, ok := mounts["/"]; !ok || !strings.Contains(","+opts+",", ",ro,") {
		t.Errorf("%s: the root filesystem is mounted %q, want read-only", p.Name, opts)
	}
	if opts := mounts[naming.TokensDir]; !strings.Contains(","+opts+",", ",ro,") {
		t.Errorf("%s: %s is mounted %q, want read-only", p.Name, naming.TokensDir, opts)
	}
	want := os.FileMode(0o644) // a Secret volume's default mode
	for _, v := range p.Spec.Volumes {
		if v.Secret != nil && v.Secret.DefaultMode != nil {
			want = os.FileMode(*v.Secret.DefaultMode)
		}
	}
	fi, err := os.Stat(fmt.Sprintf("/proc/%d/root%s", pid, naming.TokensPath))
	if err != nil {
		t.Errorf("%s: %v", p.Name, err)
		return
	}
	st := fi.Sys().(*syscall.Stat_t)
	if fi.Mode().Perm() != want || st.Gid != 65532 {
		t.Errorf("%s: %s has mode %v group %d, want %v group 65532 (fsGroup)", p.Name, naming.TokensPath, fi.Mode().Perm(), st.Gid, want)
	}
}

// containerPID finds the first process of the Pod's first container in
// the node's memory cgroup (kubepods/<qos>/pod<uid>/<container id>).
func containerPID(p *corev1.Pod) (int, error) {
	if len(p.Status.ContainerStatuses) == 0 {
		return 0, fmt.Errorf("no container status")
	}
	_, id, _ := strings.Cut(p.Status.ContainerStatuses[0].ContainerID, "://")
	matches, _ := filepath.Glob(filepath.Join(nodeCgroup, "kubepods*", "pod"+string(p.UID), id, "cgroup.procs"))
	more, _ := filepath.Glob(filepath.Join(nodeCgroup, "kubepods*", "*", "pod"+string(p.UID), id, "cgroup.procs"))
	for _, f := range append(matches, more...) {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		var pid int
		if _, err := fmt.Sscan(string(b), &pid); err == nil {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("no cgroup.procs for container %s of Pod %s under %s", id, p.UID, nodeCgroup)
}

func statusField(t *testing.T, pid int, key string) []string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Error(err)
		return nil
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, key) {
			return strings.Fields(line)
		}
	}
	return nil
}

// readMountinfo maps each mount point of the process to its options.
func readMountinfo(t *testing.T, pid int) map[string]string {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/mountinfo", pid))
	if err != nil {
		t.Error(err)
		return nil
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 5 {
			out[fields[4]] = fields[5]
		}
	}
	return out
}
