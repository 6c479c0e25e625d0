package crdschema

import (
	"encoding/json"
	"strings"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	openapierrors "k8s.io/kube-openapi/pkg/validation/errors"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"k8s.io/kube-openapi/pkg/validation/strfmt"
	"k8s.io/kube-openapi/pkg/validation/validate"
)

// Validator checks custom resources against a CRD version's schema.
type Validator struct {
	v *validate.SchemaValidator
}

// ToOpenAPI turns a CRD schema into kube-openapi's form: both are OpenAPI v3 with the
// same JSON shape, so the JSON of one reads as the other.
func ToOpenAPI(s *apiextv1.JSONSchemaProps) (*spec.Schema, error) {
	data, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	out := &spec.Schema{}
	if err := json.Unmarshal(data, out); err != nil {
		return nil, err
	}
	return out, nil
}

// NewValidator builds the validator of a schema; nil validates nothing.
func NewValidator(s *apiextv1.JSONSchemaProps) (*Validator, error) {
	if s == nil {
		return &Validator{}, nil
	}
	os, err := ToOpenAPI(s)
	if err != nil {
		return nil, err
	}
	return &Validator{v: validate.NewSchemaValidator(os, nil, "", strfmt.Default)}, nil
}

// Validate checks obj (a decoded custom resource) and returns the problems as upstream
// reports them: the path of the field, and kube-openapi's message.
func (v *Validator) Validate(obj map[string]interface{}) field.ErrorList {
	if v == nil || v.v == nil {
		return nil
	}
	return toFieldErrors(nil, v.v.Validate(obj))
}

func toFieldErrors(fldPath *field.Path, result *validate.Result) field.ErrorList {
	var errs field.ErrorList
	for _, err := range result.Errors {
		verr, ok := err.(*openapierrors.Validation)
		if !ok {
			errs = append(errs, field.Invalid(fldPath, "", err.Error()))
			continue
		}
		p := fldPath
		if verr.Name != "" && verr.Name != "." {
			p = p.Child(strings.TrimPrefix(verr.Name, "."))
		}
		value := verr.Value
		if value == nil {
			value = ""
		}
		switch verr.Code() {
		case openapierrors.RequiredFailCode:
			errs = append(errs, field.Required(p, ""))
		case openapierrors.EnumFailCode:
			var values []string
			for _, allowed := range verr.Values {
				if s, ok := allowed.(string); ok {
					values = append(values, s)
				} else {
					data, _ := json.Marshal(allowed)
					values = append(values, string(data))
				}
			}
			errs = append(errs, field.NotSupported(p, verr.Value, values))
		case openapierrors.TooLongFailCode:
			errs = append(errs, field.TooLong(p, "", int(asInt(verr.Valid))))
		case openapierrors.MaxItemsFailCode, openapierrors.TooManyPropertiesCode:
			errs = append(errs, field.TooMany(p, int(asInt(verr.Value)), int(asInt(verr.Valid))))
		case openapierrors.InvalidTypeCode:
			errs = append(errs, field.TypeInvalid(p, value, verr.Error()))
		default:
			errs = append(errs, field.Invalid(p, value, verr.Error()))
		}
	}
	return errs
}

func asInt(v interface{}) int64 {
	if i, ok := v.(int64); ok {
		return i
	}
	return -1
}
