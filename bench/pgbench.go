package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	pgv "github.com/pgvector/pgvector-go"
)

// Pgbench is PostgreSQL's own client running the raw side's statement, in
// the same run: a cross-check that the harness's client path (pgx, the
// pool, the load loop) does not limit the raw figures.
type Pgbench struct {
	TPS float64 `json:"tps"`
	// RawRatio is the raw side's throughput / pgbench's.
	RawRatio float64 `json:"rawRatio"`
	Binary   string  `json:"binary"`
}

// pgbenchBinary finds pgbench: $PGBENCH, then PATH, then the PostgreSQL
// installations of the host, then the Debian root of hack/pgvector.sh
// (run through that root's own loader, since its libc is newer than the
// host's). It returns the command prefix, or nil when there is none.
func pgbenchBinary() []string {
	if p := os.Getenv("PGBENCH"); p != "" {
		return []string{p}
	}
	if p, err := exec.LookPath("pgbench"); err == nil {
		return []string{p}
	}
	if m, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pgbench"); len(m) > 0 {
		return []string{m[len(m)-1]}
	}
	cache := os.Getenv("ENGRAM_CACHE")
	if cache == "" {
		if home, err := os.UserCacheDir(); err == nil {
			cache = filepath.Join(home, "engram")
		}
	}
	root := filepath.Join(cache, "postgres", "rootfs")
	bins, _ := filepath.Glob(filepath.Join(root, "usr/lib/postgresql/*/bin/pgbench"))
	loader := filepath.Join(root, "lib64/ld-linux-x86-64.so.2")
	if len(bins) == 0 {
		return nil
	}
	if _, err := os.Stat(loader); err != nil {
		return nil
	}
	libs := filepath.Join(root, "usr/lib/x86_64-linux-gnu") + ":" + filepath.Join(root, "lib/x86_64-linux-gnu")
	return []string{loader, "--library-path", libs, bins[len(bins)-1]}
}

var placeholder = regexp.MustCompile(`\$(\d+)`)

// pgbenchScript renders a statement of the raw side for pgbench: the owner
// ($1) becomes a random large owner per transaction, every other argument
// a literal. The plan and the work per row are the same; pgbench prepares
// the statement once per connection (-M prepared), as pgx does.
func pgbenchScript(sql string, args []any, owners int) (string, error) {
	// $1 first (not $10..): the owner's expression holds no placeholder.
	owner := `('owner-' || lpad(:o::text, 4, '0'))`
	sql = placeholder.ReplaceAllStringFunc(sql, func(p string) string {
		if p == "$1" {
			return owner
		}
		return p
	})
	body, err := literalSQL(sql, args)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("\\set o random(0, %d)\n%s;\n", owners-1, body), nil
}

func sqlLiteral(a any) (string, error) {
	quote := func(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
	switch v := a.(type) {
	case string:
		return quote(v), nil
	case int:
		return strconv.Itoa(v), nil
	case int64:
		return strconv.FormatInt(v, 10), nil
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64) + "::float8", nil
	case []string:
		parts := make([]string, len(v))
		for i, s := range v {
			parts[i] = `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
		}
		return quote("{"+strings.Join(parts, ",")+"}") + "::text[]", nil
	case []float64:
		parts := make([]string, len(v))
		for i, f := range v {
			parts[i] = strconv.FormatFloat(f, 'g', -1, 64)
		}
		return quote("{"+strings.Join(parts, ",")+"}") + "::float8[]", nil
	case pgv.Vector:
		return quote(v.String()), nil
	}
	return "", fmt.Errorf("no literal for %T", a)
}

var pgbenchTPS = regexp.MustCompile(`tps = ([0-9.]+) \(without initial connection time\)`)

// runPgbench runs the scripts (one per sample query, chosen at random per
// transaction) with conc clients for dur against url and returns the
// transactions per second.
func (h *harness) runPgbench(ctx context.Context, bin []string, url string, scripts []string, conc int, dur time.Duration) (float64, error) {
	dir, err := os.MkdirTemp(h.workDir, "pgbench-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	args := append([]string{}, bin[1:]...)
	args = append(args, "-n", "-M", "prepared", "-c", strconv.Itoa(conc), "-j", strconv.Itoa(conc),
		"-T", strconv.Itoa(max(1, int(dur.Seconds()))))
	for i, s := range scripts {
		f := filepath.Join(dir, fmt.Sprintf("q%d.sql", i))
		if err := os.WriteFile(f, []byte(s), 0o600); err != nil {
			return 0, err
		}
		args = append(args, "-f", f)
	}
	args = append(args, url)
	ctx, cancel := context.WithTimeout(ctx, dur+time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin[0], args...).CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("pgbench: %w: %s", err, lastLines(string(out), 5))
	}
	m := pgbenchTPS.FindStringSubmatch(string(out))
	if m == nil {
		return 0, errors.New("pgbench printed no tps: " + lastLines(string(out), 5))
	}
	return strconv.ParseFloat(m[1], 64)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], " | ")
}
