package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/client-go/rest"
)

// Table is one `kubectl get` the demo prints.
type Table struct {
	Resource string
	// Cluster: a cluster-scoped kind (no -n).
	Cluster bool
	// Wide adds the columns of priority 1 (-o wide).
	Wide bool
}

// Tables are the kinds, in the order the demo prints them: the runtimes
// wide, so that each shows where its tenant lives (database, Citus worker),
// and the databases wide, so that the Citus one shows its version.
var Tables = []Table{
	{Resource: "memorypolicies"}, {Resource: "memoryruntimes", Wide: true}, {Resource: "retentionjobs"},
	{Resource: "memorydatabases", Cluster: true, Wide: true},
}

// command is the kubectl command line of t in namespace ns.
func (t Table) command(ns string) []string {
	args := []string{"get", t.Resource}
	if !t.Cluster {
		args = append(args, "-n", ns)
	}
	if t.Wide {
		args = append(args, "-o", "wide")
	}
	return args
}

// PrintTables prints `kubectl get` of the kinds in namespace ns: with
// kubectl when it is installed and kubeconfig is a file, otherwise with the
// same server-side tables (the printer columns of the CRDs) that kubectl
// would print, fetched and laid out here.
func PrintTables(ctx context.Context, out io.Writer, cfg *rest.Config, kubeconfig, ns string) error {
	if kubectl, err := exec.LookPath("kubectl"); err == nil && kubeconfig != "" {
		for _, t := range Tables {
			args := t.command(ns)
			fmt.Fprintf(out, "$ kubectl %s\n", strings.Join(args, " "))
			cmd := exec.CommandContext(ctx, kubectl, append([]string{"--kubeconfig", kubeconfig}, args...)...)
			cmd.Stdout, cmd.Stderr = out, out
			if err := cmd.Run(); err != nil {
				return fmt.Errorf("kubectl get %s: %w", t.Resource, err)
			}
			fmt.Fprintln(out)
		}
		return nil
	}
	for _, t := range Tables {
		fmt.Fprintf(out, "$ kubectl %s   # printed by the demo: kubectl is not installed\n", strings.Join(t.command(ns), " "))
		if err := printTable(ctx, out, cfg, ns, t); err != nil {
			return err
		}
		fmt.Fprintln(out)
	}
	return nil
}

func printTable(ctx context.Context, out io.Writer, cfg *rest.Config, ns string, t Table) error {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return err
	}
	url := strings.TrimRight(cfg.Host, "/") + "/apis/memory.engram.dev/v1alpha1/"
	if !t.Cluster {
		url += "namespaces/" + ns + "/"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+t.Resource, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("listing %s: %w", t.Resource, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("listing %s: %s", t.Resource, resp.Status)
	}
	var table metav1.Table
	if err := json.NewDecoder(resp.Body).Decode(&table); err != nil {
		return fmt.Errorf("decoding the %s table: %w", t.Resource, err)
	}
	return writeTable(out, &table, t.Wide)
}

// writeTable lays a server-side table out like kubectl: default-priority
// columns (all of them when wide), upper-case headers, ages as durations.
func writeTable(out io.Writer, t *metav1.Table, wide bool) error {
	if len(t.Rows) == 0 {
		_, err := fmt.Fprintln(out, "No resources found.")
		return err
	}
	tw := tabwriter.NewWriter(out, 0, 8, 3, ' ', 0)
	var cols []int
	var headers []string
	for i, c := range t.ColumnDefinitions {
		if c.Priority == 0 || wide {
			cols = append(cols, i)
			headers = append(headers, strings.ToUpper(c.Name))
		}
	}
	fmt.Fprintln(tw, strings.Join(headers, "\t"))
	for _, row := range t.Rows {
		cells := make([]string, 0, len(cols))
		for _, i := range cols {
			cells = append(cells, cell(t.ColumnDefinitions[i], row.Cells[i]))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

func cell(def metav1.TableColumnDefinition, v any) string {
	if v == nil {
		return "<none>"
	}
	s := fmt.Sprint(v)
	if def.Format == "date-time" || def.Type == "date" {
		if ts, err := time.Parse(time.RFC3339, s); err == nil {
			return duration.HumanDuration(time.Since(ts))
		}
	}
	if s == "" {
		return "<none>"
	}
	return s
}
