package controller

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"text/template"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
)

// fleetObjects are the names in fleetManifest: a plain PostgreSQL and a
// Citus coordinator offered under one label, and runtimes selecting it.
type fleetObjects struct {
	Suffix, Tier, Namespace string
	// PlainDatabase is the database of the plain server (CloudNativePG's
	// superuser Secret says "*": any).
	PlainDatabase string
	Runtimes      []string
}

func (f fleetObjects) plainName() string { return "plain-" + f.Suffix }
func (f fleetObjects) citusName() string { return "citus-" + f.Suffix }

// fleetTemplate is the manifest a platform team would write and
// `kubectl apply --server-side -f` in one go: the two databases (whose
// admin Secrets exist already) and the runtimes, one document each.
var fleetTemplate = template.Must(template.New("fleet").Parse(`# A plain PostgreSQL run by CloudNativePG: its superuser Secret as it is.
apiVersion: memory.engram.dev/v1alpha1
kind: MemoryDatabase
metadata:
  name: plain-{{.Suffix}}
  labels:
    tier: {{.Tier}}
spec:
  secretRef:
    name: pg-a-superuser-{{.Suffix}}
  databaseName: {{.PlainDatabase}}
  allowedNamespaces:
    matchLabels:
      kubernetes.io/metadata.name: {{.Namespace}}
  capacity:
    maxTenants: 6
---
# A Citus coordinator with two workers: each tenant a distributed schema.
apiVersion: memory.engram.dev/v1alpha1
kind: MemoryDatabase
metadata:
  name: citus-{{.Suffix}}
  labels:
    tier: {{.Tier}}
spec:
  secretRef:
    name: pg-b-{{.Suffix}}
  allowedNamespaces:
    matchLabels:
      kubernetes.io/metadata.name: {{.Namespace}}
  capacity:
    maxTenants: 4
{{- range .Runtimes}}
---
apiVersion: memory.engram.dev/v1alpha1
kind: MemoryRuntime
metadata:
  name: {{.}}
  namespace: {{$.Namespace}}
spec:
  database:
    databaseSelector:
      matchLabels:
        tier: {{$.Tier}}
  reclaimPolicy: Delete
{{- end}}
`))

func (f fleetObjects) manifest(t *testing.T) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := fleetTemplate.Execute(&b, f); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// kubectlApply decodes a multi-document YAML manifest and applies each
// object server-side with kubectl's field manager, as
// `kubectl apply --server-side -f` does. The documents go out at once (the
// API server and the operator see them concurrently, as they would from
// several clients or a GitOps controller).
func (e *operatorEnv) kubectlApply(t *testing.T, manifest []byte) {
	t.Helper()
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifest), 4096)
	for {
		u := &unstructured.Unstructured{}
		err := dec.Decode(&u.Object)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("decoding the manifest: %v", err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
	var wg sync.WaitGroup
	for _, u := range objs {
		wg.Go(func() {
			if err := e.c.Apply(testContext(t), client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("kubectl")); err != nil {
				t.Errorf("applying %s %s: %v", u.GetKind(), u.GetName(), err)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
}

// checkWideTable reads `kubectl get memoryruntimes -o wide` of ns as the
// API server serves it (the CRD's printer columns) and checks that every
// runtime placed in where (database -> runtimes) shows its database, and
// the Citus worker when its database is citusDB.
func (e *operatorEnv) checkWideTable(t *testing.T, ns string, where map[string][]string, citusDB string) {
	t.Helper()
	table := e.serverTable(t, "/apis/memory.engram.dev/v1alpha1/namespaces/"+ns+"/memoryruntimes")
	col, rows := tableByName(t, table, "memoryruntimes", []string{"Name", "Database", "Citus-Worker"})
	for db, names := range where {
		for _, name := range names {
			cells, ok := rows[name]
			if !ok {
				t.Errorf("no row for %s", name)
				continue
			}
			worker := fmt.Sprint(cells[col["Citus-Worker"]])
			if got := fmt.Sprint(cells[col["Database"]]); got != db {
				t.Errorf("%s: column Database %q, want %q", name, got, db)
			}
			if onCitus := db == citusDB; onCitus != strings.Contains(worker, ":") {
				t.Errorf("%s on %s: column Citus-Worker %q", name, db, worker)
			}
		}
	}
}

// tableByName indexes a table as `kubectl get <resource> -o wide` shows
// it: the position of each column, and each row's cells by its Name; a
// column of names missing fails the test.
func tableByName(t *testing.T, table *metav1.Table, resource string, names []string) (map[string]int, map[string][]any) {
	t.Helper()
	col := map[string]int{}
	for i, c := range table.ColumnDefinitions {
		col[c.Name] = i
	}
	for _, name := range names {
		if _, ok := col[name]; !ok {
			t.Fatalf("kubectl get %s -o wide has no %s column: %v", resource, name, table.ColumnDefinitions)
		}
	}
	rows := map[string][]any{}
	for _, r := range table.Rows {
		rows[fmt.Sprint(r.Cells[col["Name"]])] = r.Cells
	}
	return col, rows
}

// checkDatabaseTable reads `kubectl get memorydatabases -o wide` as the API
// server serves it (the CRD's printer columns) and checks each database of
// tenants (name -> tenants placed) at a glance: reachable, its tenants and
// capacity, the bytes used, not cordoned, the server version, and the Citus
// version on citusDB only; every cell as the object's own fields say.
func (e *operatorEnv) checkDatabaseTable(t *testing.T, tenants map[string]int, citusDB string) {
	t.Helper()
	table := e.serverTable(t, "/apis/memory.engram.dev/v1alpha1/memorydatabases")
	names := []string{"Name", "Reachable", "Reason", "Tenants", "Max-Tenants", "Used", "Max-Bytes", "Cordoned", "Version", "Citus", "Age"}
	col, rows := tableByName(t, table, "memorydatabases", names)
	for name, n := range tenants {
		cells, ok := rows[name]
		if !ok {
			t.Errorf("kubectl get memorydatabases: no row for %s", name)
			continue
		}
		cell := func(c string) string { return fmt.Sprint(cells[col[c]]) }
		var db memoryv1alpha1.MemoryDatabase
		if err := e.get(t, "", name, &db); err != nil {
			t.Fatal(err)
		}
		citus := ""
		if db.Status.Citus != nil {
			citus = db.Status.Citus.Version
		}
		if (name == citusDB) != (citus != "") {
			t.Errorf("%s: status.citus.version %q (Citus database: %s)", name, citus, citusDB)
		}
		want := map[string]string{
			"Reachable": "True", "Reason": memoryv1alpha1.ReasonConnected, "Tenants": fmt.Sprint(n),
			"Max-Tenants": fmt.Sprint(*db.Spec.Capacity.MaxTenants), "Version": db.Status.ServerVersion, "Citus": citus,
		}
		if citus == "" {
			want["Citus"] = "<nil>" // an absent field: a null cell
		}
		for c, w := range want {
			if got := cell(c); got != w || w == "" {
				t.Errorf("kubectl get memorydatabases, %s: column %s %q, want %q", name, c, got, w)
			}
		}
		// The check rewrites bytesUsed now and then: a size, not a value.
		if q, err := resource.ParseQuantity(cell("Used")); err != nil || q.Sign() <= 0 {
			t.Errorf("kubectl get memorydatabases, %s: column Used %q (%v), want a size", name, cell("Used"), err)
		}
		if got := cell("Cordoned"); got == "true" {
			t.Errorf("kubectl get memorydatabases, %s: column Cordoned %q, want not cordoned", name, got)
		}
	}
}

// serverTable GETs path as a server-side table (what kubectl get prints),
// with every column (priority > 0 too: -o wide).
func (e *operatorEnv) serverTable(t *testing.T, path string) *metav1.Table {
	t.Helper()
	cfg := e.mgr.GetConfig()
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(testContext(t), http.MethodGet, strings.TrimRight(cfg.Host, "/")+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s as a table: %s", path, resp.Status)
	}
	var table metav1.Table
	if err := json.NewDecoder(resp.Body).Decode(&table); err != nil {
		t.Fatal(err)
	}
	return &table
}
