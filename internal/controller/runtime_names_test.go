package controller

import (
	"testing"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/naming"
	"github.com/engram-dev/engram/internal/tenant"
)

func TestSchemaForAndEndpoint(t *testing.T) {
	rt := &memoryv1alpha1.MemoryRuntime{}
	rt.Namespace, rt.Name = "team-a", "support-bot"
	if got := SchemaFor(rt); got != "engram_team_a_support_bot_6daa5987" {
		t.Errorf("SchemaFor = %q", got)
	}
	rt.Spec.Database.Schema = "custom"
	if got := SchemaFor(rt); got != "custom" {
		t.Errorf("SchemaFor with spec.database.schema = %q", got)
	}
	rt.Spec.Service.Port = 9090
	if got := Endpoint(rt); got != "http://support-bot.team-a.svc:9090" {
		t.Errorf("Endpoint = %q", got)
	}
}

// TestSchemaForAndClaim: a runtime keeps the schema its status records
// (upgrades from the non-injective names), the legacy claim holds only for
// that recorded schema, and the adopt annotation is passed through as is
// (internal/tenant decides whether it matches the marker).
func TestSchemaForAndClaim(t *testing.T) {
	rt := &memoryv1alpha1.MemoryRuntime{}
	rt.Namespace, rt.Name, rt.UID = "team", "a-bot", "uid-1"
	fresh := SchemaFor(rt)
	if fresh != tenant.SchemaName("team", "a-bot") || fresh == tenant.LegacySchemaName("team", "a-bot") {
		t.Fatalf("SchemaFor(new runtime) = %q", fresh)
	}
	if c := TenantClaim(rt, "", fresh); c.LegacySchema || c.AdoptFromUID != "" {
		t.Errorf("a new runtime claims %+v", c)
	}
	rt.Status.Schema = tenant.LegacySchemaName("team", "a-bot")
	if got := SchemaFor(rt); got != rt.Status.Schema {
		t.Errorf("SchemaFor(upgraded runtime) = %q, want its recorded %q", got, rt.Status.Schema)
	}
	if c := TenantClaim(rt, rt.Status.Schema, rt.Status.Schema); !c.LegacySchema {
		t.Error("the recorded schema is not claimed as legacy")
	}
	if c := TenantClaim(rt, rt.Status.Schema, "engram_other"); c.LegacySchema {
		t.Error("a schema other than the recorded one is claimed as legacy")
	}
	rt.Spec.Database.Schema = "engram_explicit"
	if got := SchemaFor(rt); got != "engram_explicit" {
		t.Errorf("SchemaFor with spec.database.schema = %q", got)
	}
	rt.Annotations = map[string]string{naming.AnnotationAdoptFromUID: "uid-0"}
	if c := TenantClaim(rt, "", "engram_explicit"); c.AdoptFromUID != "uid-0" {
		t.Errorf("adopt annotation not passed: %+v", c)
	}
	if o := TenantOwner(rt); o.UID != "uid-1" || o.Runtime() != "team/a-bot" {
		t.Errorf("TenantOwner = %+v", o)
	}
}
