package crdschema

import (
	"encoding/json"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// Default fills in the defaults of the schema that obj lacks, in place, as upstream
// does on write and on every read from storage: a property with a default that is
// absent, or null where null is not allowed, gets the default; a null that is neither
// allowed nor defaulted is dropped.
func Default(obj map[string]interface{}, s *apiextv1.JSONSchemaProps) {
	if s == nil {
		return
	}
	defaultValue(obj, s)
}

func defaultValue(v interface{}, s *apiextv1.JSONSchemaProps) {
	switch x := v.(type) {
	case map[string]interface{}:
		for k, child := range s.Properties {
			child := child
			cur, present := x[k]
			if present && cur == nil && !child.Nullable {
				if child.Default == nil {
					delete(x, k)
					continue
				}
				present = false
			}
			if !present && child.Default != nil {
				var d interface{}
				if err := json.Unmarshal(child.Default.Raw, &d); err == nil {
					x[k] = d
				}
			}
		}
		for k, val := range x {
			if child, ok := s.Properties[k]; ok {
				defaultValue(val, &child)
			} else if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
				defaultValue(val, s.AdditionalProperties.Schema)
			}
		}
	case []interface{}:
		if s.Items == nil || s.Items.Schema == nil {
			return
		}
		for _, item := range x {
			defaultValue(item, s.Items.Schema)
		}
	}
}
