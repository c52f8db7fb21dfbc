package server

import (
	_ "embed"
	"net/http"

	"sigs.k8s.io/yaml"
)

// openapi.yaml is the OpenAPI 3.1 document of the API, written by hand
// (it is the contract; the code follows it) and served as JSON.
// TestOpenAPIMatchesRoutes fails when it and the route table differ, and
// every test response is validated against its schemas.
//
//go:embed openapi.yaml
var openAPIYAML []byte

// OpenAPIJSON is the document served at /openapi.json.
var OpenAPIJSON = mustOpenAPIJSON()

func mustOpenAPIJSON() []byte {
	js, err := yaml.YAMLToJSON(openAPIYAML)
	if err != nil {
		panic("internal/server/openapi.yaml is not valid YAML: " + err.Error())
	}
	return js
}

func (s *Server) openAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age=300")
	_, _ = w.Write(OpenAPIJSON)
}
