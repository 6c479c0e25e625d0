package crdschema

import (
	"bytes"
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
				if d, err := decodeJSON(child.Default.Raw); err == nil {
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

// decodeJSON decodes a JSON value as unstructured objects hold it: integers as int64,
// other numbers as float64.
func decodeJSON(data []byte) (interface{}, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v interface{}
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return numbers(v), nil
}

func numbers(v interface{}) interface{} {
	switch x := v.(type) {
	case map[string]interface{}:
		for k, c := range x {
			x[k] = numbers(c)
		}
	case []interface{}:
		for i, c := range x {
			x[i] = numbers(c)
		}
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	}
	return v
}
