// Package crdschema holds what a CustomResourceDefinition's OpenAPI v3 schema does to
// custom resources, as upstream's apiextensions-apiserver does it: the check that a
// schema is structural (with upstream's messages), value validation (kube-openapi's
// validator, its errors turned into field errors as upstream words them), pruning of
// unknown fields, and defaulting.
//
// Every function works on the apiextensions/v1 JSONSchemaProps the CRD carries and on
// custom resources as decoded JSON (map[string]interface{}), so the package needs
// neither the apiserver nor a typed scheme.
package crdschema

import (
	"fmt"
	"regexp"
	"sort"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

type level int

const (
	rootLevel level = iota
	itemLevel
	fieldLevel
)

// ValidateStructural reports why s is not a structural schema, with upstream's paths
// and messages (sorted, as upstream sorts them). The structural part of a schema is
// everything outside allOf, anyOf, oneOf and not; those may only restrict values.
func ValidateStructural(fldPath *field.Path, s *apiextv1.JSONSchemaProps) field.ErrorList {
	errs := structuralInvariants(s, rootLevel, fldPath)
	errs = append(errs, completeness(s, fldPath)...)
	sort.Slice(errs, func(i, j int) bool { return errs[i].Error() < errs[j].Error() })
	return errs
}

func structuralInvariants(s *apiextv1.JSONSchemaProps, lvl level, fldPath *field.Path) field.ErrorList {
	if s == nil {
		return nil
	}
	var errs field.ErrorList
	if s.Type == "array" && (s.Items == nil || s.Items.Schema == nil) {
		if s.Items != nil && len(s.Items.JSONSchemas) > 0 {
			errs = append(errs, field.Forbidden(fldPath.Child("items"), "items must be a schema object and not an array"))
		} else {
			errs = append(errs, field.Required(fldPath.Child("items"), "must be specified"))
		}
	}
	if s.Items != nil && s.Items.Schema != nil {
		errs = append(errs, structuralInvariants(s.Items.Schema, itemLevel, fldPath.Child("items"))...)
	}
	for _, k := range sortedKeys(s.Properties) {
		v := s.Properties[k]
		errs = append(errs, structuralInvariants(&v, fieldLevel, fldPath.Child("properties").Key(k))...)
	}
	if s.AdditionalProperties != nil {
		if lvl == rootLevel {
			errs = append(errs, field.Forbidden(fldPath.Child("additionalProperties"), "must not be used at the root"))
		}
		if s.AdditionalProperties.Schema != nil {
			errs = append(errs, structuralInvariants(s.AdditionalProperties.Schema, fieldLevel, fldPath.Child("additionalProperties"))...)
		}
		if len(s.Properties) > 0 && (s.AdditionalProperties.Schema != nil || s.AdditionalProperties.Allows) {
			errs = append(errs, field.Forbidden(fldPath.Child("additionalProperties"), "additionalProperties and properties are mutual exclusive"))
		}
	}
	if s.Type == "null" {
		errs = append(errs, field.Forbidden(fldPath.Child("type"), "type cannot be set to null, use nullable as an alternative"))
	} else if s.Type != "" && !validTypes[s.Type] {
		errs = append(errs, field.NotSupported(fldPath.Child("type"), s.Type, []string{"array", "boolean", "integer", "number", "object", "string"}))
	}
	if s.Ref != nil {
		errs = append(errs, field.Forbidden(fldPath.Child("$ref"), "$ref is not supported"))
	}
	if s.XIntOrString {
		if s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields {
			errs = append(errs, field.Invalid(fldPath.Child("x-kubernetes-preserve-unknown-fields"), *s.XPreserveUnknownFields, "must be false if x-kubernetes-int-or-string is true"))
		}
		if s.XEmbeddedResource {
			errs = append(errs, field.Invalid(fldPath.Child("x-kubernetes-embedded-resource"), s.XEmbeddedResource, "must be false if x-kubernetes-int-or-string is true"))
		}
	}
	if s.XPreserveUnknownFields != nil && !*s.XPreserveUnknownFields {
		errs = append(errs, field.Invalid(fldPath.Child("x-kubernetes-preserve-unknown-fields"), *s.XPreserveUnknownFields, "must be true or undefined"))
	}
	skipAnyOf := isIntOrStringAnyOf(s)
	skipFirstAllOfAnyOf := isIntOrStringAllOf(s)
	errs = append(errs, valueValidation(s, skipAnyOf, skipFirstAllOfAnyOf, fldPath)...)

	checkMetadata := lvl == rootLevel || s.XEmbeddedResource
	preserve := s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields
	switch {
	case s.XEmbeddedResource && s.Type != "object":
		if s.Type == "" {
			errs = append(errs, field.Required(fldPath.Child("type"), "must be object if x-kubernetes-embedded-resource is true"))
		} else {
			errs = append(errs, field.Invalid(fldPath.Child("type"), s.Type, "must be object if x-kubernetes-embedded-resource is true"))
		}
	case s.Type == "" && !s.XIntOrString && !preserve:
		switch lvl {
		case rootLevel:
			errs = append(errs, field.Required(fldPath.Child("type"), "must not be empty at the root"))
		case itemLevel:
			errs = append(errs, field.Required(fldPath.Child("type"), "must not be empty for specified array items"))
		default:
			errs = append(errs, field.Required(fldPath.Child("type"), "must not be empty for specified object fields"))
		}
	}
	if s.XEmbeddedResource && s.AdditionalProperties != nil {
		errs = append(errs, field.Forbidden(fldPath.Child("additionalProperties"), "must not be used if x-kubernetes-embedded-resource is set"))
	}
	if lvl == rootLevel && s.Type != "" && s.Type != "object" {
		errs = append(errs, field.Invalid(fldPath.Child("type"), s.Type, "must be object at the root"))
	}
	if kind, ok := s.Properties["kind"]; ok && checkMetadata && kind.Type != "string" {
		errs = append(errs, field.Invalid(fldPath.Child("properties").Key("kind").Child("type"), kind.Type, "must be string"))
	}
	if av, ok := s.Properties["apiVersion"]; ok && checkMetadata && av.Type != "string" {
		errs = append(errs, field.Invalid(fldPath.Child("properties").Key("apiVersion").Child("type"), av.Type, "must be string"))
	}
	if md, ok := s.Properties["metadata"]; ok {
		mdPath := fldPath.Child("properties").Key("metadata")
		if checkMetadata && md.Type != "object" {
			if md.Type == "" {
				errs = append(errs, field.Required(mdPath.Child("type"), "must be object"))
			} else {
				errs = append(errs, field.Invalid(mdPath.Child("type"), md.Type, "must be object"))
			}
		}
		if lvl == rootLevel {
			for k := range md.Properties {
				if k != "name" && k != "generateName" {
					errs = append(errs, field.Forbidden(mdPath, "must not specify anything other than name and generateName, but metadata is implicitly specified"))
					break
				}
			}
		}
	}
	if s.XEmbeddedResource && !preserve && len(s.Properties) == 0 {
		errs = append(errs, field.Required(fldPath.Child("properties"), "must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields"))
	}
	return errs
}

var validTypes = map[string]bool{"array": true, "boolean": true, "integer": true, "number": true, "object": true, "string": true}

// isIntOrStringAnyOf: anyOf [{type: integer}, {type: string}], the first shape
// x-kubernetes-int-or-string may take.
func isIntOrStringAnyOf(s *apiextv1.JSONSchemaProps) bool {
	if !s.XIntOrString || len(s.AnyOf) != 2 {
		return false
	}
	return s.AnyOf[0].Type == "integer" && s.AnyOf[1].Type == "string"
}

// isIntOrStringAllOf: allOf [{anyOf: [integer, string]}, ...], the second shape.
func isIntOrStringAllOf(s *apiextv1.JSONSchemaProps) bool {
	if !s.XIntOrString || len(s.AllOf) == 0 || len(s.AllOf[0].AnyOf) != 2 {
		return false
	}
	return s.AllOf[0].AnyOf[0].Type == "integer" && s.AllOf[0].AnyOf[1].Type == "string"
}

func valueValidation(s *apiextv1.JSONSchemaProps, skipAnyOf, skipFirstAllOfAnyOf bool, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if !skipAnyOf {
		for i := range s.AnyOf {
			errs = append(errs, nested(&s.AnyOf[i], false, false, fldPath.Child("anyOf").Index(i))...)
		}
	}
	for i := range s.AllOf {
		errs = append(errs, nested(&s.AllOf[i], skipFirstAllOfAnyOf && i == 0, false, fldPath.Child("allOf").Index(i))...)
	}
	for i := range s.OneOf {
		errs = append(errs, nested(&s.OneOf[i], false, false, fldPath.Child("oneOf").Index(i))...)
	}
	if s.Not != nil {
		errs = append(errs, nested(s.Not, false, false, fldPath.Child("not"))...)
	}
	if s.Pattern != "" {
		if _, err := regexp.Compile(s.Pattern); err != nil {
			errs = append(errs, field.Invalid(fldPath.Child("pattern"), s.Pattern, fmt.Sprintf("must be a valid regular expression, but isn't: %v", err)))
		}
	}
	return errs
}

// nested checks a schema under a logic junctor: it may only restrict values.
func nested(s *apiextv1.JSONSchemaProps, skipAnyOf, skipAllOfAnyOf bool, fldPath *field.Path) field.ErrorList {
	errs := valueValidation(s, skipAnyOf, skipAllOfAnyOf, fldPath)
	if s.Items != nil && s.Items.Schema != nil {
		errs = append(errs, nested(s.Items.Schema, false, false, fldPath.Child("items"))...)
	}
	for _, k := range sortedKeys(s.Properties) {
		v := s.Properties[k]
		errs = append(errs, nested(&v, false, false, fldPath.Child("properties").Key(k))...)
		if k == "metadata" {
			errs = append(errs, field.Forbidden(fldPath.Child("properties").Key(k), "must not be specified in a nested context"))
		}
	}
	if s.Type != "" {
		errs = append(errs, field.Forbidden(fldPath.Child("type"), "must be empty to be structural"))
	}
	if s.AdditionalProperties != nil {
		errs = append(errs, field.Forbidden(fldPath.Child("additionalProperties"), "must be undefined to be structural"))
	}
	if s.Default != nil {
		errs = append(errs, field.Forbidden(fldPath.Child("default"), "must be undefined to be structural"))
	}
	if s.Title != "" {
		errs = append(errs, field.Forbidden(fldPath.Child("title"), "must be empty to be structural"))
	}
	if s.Description != "" {
		errs = append(errs, field.Forbidden(fldPath.Child("description"), "must be empty to be structural"))
	}
	if s.Nullable {
		errs = append(errs, field.Forbidden(fldPath.Child("nullable"), "must be false to be structural"))
	}
	if s.XPreserveUnknownFields != nil {
		errs = append(errs, field.Forbidden(fldPath.Child("x-kubernetes-preserve-unknown-fields"), "must be false to be structural"))
	}
	if s.XEmbeddedResource {
		errs = append(errs, field.Forbidden(fldPath.Child("x-kubernetes-embedded-resource"), "must be false to be structural"))
	}
	if s.XIntOrString {
		errs = append(errs, field.Forbidden(fldPath.Child("x-kubernetes-int-or-string"), "must be false to be structural"))
	}
	if len(s.XListMapKeys) > 0 {
		errs = append(errs, field.Forbidden(fldPath.Child("x-kubernetes-list-map-keys"), "must be empty to be structural"))
	}
	if s.XListType != nil {
		errs = append(errs, field.Forbidden(fldPath.Child("x-kubernetes-list-type"), "must be undefined to be structural"))
	}
	if s.XMapType != nil {
		errs = append(errs, field.Forbidden(fldPath.Child("x-kubernetes-map-type"), "must be undefined to be structural"))
	}
	if len(s.XValidations) > 0 {
		errs = append(errs, field.Forbidden(fldPath.Child("x-kubernetes-validations"), "must be empty to be structural"))
	}
	return errs
}

// completeness: every property and items the root's value validations (allOf, anyOf,
// oneOf, not) mention must also be in the structural part, or the pruner would drop
// what they talk about. As upstream, only the root's junctors are followed.
func completeness(s *apiextv1.JSONSchemaProps, fldPath *field.Path) field.ErrorList {
	return junctorCompleteness(s, s, fldPath, fldPath)
}

func junctorCompleteness(v, s *apiextv1.JSONSchemaProps, sPath, vPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if v.Not != nil {
		errs = append(errs, nestedCompleteness(v.Not, s, sPath, vPath.Child("not"))...)
	}
	for i := range v.AllOf {
		errs = append(errs, nestedCompleteness(&v.AllOf[i], s, sPath, vPath.Child("allOf").Index(i))...)
	}
	for i := range v.AnyOf {
		errs = append(errs, nestedCompleteness(&v.AnyOf[i], s, sPath, vPath.Child("anyOf").Index(i))...)
	}
	for i := range v.OneOf {
		errs = append(errs, nestedCompleteness(&v.OneOf[i], s, sPath, vPath.Child("oneOf").Index(i))...)
	}
	return errs
}

func nestedCompleteness(v, s *apiextv1.JSONSchemaProps, sPath, vPath *field.Path) field.ErrorList {
	if v == nil {
		return nil
	}
	if s == nil {
		return field.ErrorList{field.Required(sPath, fmt.Sprintf("because it is defined in %s", vPath.String()))}
	}
	errs := junctorCompleteness(v, s, sPath, vPath)
	if v.Items != nil && v.Items.Schema != nil {
		var sItems *apiextv1.JSONSchemaProps
		if s.Items != nil {
			sItems = s.Items.Schema
		}
		errs = append(errs, nestedCompleteness(v.Items.Schema, sItems, sPath.Child("items"), vPath.Child("items"))...)
	}
	for _, k := range sortedKeys(v.Properties) {
		vf := v.Properties[k]
		sf, ok := s.Properties[k]
		if !ok {
			errs = append(errs, field.Required(sPath.Child("properties").Key(k), fmt.Sprintf("because it is defined in %s", vPath.Child("properties").Key(k))))
			continue
		}
		errs = append(errs, nestedCompleteness(&vf, &sf, sPath.Child("properties").Key(k), vPath.Child("properties").Key(k))...)
	}
	return errs
}

func sortedKeys(m map[string]apiextv1.JSONSchemaProps) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
