package workload

import (
	"fmt"
	"os"

	"sigs.k8s.io/yaml"

	"github.com/engram-dev/engram/internal/memory"
)

// LoadServiceConfig reads the YAML (or JSON) service config at path, as the
// operator writes it into the <runtime>-config ConfigMap. Unknown fields are
// errors, so a typo fails the start instead of being silently ignored.
func LoadServiceConfig(path string) (*memory.ServiceConfig, error) {
	if path == "" {
		return nil, fmt.Errorf("no config file given (--config)")
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading config file: %w", err)
	}
	return ParseServiceConfigYAML(raw)
}

// ParseServiceConfigYAML converts YAML to JSON and hands it to
// memory.ParseServiceConfigJSON, which decodes strictly and validates.
func ParseServiceConfigYAML(raw []byte) (*memory.ServiceConfig, error) {
	js, err := yaml.YAMLToJSON(raw)
	if err != nil {
		return nil, fmt.Errorf("parsing config YAML: %w", err)
	}
	cfg, err := memory.ParseServiceConfigJSON(js)
	if err != nil {
		return nil, err
	}
	return cfg, nil
}

// WriteServiceConfig writes cfg to path as YAML, the way the operator's
// <runtime>-config ConfigMap holds it: tests and the benchmark start
// `manager serve` and `manager job` with such a file.
func WriteServiceConfig(path string, cfg memory.ServiceConfig) error {
	raw, err := yaml.Marshal(cfg)
	if err != nil {
		return fmt.Errorf("encoding the service config: %w", err)
	}
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		return fmt.Errorf("writing the service config: %w", err)
	}
	return nil
}
