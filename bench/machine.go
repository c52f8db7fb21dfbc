package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
)

// Machine describes where the figures were measured; they mean little
// without it.
type Machine struct {
	CPU          string `json:"cpu"`
	Cores        int    `json:"cores"`
	MemoryGiB    int    `json:"memoryGiB"`
	Kernel       string `json:"kernel"`
	Go           string `json:"go"`
	Postgres     string `json:"postgres"`
	LoadAvgStart string `json:"loadAvgStart"`
	LoadAvgEnd   string `json:"loadAvgEnd"`
}

func machineInfo(ctx context.Context, serverURL string) Machine {
	m := Machine{Cores: runtime.NumCPU(), Go: runtime.Version(), LoadAvgStart: loadAvg()}
	m.CPU = procField("/proc/cpuinfo", "model name")
	if kb := procField("/proc/meminfo", "MemTotal"); kb != "" {
		var n int
		_, _ = fmt.Sscanf(kb, "%d", &n) // unparsable: 0, "unknown"
		m.MemoryGiB = (n + 1<<19) >> 20
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	pg, err := serverInfo(ctx, serverURL)
	if err != nil {
		pg = "unknown: " + err.Error()
	}
	m.Postgres = pg
	return m
}

func (m Machine) summary() string {
	return fmt.Sprintf("%d x %s, %d GiB, %s; load %s", m.Cores, m.CPU, m.MemoryGiB, m.Postgres, m.LoadAvgStart)
}

// procField returns the value of the first "key: value" line of a /proc file.
func procField(path, key string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// loadAvg is the 1, 5 and 15 minute load average: on a shared machine it
// tells how much else was running.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}
