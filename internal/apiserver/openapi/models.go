package openapi

import (
	"k8s.io/kube-openapi/pkg/validation/spec"

	"mizzen/internal/registry"
)

// Models returns every definition the documents of these resources carry, as the
// OpenAPI v3 document describes it for merging (types, formats, defaults, references
// under #/components/schemas/, and the x-kubernetes list, map, patch and
// group-version-kind extensions), keyed by definition name; descriptions and enums
// are left out. It is what server-side apply builds its type converter from. The map
// is built anew on each call, so callers build it once.
func Models(resources []*registry.Resource) (map[string]*spec.Schema, error) {
	b, err := newBuilder(resources)
	if err != nil {
		return nil, err
	}
	models := make(map[string]*spec.Schema, len(b.defs.byName))
	for name, def := range b.defs.byName {
		models[name] = def.toModel()
	}
	return models, nil
}

// toModel converts s without going through JSON, as toV3 renders it.
func (s *jsonSchema) toModel() *spec.Schema {
	out := &spec.Schema{}
	if s.refName != "" {
		out.Ref = spec.MustCreateRef("#/components/schemas/" + s.refName)
	}
	if s.Type != "" && len(s.oneOfTypes) == 0 {
		out.Type = spec.StringOrArray{s.Type}
	}
	out.Format = s.Format
	out.Default = s.zero
	if s.Items != nil {
		out.Items = &spec.SchemaOrArray{Schema: s.Items.toModel()}
	}
	if s.AdditionalProperties != nil {
		out.AdditionalProperties = &spec.SchemaOrBool{Allows: true, Schema: s.AdditionalProperties.toModel()}
	}
	if len(s.Properties) > 0 {
		out.Properties = make(map[string]spec.Schema, len(s.Properties))
		for name, p := range s.Properties {
			out.Properties[name] = *p.toModel()
		}
	}
	ext := spec.Extensions{}
	addString := func(key, value string) {
		if value != "" {
			ext[key] = value
		}
	}
	addString("x-kubernetes-list-type", s.ListType)
	addString("x-kubernetes-map-type", s.MapType)
	addString("x-kubernetes-patch-strategy", s.PatchStrategy)
	addString("x-kubernetes-patch-merge-key", s.PatchMergeKey)
	if len(s.ListMapKeys) > 0 {
		keys := make([]interface{}, len(s.ListMapKeys))
		for i, k := range s.ListMapKeys {
			keys[i] = k
		}
		ext["x-kubernetes-list-map-keys"] = keys
	}
	if len(s.GroupVersionKinds) > 0 {
		gvks := make([]interface{}, len(s.GroupVersionKinds))
		for i, k := range s.GroupVersionKinds {
			gvks[i] = map[string]interface{}{"group": k.Group, "version": k.Version, "kind": k.Kind}
		}
		ext["x-kubernetes-group-version-kind"] = gvks
	}
	if len(ext) > 0 {
		out.Extensions = ext
	}
	return out
}
