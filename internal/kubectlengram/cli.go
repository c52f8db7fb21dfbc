package kubectlengram

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/tools/clientcmd"
)

// usage is the help text of the plugin.
const usage = `kubectl engram: operate Engram memory runtimes.

Usage:
  kubectl engram status [RUNTIME] [-A]              one runtime in detail, or a table of runtimes
  kubectl engram databases [DATABASE]               the MemoryDatabases: reachable, tenants, room;
                                                    one in detail with the tenants placed there
  kubectl engram run-now RETENTIONJOB [--dry-run] [--wait]
  kubectl engram rotate-credentials RUNTIME [--wait]
  kubectl engram pause RUNTIME | resume RUNTIME
  kubectl engram move RUNTIME --to-cluster-connection NAME | --to-secret NAME[/KEY] [--dry-run]
                                                    move the tenant to another PostgreSQL server,
                                                    online (spec.database, onChange: Move); writes
                                                    answer 503 for seconds at the switch
  kubectl engram move confirm RUNTIME               the move switched: keep (Retain) or drop
                                                    (Delete) the old copy, per reclaimPolicy
  kubectl engram move abort RUNTIME                 before the switch: back to the old server
  kubectl engram memories RUNTIME OWNER [--search Q] [--limit N] [--filter JSON]
  kubectl engram context RUNTIME OWNER --query Q [--filter JSON]
                                                    --filter: the API's filter grammar, e.g.
                                                    '{"tags": {"eq": "travel"}}' (docs/api.md)
  kubectl engram erase RUNTIME OWNER --yes
  kubectl engram export RUNTIME [--owner OWNER] [--vectors] > FILE
                                                    the tenant's (or one owner's) data as JSON
                                                    Lines (docs/export.md); summary on stderr,
                                                    after a progress bar on a terminal
  kubectl engram import RUNTIME [-f FILE] [--dry-run]
                                                    write an export into RUNTIME (idempotent; from
                                                    stdin without -f), whole owners a request;
                                                    a progress bar on a terminal's stderr

Flags of every command:
  -o, --output json|yaml     machine-readable output (default: human tables)
  -n, --namespace NS         namespace (default: the kubeconfig context's)
      --kubeconfig PATH      kubeconfig file (default: $KUBECONFIG, ~/.kube/config)
      --context NAME         kubeconfig context
      --url URL              call the memory service at URL instead of through
                             the API server's service proxy
      --service-token TOKEN  bearer token of the memory service (default: the
                             admin token of the runtime's <name>-api-token
                             Secret; env ENGRAM_TOKEN)
      --request-timeout D    bound of each call (default 30s)
  and kubectl's other connection flags (--cluster, --user, --server, --token ...)
`

// globals are the flags every command takes.
type globals struct {
	output       string
	url          string
	serviceToken string
	timeout      time.Duration
	rules        *clientcmd.ClientConfigLoadingRules
	overrides    *clientcmd.ConfigOverrides
}

// command is one subcommand: its own flags, its argument count, and what it does.
type command struct {
	args  []string // names of the positional arguments; a trailing "?" marks optional ones
	flags func(fs *pflag.FlagSet)
	run   func(ctx context.Context, a *app, args []string) error
}

// app is one invocation: parsed flags and where the output goes.
type app struct {
	globals
	out, errOut io.Writer
	in          io.Reader // stdin: the export `import` reads without --file
	// per-command flags
	allNamespaces bool
	dryRun, wait  bool
	yes           bool
	search, query string
	// filter is --filter: a JSON filter the service checks (422 names the
	// offending part); the plugin only checks it is one JSON object.
	filter      string
	limit       int
	waitTimeout time.Duration
	// export and import
	owner           string
	vectors         bool
	file            string
	maxRequestBytes int64
	// move
	toCluster, toSecret string

	kube *kube // opened lazily: --url with --service-token needs no cluster
	// terminal says whether w is a terminal (progress is drawn only there);
	// nil is isTerminal. Tests inject a fake terminal.
	terminal func(w io.Writer) bool
}

// Main runs the plugin with args (without the program name) and returns
// the exit code: 0 done, 1 failed, 2 bad usage.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return (&app{out: stdout, errOut: stderr, in: os.Stdin}).main(ctx, args)
}

// main runs one invocation on a (its writers, stdin and terminal check set).
func (a *app) main(ctx context.Context, args []string) int {
	stdout, stderr := a.out, a.errOut
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, usage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cmds := a.commands()
	name := args[0]
	cmd, ok := cmds[name]
	if !ok {
		fmt.Fprintf(stderr, "error: unknown command %q\n\n%s", name, usage)
		return 2
	}
	fs := a.flagSet(name)
	if cmd.flags != nil {
		cmd.flags(fs)
	}
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			fmt.Fprint(stdout, usage)
			return 0
		}
		fmt.Fprintf(stderr, "error: %s: %v\n", name, err)
		return 2
	}
	pos := fs.Args()
	if err := checkArgs(name, cmd.args, pos); err != nil {
		fmt.Fprintf(stderr, "error: %v\n", err)
		return 2
	}
	if err := checkOutput(a.output); err != nil {
		fmt.Fprintf(stderr, "error: %v\n", err)
		return 2
	}
	a.timeout = 30 * time.Second
	if t := a.overrides.Timeout; t != "" && t != "0" {
		d, err := time.ParseDuration(t)
		if err != nil {
			fmt.Fprintf(stderr, "error: --request-timeout %q: %v\n", t, err)
			return 2
		}
		a.timeout = d
	}
	if err := cmd.run(ctx, a, pos); err != nil {
		fmt.Fprintf(stderr, "error: %v\n", err)
		return 1
	}
	return 0
}

// flagSet holds the flags every command takes, kubectl's connection flags
// (--kubeconfig, --context, -n ...) among them.
func (a *app) flagSet(name string) *pflag.FlagSet {
	fs := pflag.NewFlagSet("kubectl engram "+name, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.SetInterspersed(true)
	a.rules = clientcmd.NewDefaultClientConfigLoadingRules()
	a.overrides = &clientcmd.ConfigOverrides{}
	fs.StringVar(&a.rules.ExplicitPath, "kubeconfig", "", "kubeconfig file")
	clientcmd.BindOverrideFlags(a.overrides, fs, clientcmd.RecommendedConfigOverrideFlags(""))
	fs.StringVarP(&a.output, "output", "o", "", "json or yaml")
	fs.StringVar(&a.url, "url", "", "memory service URL")
	fs.StringVar(&a.serviceToken, "service-token", os.Getenv("ENGRAM_TOKEN"), "memory service token")
	return fs
}

// checkArgs compares the positional arguments with what the command takes.
func checkArgs(cmd string, want, got []string) error {
	min := 0
	for _, w := range want {
		if !strings.HasSuffix(w, "?") {
			min++
		}
	}
	if len(got) < min || len(got) > len(want) {
		names := strings.ToUpper(strings.ReplaceAll(strings.Join(want, " "), "?", ""))
		return fmt.Errorf("%s takes %s (got %d argument(s)); see kubectl engram --help", cmd, names, len(got))
	}
	return nil
}

func checkOutput(o string) error {
	switch o {
	case "", "json", "yaml", "table":
		return nil
	}
	return fmt.Errorf("--output %q: use json or yaml (or nothing for tables)", o)
}

// commands is the command table.
func (a *app) commands() map[string]command {
	return map[string]command{
		"status": {args: []string{"runtime?"}, run: runStatus, flags: func(fs *pflag.FlagSet) {
			fs.BoolVarP(&a.allNamespaces, "all-namespaces", "A", false, "every namespace")
		}},
		"databases": {args: []string{"database?"}, run: runDatabases},
		"run-now": {args: []string{"retentionjob"}, run: runRunNow, flags: func(fs *pflag.FlagSet) {
			fs.BoolVar(&a.dryRun, "dry-run", false, "server-side dry run: check the request, change nothing")
			fs.BoolVar(&a.wait, "wait", false, "follow until every run finished")
			fs.DurationVar(&a.waitTimeout, "timeout", 15*time.Minute, "how long --wait waits")
		}},
		"rotate-credentials": {args: []string{"runtime"}, run: runRotate, flags: func(fs *pflag.FlagSet) {
			fs.BoolVar(&a.wait, "wait", false, "follow until the operator rotated")
			fs.DurationVar(&a.waitTimeout, "timeout", 5*time.Minute, "how long --wait waits")
		}},
		"pause":  {args: []string{"runtime"}, run: func(ctx context.Context, a *app, args []string) error { return setPaused(ctx, a, args[0], true) }},
		"resume": {args: []string{"runtime"}, run: func(ctx context.Context, a *app, args []string) error { return setPaused(ctx, a, args[0], false) }},
		"move": {args: []string{"confirm|abort?", "runtime"}, run: runMove, flags: func(fs *pflag.FlagSet) {
			fs.StringVar(&a.toCluster, "to-cluster-connection", "", "move to the server of this clusterConnection")
			fs.StringVar(&a.toSecret, "to-secret", "", "move to the server of this connection Secret of the runtime's namespace: NAME or NAME/KEY (key default uri)")
			fs.BoolVar(&a.dryRun, "dry-run", false, "server-side dry run: check the request, change nothing")
		}},
		"memories": {args: []string{"runtime", "owner"}, run: runMemories, flags: func(fs *pflag.FlagSet) {
			fs.StringVar(&a.search, "search", "", "search query (default: list newest first)")
			fs.IntVar(&a.limit, "limit", 20, "how many")
			fs.StringVar(&a.filter, "filter", "", `only the memories a JSON filter keeps, e.g. '{"tags": {"eq": "travel"}}'`)
		}},
		"context": {args: []string{"runtime", "owner"}, run: runContext, flags: func(fs *pflag.FlagSet) {
			fs.StringVar(&a.query, "query", "", "what the prompt is about (required)")
			fs.StringVar(&a.filter, "filter", "", `only the memories a JSON filter keeps, e.g. '{"tags": {"eq": "travel"}}'`)
		}},
		"erase": {args: []string{"runtime", "owner"}, run: runErase, flags: func(fs *pflag.FlagSet) {
			fs.BoolVar(&a.yes, "yes", false, "confirm: erase every memory and all history of OWNER")
		}},
		"export": {args: []string{"runtime"}, run: runExport, flags: func(fs *pflag.FlagSet) {
			fs.StringVar(&a.owner, "owner", "", "export this owner only (default: the whole tenant)")
			fs.BoolVar(&a.vectors, "vectors", false, "include the embeddings (an import into a runtime of the same embedder keeps them)")
		}},
		"import": {args: []string{"runtime"}, run: runImport, flags: func(fs *pflag.FlagSet) {
			fs.StringVarP(&a.file, "file", "f", "-", "the export to import (- = stdin)")
			fs.BoolVar(&a.dryRun, "dry-run", false, "validate and count, write nothing")
			fs.Int64Var(&a.maxRequestBytes, "max-request-bytes", 16<<20, "largest body of one import request (whole owners; at most the service's --max-import-bytes)")
		}},
	}
}
