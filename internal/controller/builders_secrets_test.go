package controller

import (
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/auth"
	"github.com/engram-dev/engram/internal/controller/specs"
	"github.com/engram-dev/engram/internal/memory"
)

func TestLoginCredentials(t *testing.T) {
	c, err := specs.LoginCredentials("postgres://admin:secret@db.example:6543/app?sslmode=require", "engram_team_a_bot", "pw")
	if err != nil {
		t.Fatal(err)
	}
	want := specs.Credentials{
		URI:  "postgres://engram_team_a_bot_app:pw@db.example:6543/app?sslmode=require",
		Host: "db.example", Port: "6543", DBName: "app", User: "engram_team_a_bot_app", Password: "pw", Schema: "engram_team_a_bot",
	}
	if c != want {
		t.Errorf("LoginCredentials =\n%+v\nwant\n%+v", c, want)
	}
	c, err = specs.LoginCredentials("postgres://admin@db/app", "s", "pw")
	if err != nil || c.Port != "5432" {
		t.Errorf("default port: %+v, %v", c, err)
	}
}

func TestCredentialsSecret(t *testing.T) {
	rt := testRuntime()
	creds := specs.Credentials{URI: "postgres://u:p@h:5432/d", Host: "h", Port: "5432", DBName: "d", User: "u", Password: "p", Schema: "s"}
	s := specs.CredentialsSecret(rt, creds)
	if s.Name != "bot-db" || s.Namespace != "team-a" || s.Type != corev1.SecretTypeOpaque {
		t.Errorf("metadata = %s/%s type %s", s.Namespace, s.Name, s.Type)
	}
	for _, k := range []string{"uri", "host", "port", "dbname", "user", "password", "schema"} {
		if len(s.Data[k]) == 0 {
			t.Errorf("key %q missing", k)
		}
	}
	assertOwned(t, s.ObjectMeta, "credentials")
	if pw, ok := specs.StoredPassword(s); !ok || pw != "p" {
		t.Errorf("StoredPassword of the operator's own Secret = %q, %v", pw, ok)
	}
	s.Data["password"] = []byte("edited")
	if _, ok := specs.StoredPassword(s); ok {
		t.Error("a hand-edited password was not detected")
	}
	if _, ok := specs.StoredPassword(nil); ok {
		t.Error("a missing Secret has a stored password")
	}
}

// TestAPITokenContent: a new Secret gets an admin token and a signing key
// the service loads; users' content is kept byte for byte and only what is
// missing is added (an old Secret of bare tokens gets a key, and nothing else).
func TestAPITokenContent(t *testing.T) {
	tokens, key, err := specs.APITokenContent(nil)
	if err != nil {
		t.Fatal(err)
	}
	set, skipped := auth.ParseTokens([]byte(tokens))
	keys, badKeys := auth.ParseSigningKeys([]byte(key))
	if set.Len() != 1 || len(skipped) != 0 || keys.Len() != 1 || len(badKeys) != 0 || !strings.HasSuffix(tokens, " role=admin name=admin\n") {
		t.Fatalf("initial content %q / %d keys", tokens, keys.Len())
	}
	if t2, k2, _ := specs.APITokenContent(nil); t2 == tokens || k2 == key {
		t.Fatal("two runtimes got the same token or key")
	}

	legacy := "engram_" + strings.Repeat("A", 43) + "\n"
	for _, tc := range []struct {
		name                   string
		live                   map[string][]byte
		keepTokens, keepKey    bool
		wantAdminAppendedAfter string
	}{
		{"user content is kept", map[string][]byte{"tokens": []byte(tokens), "signing-key": []byte(key)}, true, true, ""},
		{"an old Secret of bare tokens gets a key", map[string][]byte{"tokens": []byte(legacy)}, true, false, ""},
		{"only short tokens: an admin token is appended", map[string][]byte{"tokens": []byte("# old\nshort-token"), "signing-key": []byte(key)}, false, true, "# old\nshort-token\n"},
		{"a blank key is refilled", map[string][]byte{"tokens": []byte(legacy), "signing-key": []byte("\n")}, true, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gotTokens, gotKey, err := specs.APITokenContent(tc.live)
			if err != nil {
				t.Fatal(err)
			}
			if (gotTokens == string(tc.live["tokens"])) != tc.keepTokens || (gotKey == string(tc.live["signing-key"])) != tc.keepKey {
				t.Fatalf("tokens %q, key %q", gotTokens, gotKey)
			}
			if tc.wantAdminAppendedAfter != "" && (!strings.HasPrefix(gotTokens, tc.wantAdminAppendedAfter) || !specs.HasValidToken(gotTokens)) {
				t.Fatalf("tokens %q: the user's lines must stay first, then a valid admin token", gotTokens)
			}
			if k, _ := auth.ParseSigningKeys([]byte(gotKey)); k.Len() != 1 {
				t.Fatalf("key %q does not load", gotKey)
			}
		})
	}
	s := specs.APITokenSecret(testRuntime(), tokens, key)
	if s.Name != "bot-api-token" || string(s.Data["tokens"]) != tokens || string(s.Data["signing-key"]) != key {
		t.Errorf("token Secret = %s %q", s.Name, s.Data)
	}
}

// TestConfigMapRoundTrip: the ConfigMap's YAML is read back by the service
// exactly as the contract says (sigs.k8s.io/yaml, then ParseServiceConfigJSON).
func TestConfigMapRoundTrip(t *testing.T) {
	rt := testRuntime()
	rt.Spec.Embedding = memoryv1alpha1.EmbeddingSpec{Provider: "openai", Dimensions: 1536, Model: "text-embedding-3-small", Endpoint: "https://api.example/v1"}
	rt.Spec.LLM = &memoryv1alpha1.LLMSpec{Endpoint: "http://llm:8000/v1", Model: "qwen", Timeout: "90s"}
	cfg := specs.ServiceConfig(rt, "engram_team_a_bot", memory.DefaultPolicy(), "default", 3)
	if d, err := cfg.LLM.TimeoutDuration(); err != nil || d != 90*time.Second {
		t.Errorf("spec.llm.timeout 90s became %s (%v) in the service config", d, err)
	}
	b, err := specs.MarshalServiceConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cm := specs.ConfigMap(rt, b)
	if cm.Name != "bot-config" {
		t.Errorf("name = %s", cm.Name)
	}
	assertOwned(t, cm.ObjectMeta, "config")
	js, err := yaml.YAMLToJSON([]byte(cm.Data["config.yaml"]))
	if err != nil {
		t.Fatal(err)
	}
	back, err := memory.ParseServiceConfigJSON(js)
	if err != nil {
		t.Fatalf("the service would refuse the config: %v\n%s", err, cm.Data["config.yaml"])
	}
	if !reflect.DeepEqual(*back, cfg) {
		t.Errorf("round trip changed the config:\n%+v\nwant\n%+v", *back, cfg)
	}

	rt.Spec.Embedding = memoryv1alpha1.EmbeddingSpec{} // unset: builtin, 384
	cfg = specs.ServiceConfig(rt, "s", memory.DefaultPolicy(), "", 0)
	if cfg.Embedding.Provider != "builtin" || cfg.Embedding.Dimensions != 384 || cfg.LLM == nil {
		t.Errorf("embedding defaults = %+v", cfg.Embedding)
	}
	bad := cfg
	bad.Policy.Dedup.ArbitrationThreshold = 2
	if _, err := specs.MarshalServiceConfig(bad); err == nil {
		t.Error("an invalid config was rendered")
	}
}

// TestServiceConfigCarriesResponseByteCap: spec.service.limits.
// maxResponseBytes is rendered into the service's config, survives the
// ConfigMap round trip, and changes the pod template hash (a rollout).
func TestServiceConfigCarriesResponseByteCap(t *testing.T) {
	rt := testRuntime()
	plain, err := specs.MarshalServiceConfig(specs.ServiceConfig(rt, "s", memory.DefaultPolicy(), "", 0))
	if err != nil {
		t.Fatal(err)
	}
	rt.Spec.Service.Limits = &memoryv1alpha1.ServiceLimits{MaxResponseBytes: 256 << 10}
	capped, err := specs.MarshalServiceConfig(specs.ServiceConfig(rt, "s", memory.DefaultPolicy(), "", 0))
	if err != nil {
		t.Fatal(err)
	}
	js, err := yaml.YAMLToJSON(capped)
	if err != nil {
		t.Fatal(err)
	}
	back, err := memory.ParseServiceConfigJSON(js)
	if err != nil || back.MaxResponseBytes != 256<<10 {
		t.Fatalf("the config carries maxResponseBytes %v (%v):\n%s", back, err, capped)
	}
	if specs.PodTemplateHash(plain, "pw") == specs.PodTemplateHash(capped, "pw") {
		t.Error("a new byte cap leaves the pod template hash unchanged")
	}
	rt.Spec.Service.Limits.MaxResponseBytes = 1024
	if _, err := specs.MarshalServiceConfig(specs.ServiceConfig(rt, "s", memory.DefaultPolicy(), "", 0)); err == nil {
		t.Error("a byte cap below the minimum was rendered")
	}
}

func TestPodTemplateHash(t *testing.T) {
	base := specs.PodTemplateHash([]byte("a"), "pw1", "k1")
	for name, other := range map[string]string{
		"config":      specs.PodTemplateHash([]byte("b"), "pw1", "k1"),
		"credentials": specs.PodTemplateHash([]byte("a"), "pw2", "k1"),
		"api key":     specs.PodTemplateHash([]byte("a"), "pw1", "k2"),
		"no api key":  specs.PodTemplateHash([]byte("a"), "pw1"),
	} {
		if other == base {
			t.Errorf("a change of %s leaves the hash unchanged", name)
		}
	}
	if specs.PodTemplateHash([]byte("a"), "pw1", "k1") != base {
		t.Error("the hash is not deterministic")
	}
}
