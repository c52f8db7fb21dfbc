package kubectlengram

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
)

// resDatabases is the resource of MemoryDatabases as RBAC spells it.
const resDatabases = "memorydatabases.memory.engram.dev"

// DatabaseRow is one line of `databases` (and its -o json|yaml).
type DatabaseRow struct {
	Name string `json:"name"`
	// Reachable is the status of the Reachable condition (True, False, Unknown).
	Reachable  string       `json:"reachable"`
	Reason     string       `json:"reason,omitempty"`
	Message    string       `json:"message,omitempty"`
	Cordoned   bool         `json:"cordoned"`
	Tenants    int32        `json:"tenants"`
	MaxTenants *int32       `json:"maxTenants,omitempty"`
	BytesUsed  string       `json:"bytesUsed,omitempty"`
	MaxBytes   string       `json:"maxBytes,omitempty"`
	Version    string       `json:"serverVersion,omitempty"`
	Citus      *CitusRow    `json:"citus,omitempty"`
	Extensions []string     `json:"extensions,omitempty"`
	LastCheck  *metav1.Time `json:"lastCheck,omitempty"`
	Created    metav1.Time  `json:"created"`
}

// CitusRow is the Citus side of a database.
type CitusRow struct {
	Version     string   `json:"version"`
	Coordinator bool     `json:"coordinator"`
	Workers     []string `json:"workers"`
}

// DatabaseStatus is `databases NAME`: the row and the tenants placed there.
type DatabaseStatus struct {
	DatabaseRow
	// Tenants placed there as namespace/name (MemoryRuntimes whose
	// status.database names it), when the user may list runtimes.
	Runtimes    []string `json:"runtimes"`
	Unavailable []string `json:"unavailable,omitempty"`
	// Admits says which namespaces may be placed there
	// (spec.allowedNamespaces), for humans.
	Admits string `json:"admits"`
}

func runDatabases(ctx context.Context, a *app, args []string) error {
	k, err := a.kubeClient()
	if err != nil {
		return err
	}
	if len(args) == 1 {
		return showDatabase(ctx, a, k, args[0])
	}
	var list memoryv1alpha1.MemoryDatabaseList
	if err := k.c.List(ctx, &list); err != nil {
		return apiError(err, "list", resDatabases, "", "")
	}
	rows := []DatabaseRow{}
	for i := range list.Items {
		rows = append(rows, databaseRow(&list.Items[i]))
	}
	now := time.Now()
	return a.printData(rows, func(w io.Writer) error {
		if len(rows) == 0 {
			_, err := fmt.Fprintln(w, "No MemoryDatabases: runtimes connect through clusterConnection or connectionSecretRef (docs/operations.md, \"Database servers\").")
			return err
		}
		var out [][]string
		for _, r := range rows {
			out = append(out, []string{r.Name, r.Reachable, orDash(r.Reason), tenantsText(r), bytesText(r), yesNo(r.Cordoned),
				orDash(r.Version), citusText(r.Citus), lastCheckText(r.LastCheck, now), age(r.Created.Time, now)})
		}
		return table(w, []string{"NAME", "REACHABLE", "REASON", "TENANTS", "USED", "CORDONED", "VERSION", "CITUS", "CHANGED", "AGE"}, out)
	})
}

// showDatabase is one database in detail, with its tenants.
func showDatabase(ctx context.Context, a *app, k *kube, name string) error {
	var db memoryv1alpha1.MemoryDatabase
	if err := k.c.Get(ctx, client.ObjectKey{Name: name}, &db); err != nil {
		return apiError(err, "get", resDatabases, "", name)
	}
	st := &DatabaseStatus{DatabaseRow: databaseRow(&db), Runtimes: []string{}, Admits: admitsText(db.Spec.AllowedNamespaces)}
	var runtimes memoryv1alpha1.MemoryRuntimeList
	if err := k.c.List(ctx, &runtimes); err != nil {
		st.Unavailable = append(st.Unavailable, "tenants: "+apiError(err, "list", resRuntimes, "", "").Error())
	}
	for _, rt := range runtimes.Items {
		if rt.PlacedDatabase() == name {
			st.Runtimes = append(st.Runtimes, rt.Namespace+"/"+rt.Name)
		}
	}
	slices.Sort(st.Runtimes)
	now := time.Now()
	return a.printData(st, func(w io.Writer) error { return printDatabase(w, st, &db, now) })
}

// admitsText says which namespaces a database admits (spec.allowedNamespaces).
func admitsText(sel *metav1.LabelSelector) string {
	if sel == nil {
		return "no namespace (spec.allowedNamespaces is not set)"
	}
	if len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0 {
		return "every namespace"
	}
	return "namespaces labelled " + metav1.FormatLabelSelector(sel)
}

func printDatabase(w io.Writer, st *DatabaseStatus, db *memoryv1alpha1.MemoryDatabase, now time.Time) error {
	line := func(k, v string) { fmt.Fprintf(w, "%-15s %s\n", k+":", v) }
	line("MemoryDatabase", st.Name)
	reach := st.Reachable
	if st.Reason != "" {
		reach += " (" + st.Reason + ")"
	}
	if st.Message != "" {
		reach += ": " + st.Message
	}
	line("Reachable", reach)
	line("Secret", db.Spec.SecretRef.Name+" (operator namespace)")
	if db.Spec.DatabaseName != "" {
		line("Database", db.Spec.DatabaseName)
	}
	line("Tenants", tenantsText(st.DatabaseRow))
	line("Used", bytesText(st.DatabaseRow))
	line("Cordoned", yesNo(st.Cordoned))
	line("Admits", st.Admits)
	line("Version", orDash(st.Version))
	line("Extensions", orDash(strings.Join(st.Extensions, ", ")))
	if c := st.Citus; c != nil {
		line("Citus", citusText(c))
		for _, wk := range c.Workers {
			fmt.Fprintf(w, "%-15s %s\n", "", "worker "+wk)
		}
	}
	line("Last change", lastCheckText(st.LastCheck, now))
	fmt.Fprintf(w, "\nTenants placed here (%d):\n", len(st.Runtimes))
	if len(st.Runtimes) == 0 {
		fmt.Fprintln(w, "  none")
	}
	for _, r := range st.Runtimes {
		fmt.Fprintln(w, "  "+r)
	}
	if len(st.Unavailable) > 0 {
		fmt.Fprintln(w, "\nNot shown:")
		for _, u := range st.Unavailable {
			fmt.Fprintln(w, "  "+u)
		}
	}
	return nil
}

func databaseRow(db *memoryv1alpha1.MemoryDatabase) DatabaseRow {
	r := DatabaseRow{Name: db.Name, Reachable: string(db.Reachability()), Cordoned: db.Spec.Cordoned,
		Tenants: db.Status.Tenants, MaxTenants: db.Spec.Capacity.MaxTenants, Version: db.Status.ServerVersion,
		LastCheck: db.Status.LastCheck, Created: db.CreationTimestamp}
	if c := db.GetCondition(memoryv1alpha1.ConditionReachable); c != nil {
		r.Reason, r.Message = c.Reason, c.Message
	}
	if q := db.Status.BytesUsed; q != nil {
		r.BytesUsed = q.String()
	}
	if q := db.Spec.Capacity.MaxBytes; q != nil {
		r.MaxBytes = q.String()
	}
	for _, e := range db.Status.Extensions {
		r.Extensions = append(r.Extensions, e.Name+" "+e.Version)
	}
	if c := db.Status.Citus; c != nil {
		r.Citus = &CitusRow{Version: c.Version, Coordinator: c.Coordinator, Workers: append([]string{}, c.Workers...)}
	}
	return r
}

func tenantsText(r DatabaseRow) string {
	if r.MaxTenants == nil {
		return strconv.Itoa(int(r.Tenants))
	}
	return fmt.Sprintf("%d/%d", r.Tenants, *r.MaxTenants)
}

func bytesText(r DatabaseRow) string {
	used := orDash(r.BytesUsed)
	if r.MaxBytes == "" {
		return used
	}
	return used + "/" + r.MaxBytes
}

func citusText(c *CitusRow) string {
	if c == nil {
		return "-"
	}
	if !c.Coordinator {
		return c.Version + " (not the coordinator)"
	}
	return fmt.Sprintf("%s (%d workers)", c.Version, len(c.Workers))
}

func lastCheckText(t *metav1.Time, now time.Time) string {
	if t == nil {
		return "-"
	}
	return age(t.Time, now) + " ago"
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// databaseOf says where a runtime's tenant lives, for `status`: the
// MemoryDatabase it was placed on, "(placing)" while it waits for one, or
// the connection Secret it names.
func databaseOf(rt *memoryv1alpha1.MemoryRuntime) string {
	d := rt.Spec.Database
	switch {
	case rt.PlacedDatabase() != "":
		return rt.PlacedDatabase()
	case rt.UsesMemoryDatabase():
		return "(placing)"
	case d.ClusterConnection != "":
		return "connection/" + d.ClusterConnection
	case d.ConnectionSecretRef != nil:
		return "secret/" + d.ConnectionSecretRef.Name
	}
	return ""
}
