package crdschema

import (
	"strings"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ValidateEmbedded checks the objects x-kubernetes-embedded-resource marks inside obj
// as upstream does: apiVersion and kind set, and metadata that is valid object
// metadata.
func ValidateEmbedded(obj map[string]interface{}, s *apiextv1.JSONSchemaProps) field.ErrorList {
	var errs field.ErrorList
	var walk func(v interface{}, s *apiextv1.JSONSchemaProps, p *field.Path)
	walk = func(v interface{}, s *apiextv1.JSONSchemaProps, p *field.Path) {
		if s == nil {
			return
		}
		switch x := v.(type) {
		case map[string]interface{}:
			if s.XEmbeddedResource && p != nil {
				errs = append(errs, embeddedMeta(x, p)...)
			}
			for k, c := range x {
				if cs, ok := s.Properties[k]; ok {
					walk(c, &cs, p.Child(k))
				} else if s.AdditionalProperties != nil {
					walk(c, s.AdditionalProperties.Schema, p.Child(k))
				}
			}
		case []interface{}:
			if s.Items != nil {
				for i, item := range x {
					walk(item, s.Items.Schema, p.Index(i))
				}
			}
		}
	}
	walk(obj, s, nil)
	return errs
}

func embeddedMeta(x map[string]interface{}, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	apiVersion, _ := x["apiVersion"].(string)
	kind, _ := x["kind"].(string)
	if kind == "" {
		errs = append(errs, field.Required(p.Child("kind"), "must not be empty"))
	}
	if apiVersion == "" {
		errs = append(errs, field.Required(p.Child("apiVersion"), "must not be empty"))
	} else if gv, err := schema.ParseGroupVersion(apiVersion); err != nil || (gv.Group != "" && strings.Count(apiVersion, "/") != 1) {
		errs = append(errs, field.Invalid(p.Child("apiVersion"), apiVersion, "must be a valid group/version"))
	}
	if md, ok := x["metadata"].(map[string]interface{}); ok {
		var meta metav1.ObjectMeta
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(md, &meta); err != nil {
			errs = append(errs, field.Invalid(p.Child("metadata"), md, err.Error()))
		} else {
			// Embedded objects are often templates: their name may be empty.
			mp := p.Child("metadata")
			if meta.Name != "" {
				for _, msg := range validation.NameIsDNSSubdomain(meta.Name, false) {
					errs = append(errs, field.Invalid(mp.Child("name"), meta.Name, msg))
				}
			}
			errs = append(errs, metav1validation.ValidateLabels(meta.Labels, mp.Child("labels"))...)
			errs = append(errs, validation.ValidateAnnotations(meta.Annotations, mp.Child("annotations"))...)
		}
	}
	return errs
}
