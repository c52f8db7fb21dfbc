package demo

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/memory"
	"github.com/engram-dev/engram/internal/tenant"
)

// Names of the demo's second database server, a Citus cluster.
const (
	// CitusSecret is the Citus coordinator's admin Secret in the operator namespace.
	CitusSecret = "citus-admin"
	// PlainDatabase and CitusDatabase are the MemoryDatabases the demo
	// registers: the demo's PostgreSQL and the Citus coordinator.
	PlainDatabase = "postgres"
	CitusDatabase = "citus"
	// CitusRuntime is the demo's second tenant, which names CitusDatabase.
	CitusRuntime = "research-bot"
)

// databasesManifest is what a platform team applies to offer both servers
// (their admin Secrets exist already), and the second team's runtime that
// asks for the Citus one. The samples' support-bot keeps its
// clusterConnection (the simple case).
const databasesManifest = `apiVersion: memory.engram.dev/v1alpha1
kind: MemoryDatabase
metadata:
  name: ` + PlainDatabase + `
  labels:
    tier: demo
spec:
  secretRef:
    name: postgres-admin
  allowedNamespaces: {}   # every namespace
  capacity:
    maxTenants: 100
---
apiVersion: memory.engram.dev/v1alpha1
kind: MemoryDatabase
metadata:
  name: ` + CitusDatabase + `
  labels:
    tier: demo
spec:
  secretRef:
    name: ` + CitusSecret + `
  allowedNamespaces: {}
  capacity:
    maxTenants: 1000
---
apiVersion: memory.engram.dev/v1alpha1
kind: MemoryRuntime
metadata:
  name: ` + CitusRuntime + `
spec:
  database:
    databaseRef:
      name: ` + CitusDatabase + `
  policyRef:
    name: standard
  embedding:
    provider: builtin
    dimensions: 384
  service:
    replicas: 1
  reclaimPolicy: Retain
`

// CitusReport is what the demo showed of its tenant on Citus.
type CitusReport struct {
	Runtime       string
	Schema        string
	Owner         tenant.Owner
	Database      string   // status.database.name
	Worker        string   // status.citusWorker
	Workers       []string // of the MemoryDatabase's status
	Version       string   // of Citus
	LocalEndpoint string
	Token         string
	Added         string // the action of its write
	SearchTop     string
}

// applyDatabases server-side applies databasesManifest (the runtime into
// the scenario's namespace).
func (s *Scenario) applyDatabases(ctx context.Context, r *Report) error {
	objs, err := decodeManifest(databasesManifest)
	if err != nil {
		return err
	}
	for _, obj := range objs {
		where := "cluster-scoped"
		if obj.GetKind() == "MemoryRuntime" {
			obj.SetNamespace(s.Namespace)
			where = "namespace " + s.Namespace
		}
		if err := s.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
		applied := obj.GetKind() + "/" + obj.GetName()
		r.Applied = append(r.Applied, applied)
		s.printf("   applied %s (%s)\n", applied, where)
	}
	s.printf("   %s names MemoryDatabase %s; support-bot keeps its clusterConnection\n", CitusRuntime, CitusDatabase)
	return nil
}

// citusTenant shows where the second tenant lives (the MemoryDatabase, its
// schema, the Citus worker holding it) and uses its service once, through
// the coordinator.
func (s *Scenario) citusTenant(ctx context.Context, r *Report) error {
	c := &CitusReport{Runtime: CitusRuntime}
	r.Citus = c
	var rt memoryv1alpha1.MemoryRuntime
	if err := s.Client.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: CitusRuntime}, &rt); err != nil {
		return err
	}
	var db memoryv1alpha1.MemoryDatabase
	if err := s.Client.Get(ctx, types.NamespacedName{Name: CitusDatabase}, &db); err != nil {
		return err
	}
	c.Schema, c.Database, c.Worker = rt.Status.Schema, rt.PlacedDatabase(), rt.Status.CitusWorker
	c.Owner = tenant.Owner{UID: string(rt.UID), Namespace: rt.Namespace, Name: rt.Name}
	if cs := db.Status.Citus; cs != nil {
		c.Workers, c.Version = cs.Workers, cs.Version
	}
	s.printf("   memoryruntime/%s: MemoryDatabase %s (Citus %s, workers %s)\n", CitusRuntime, c.Database, c.Version, strings.Join(c.Workers, ", "))
	s.printf("   schema %s is a distributed schema on worker %s (status.citusWorker)\n", c.Schema, c.Worker)
	if c.Worker == "" {
		return fmt.Errorf("%s has no status.citusWorker: is MemoryDatabase %s a Citus coordinator? (status %+v)", CitusRuntime, CitusDatabase, db.Status)
	}
	tr := &Report{Runtime: CitusRuntime}
	api, err := s.api(ctx, tr)
	if err != nil {
		return err
	}
	c.LocalEndpoint, c.Token = tr.LocalEndpoint, tr.Token
	// Start from a clean slate so a second run tells the same story.
	if err := api.Do(ctx, http.MethodDelete, "/v1/owners/carol", nil, nil); err != nil {
		return err
	}
	var added memory.AddResult
	body := map[string]any{"content": "Carol reviews the quarterly research reports on Fridays", "category": "project"}
	if err := api.Do(ctx, http.MethodPost, "/v1/owners/carol/memories", body, &added); err != nil {
		return err
	}
	c.Added = string(added.Action)
	var res struct {
		Results []memory.SearchHit `json:"results"`
	}
	if err := api.Do(ctx, http.MethodPost, "/v1/owners/carol/search", map[string]any{"query": "when does carol review reports", "topK": 1}, &res); err != nil {
		return err
	}
	if len(res.Results) > 0 {
		c.SearchTop = res.Results[0].Memory.Content
	}
	s.printf("   service %s: carol %s %q; search \"when does carol review reports\" -> %q\n",
		c.LocalEndpoint, strings.ToUpper(c.Added), body["content"], c.SearchTop)
	return nil
}
