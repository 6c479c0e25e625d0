package crdschema

import (
	"strings"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/kube-openapi/pkg/validation/strfmt"
	"k8s.io/kube-openapi/pkg/validation/validate"
)

// ValidateDefaults checks every default in a structural schema against the schema of
// its own node, and that pruning would not change it, as upstream does.
func ValidateDefaults(fldPath *field.Path, s *apiextv1.JSONSchemaProps) field.ErrorList {
	var errs field.ErrorList
	var walk func(s *apiextv1.JSONSchemaProps, p *field.Path, inMeta bool)
	walk = func(s *apiextv1.JSONSchemaProps, p *field.Path, inMeta bool) {
		if s.Default != nil {
			value, err := decodeJSON(s.Default.Raw)
			if err != nil {
				errs = append(errs, field.Invalid(p.Child("default"), string(s.Default.Raw), err.Error()))
			} else {
				node := *s
				node.Default = nil
				if os, err := ToOpenAPI(&node); err == nil {
					// The messages name the default by its path in the CRD.
					v := validate.NewSchemaValidator(os, nil, p.Child("default").String(), strfmt.Default)
					errs = append(errs, toFieldErrors(nil, v.Validate(value))...)
				}
				if obj, ok := value.(map[string]interface{}); ok {
					var pruned []string
					copied, _ := decodeJSON(s.Default.Raw)
					pruneObject(copied.(map[string]interface{}), s, "", s.XEmbeddedResource, &pruned)
					if len(pruned) > 0 {
						errs = append(errs, field.Invalid(p.Child("default"), obj, "must not have unknown fields"))
					}
				}
			}
		}
		for _, k := range sortedKeys(s.Properties) {
			c := s.Properties[k]
			walk(&c, p.Child("properties").Key(k), inMeta)
		}
		if s.Items != nil && s.Items.Schema != nil {
			walk(s.Items.Schema, p.Child("items"), inMeta)
		}
		if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
			walk(s.AdditionalProperties.Schema, p.Child("additionalProperties"), inMeta)
		}
	}
	walk(s, fldPath, false)
	return errs
}

// IsSelectableType reports whether the JSON path (".spec.color") names a field of the
// schema of type string, boolean or integer, the types a selectable field may have.
func IsSelectableType(s *apiextv1.JSONSchemaProps, path string) bool {
	node := Lookup(s, path)
	if node == nil {
		return false
	}
	switch node.Type {
	case "string", "boolean", "integer":
		return true
	}
	return false
}

// Lookup returns the schema of the field a simple JSON path (".spec.replicas") names,
// or nil when the schema does not specify it.
func Lookup(s *apiextv1.JSONSchemaProps, path string) *apiextv1.JSONSchemaProps {
	cur := s
	for _, part := range strings.Split(strings.TrimPrefix(path, "."), ".") {
		if cur == nil {
			return nil
		}
		child, ok := cur.Properties[part]
		if !ok {
			if cur.AdditionalProperties != nil && cur.AdditionalProperties.Schema != nil {
				cur = cur.AdditionalProperties.Schema
				continue
			}
			return nil
		}
		cur = &child
	}
	return cur
}

// ValidateRules checks the x-kubernetes-validations of every node: a rule is set, the
// message is one line, the rule (and messageExpression) compiles, and its estimated
// cost, times the number of times its node can occur in one object, is within
// upstream's per-rule budget and the schema's rules together within the total one.
func ValidateRules(fldPath *field.Path, s *apiextv1.JSONSchemaProps) field.ErrorList {
	var errs field.ErrorList
	var total costTotal
	var walk func(s *apiextv1.JSONSchemaProps, p *field.Path, cardinality uint64)
	walk = func(s *apiextv1.JSONSchemaProps, p *field.Path, cardinality uint64) {
		for i, rule := range s.XValidations {
			rp := p.Child("x-kubernetes-validations").Index(i)
			if strings.TrimSpace(rule.Rule) == "" {
				errs = append(errs, field.Required(rp.Child("rule"), "rule is not specified"))
				continue
			}
			if len(rule.Message) > 0 && strings.TrimSpace(rule.Message) == "" {
				errs = append(errs, field.Invalid(rp.Child("message"), rule.Message, "must be non-empty if specified"))
			} else if strings.Contains(rule.Message, "\n") {
				errs = append(errs, field.Invalid(rp.Child("message"), rule.Message, "must not contain line breaks"))
			}
			if rule.Message == "" && strings.Contains(rule.Rule, "\n") {
				errs = append(errs, field.Required(rp.Child("message"), "message must be specified if rule contains line breaks"))
			}
			c, err := compileRule(s, rule)
			if err != nil {
				errs = append(errs, err.toField(rp, rule)...)
				continue
			}
			if cost := mulSaturating(c.cost, cardinality); cost > StaticEstimatedCostLimit {
				errs = append(errs, field.Forbidden(rp.Child("rule"), costErrorMessage("estimated rule cost", cost, StaticEstimatedCostLimit)))
			} else {
				total.observe(rp.Child("rule"), cost)
			}
			if rule.MessageExpression != "" {
				if cost := mulSaturating(c.messageCost, cardinality); cost > StaticEstimatedCostLimit {
					errs = append(errs, field.Forbidden(rp.Child("messageExpression"), costErrorMessage("estimated messageExpression cost", cost, StaticEstimatedCostLimit)))
				} else {
					total.observe(rp.Child("messageExpression"), cost)
				}
			}
		}
		for _, k := range sortedKeys(s.Properties) {
			c := s.Properties[k]
			walk(&c, p.Child("properties").Key(k), cardinality)
		}
		if s.Items != nil && s.Items.Schema != nil {
			walk(s.Items.Schema, p.Child("items"), mulSaturating(cardinality, maxItems(s)))
		}
		if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
			walk(s.AdditionalProperties.Schema, p.Child("additionalProperties"), mulSaturating(cardinality, maxProperties(s)))
		}
	}
	walk(s, fldPath, 1)
	return append(errs, total.errors(fldPath)...)
}
