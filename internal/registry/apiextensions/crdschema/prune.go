package crdschema

import (
	"sort"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// Prune removes from obj (a whole custom resource) every field its schema does not
// specify, unless x-kubernetes-preserve-unknown-fields keeps it, and returns the paths
// it removed ("spec.foo", "spec.items[0].bar") for fieldValidation to report. The
// object's apiVersion, kind and metadata stay, as they do for embedded resources.
func Prune(obj map[string]interface{}, s *apiextv1.JSONSchemaProps) []string {
	if s == nil {
		return nil
	}
	var pruned []string
	pruneObject(obj, s, "", true, &pruned)
	sort.Strings(pruned)
	return pruned
}

func preserves(s *apiextv1.JSONSchemaProps) bool {
	return s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields
}

func pruneValue(v interface{}, s *apiextv1.JSONSchemaProps, path string, pruned *[]string) {
	if s == nil {
		return
	}
	switch x := v.(type) {
	case map[string]interface{}:
		pruneObject(x, s, path, s.XEmbeddedResource, pruned)
	case []interface{}:
		if s.Items == nil || s.Items.Schema == nil {
			return
		}
		for i, item := range x {
			pruneValue(item, s.Items.Schema, indexPath(path, i), pruned)
		}
	}
}

func pruneObject(obj map[string]interface{}, s *apiextv1.JSONSchemaProps, path string, resource bool, pruned *[]string) {
	for k, v := range obj {
		if resource && (k == "apiVersion" || k == "kind" || k == "metadata") {
			if k == "metadata" {
				if child, ok := s.Properties[k]; ok && path != "" {
					pruneValue(v, &child, join(path, k), pruned)
				}
			}
			continue
		}
		if child, ok := s.Properties[k]; ok {
			pruneValue(v, &child, join(path, k), pruned)
			continue
		}
		if ap := s.AdditionalProperties; ap != nil {
			if ap.Schema != nil {
				pruneValue(v, ap.Schema, join(path, k), pruned)
				continue
			}
			if ap.Allows {
				continue
			}
		}
		if preserves(s) {
			continue
		}
		delete(obj, k)
		*pruned = append(*pruned, join(path, k))
	}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func indexPath(path string, i int) string {
	return path + "[" + itoa(i) + "]"
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b [20]byte
	n := len(b)
	for i > 0 {
		n--
		b[n] = byte('0' + i%10)
		i /= 10
	}
	return string(b[n:])
}
