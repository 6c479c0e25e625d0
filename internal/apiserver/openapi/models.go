package openapi

import (
	"encoding/json"
	"fmt"

	"k8s.io/kube-openapi/pkg/validation/spec"

	"mizzen/internal/registry"
)

// Models returns every definition the documents of these resources carry, in their
// OpenAPI v3 form (defaults included, references under #/components/schemas/), keyed
// by definition name. It is what server-side apply builds its type converter from;
// the map is built anew on each call and is large, so callers build it once.
func Models(resources []*registry.Resource) (map[string]*spec.Schema, error) {
	b, err := newBuilder(resources)
	if err != nil {
		return nil, err
	}
	models := make(map[string]*spec.Schema, len(b.defs.byName))
	for name := range b.defs.byName {
		raw, err := b.v3Definition(name)
		if err != nil {
			return nil, fmt.Errorf("openapi: marshal %s: %w", name, err)
		}
		s := &spec.Schema{}
		if err := json.Unmarshal(raw, s); err != nil {
			return nil, fmt.Errorf("openapi: %s does not parse as a schema: %w", name, err)
		}
		models[name] = s
	}
	return models, nil
}
