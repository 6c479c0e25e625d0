// Package apiextensions describes the apiextensions.k8s.io/v1 customresourcedefinitions
// resource: its defaulting and its validation, with upstream's paths and messages
// (names, group, scope, versions, the one storage version, structural schemas,
// subresources, printer columns, selectable fields, conversion).
//
// What a CRD does once stored (names accepted, Established, its resources served) is
// the apiserver's; what its schema does to custom resources is in crdschema and
// registry/customresource.
package apiextensions

import (
	"context"
	"fmt"
	"slices"
	"strings"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/util/jsonpath"

	"mizzen/internal/registry"
	"mizzen/internal/registry/apiextensions/crdschema"
)

// Finalizer is the finalizer the server puts on every CRD: it deletes the CRD's
// custom resources before the CRD goes.
const Finalizer = "customresourcecleanup.apiextensions.k8s.io"

// Resources returns the apiextensions.k8s.io/v1 resources.
func Resources() []*registry.Resource {
	return []*registry.Resource{{
		GroupVersion: apiextv1.SchemeGroupVersion,
		Resource:     "customresourcedefinitions",
		Kind:         "CustomResourceDefinition",
		SingularName: "customresourcedefinition",
		ShortNames:   []string{"crd", "crds"},
		Categories:   []string{"api-extensions"},
		New:          func() runtime.Object { return &apiextv1.CustomResourceDefinition{} },
		NewList:      func() runtime.Object { return &apiextv1.CustomResourceDefinitionList{} },
		Strategy:     crdStrategy{},
		HasStatus:    true,
	}}
}

type crdStrategy struct{ registry.BaseStrategy }

// Default is upstream's v1 defaulting: singular and listKind from kind, conversion None,
// the conversion webhook's review versions and service port.
func (crdStrategy) Default(obj runtime.Object) {
	crd := obj.(*apiextv1.CustomResourceDefinition)
	spec := &crd.Spec
	if spec.Names.Singular == "" {
		spec.Names.Singular = strings.ToLower(spec.Names.Kind)
	}
	if spec.Names.ListKind == "" && spec.Names.Kind != "" {
		spec.Names.ListKind = spec.Names.Kind + "List"
	}
	if spec.Conversion == nil {
		spec.Conversion = &apiextv1.CustomResourceConversion{Strategy: apiextv1.NoneConverter}
	}
	if w := spec.Conversion.Webhook; w != nil && w.ClientConfig != nil && w.ClientConfig.Service != nil && w.ClientConfig.Service.Port == nil {
		port := int32(443)
		w.ClientConfig.Service.Port = &port
	}
}

// PrepareForCreate starts a CRD with an empty status but for the storage version it
// will store, and with the cleanup finalizer.
func (crdStrategy) PrepareForCreate(_ context.Context, obj runtime.Object) {
	crd := obj.(*apiextv1.CustomResourceDefinition)
	crd.Status = apiextv1.CustomResourceDefinitionStatus{}
	if v := StorageVersion(crd); v != "" {
		crd.Status.StoredVersions = []string{v}
	}
}

// PrepareForUpdate records a new storage version in status.storedVersions.
func (crdStrategy) PrepareForUpdate(_ context.Context, obj, _ runtime.Object) {
	crd := obj.(*apiextv1.CustomResourceDefinition)
	if v := StorageVersion(crd); v != "" && !slices.Contains(crd.Status.StoredVersions, v) {
		crd.Status.StoredVersions = append(crd.Status.StoredVersions, v)
	}
}

func (crdStrategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	return ValidateCRD(obj.(*apiextv1.CustomResourceDefinition))
}

func (crdStrategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	crd, oldCRD := obj.(*apiextv1.CustomResourceDefinition), old.(*apiextv1.CustomResourceDefinition)
	errs := ValidateCRD(crd)
	if established(oldCRD) {
		// Once served, the identity of the resource stays.
		if crd.Spec.Scope != oldCRD.Spec.Scope {
			errs = append(errs, field.Invalid(field.NewPath("spec", "scope"), crd.Spec.Scope, "field is immutable"))
		}
	}
	if crd.Spec.Group != oldCRD.Spec.Group {
		errs = append(errs, field.Invalid(field.NewPath("spec", "group"), crd.Spec.Group, "field is immutable"))
	}
	if crd.Spec.Names.Plural != oldCRD.Spec.Names.Plural {
		errs = append(errs, field.Invalid(field.NewPath("spec", "names", "plural"), crd.Spec.Names.Plural, "field is immutable"))
	}
	errs = append(errs, validateStoredVersions(crd)...)
	return errs
}

func established(crd *apiextv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextv1.Established && c.Status == apiextv1.ConditionTrue {
			return true
		}
	}
	return false
}

// StorageVersion is the name of the version marked storage ("" if none is).
func StorageVersion(crd *apiextv1.CustomResourceDefinition) string {
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			return v.Name
		}
	}
	return ""
}

func validateStoredVersions(crd *apiextv1.CustomResourceDefinition) field.ErrorList {
	p := field.NewPath("status", "storedVersions")
	stored := crd.Status.StoredVersions
	if len(stored) == 0 {
		return field.ErrorList{field.Invalid(p, stored, "must have at least one stored version")}
	}
	var errs field.ErrorList
	if sv := StorageVersion(crd); sv != "" && !slices.Contains(stored, sv) {
		errs = append(errs, field.Invalid(p, stored, "must have the storage version "+sv))
	}
	for i, v := range stored {
		if !slices.ContainsFunc(crd.Spec.Versions, func(x apiextv1.CustomResourceDefinitionVersion) bool { return x.Name == v }) {
			errs = append(errs, field.Invalid(p.Index(i), v, fmt.Sprintf("missing from spec.versions; %[1]s was previously a storage version, and must remain in spec.versions until a storage migration ensures no data remains persisted in %[1]s and removes %[1]s from status.storedVersions", v)))
		}
	}
	return errs
}

// ValidateCRD checks a CRD as upstream's apiextensions validation does.
func ValidateCRD(crd *apiextv1.CustomResourceDefinition) field.ErrorList {
	var errs field.ErrorList
	spec := &crd.Spec
	specPath := field.NewPath("spec")
	if want := spec.Names.Plural + "." + spec.Group; crd.Name != want {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), crd.Name, `must be spec.names.plural+"."+spec.group`))
	}
	switch {
	case spec.Group == "":
		errs = append(errs, field.Required(specPath.Child("group"), ""))
	case len(validation.IsDNS1123Subdomain(spec.Group)) > 0:
		errs = append(errs, field.Invalid(specPath.Child("group"), spec.Group, strings.Join(validation.IsDNS1123Subdomain(spec.Group), ",")))
	case len(strings.Split(spec.Group, ".")) < 2:
		errs = append(errs, field.Invalid(specPath.Child("group"), spec.Group, "should be a domain with at least one dot"))
	}
	switch spec.Scope {
	case "":
		errs = append(errs, field.Required(specPath.Child("scope"), ""))
	case apiextv1.ClusterScoped, apiextv1.NamespaceScoped:
	default:
		errs = append(errs, field.NotSupported(specPath.Child("scope"), spec.Scope, []string{string(apiextv1.ClusterScoped), string(apiextv1.NamespaceScoped)}))
	}
	errs = append(errs, validateNames(&spec.Names, specPath.Child("names"))...)

	versionsPath := specPath.Child("versions")
	if len(spec.Versions) == 0 {
		errs = append(errs, field.Required(versionsPath, "must have exactly one version marked as storage version"))
	}
	seen := map[string]bool{}
	unique, storage := true, 0
	for i := range spec.Versions {
		v := &spec.Versions[i]
		vPath := versionsPath.Index(i)
		if seen[v.Name] {
			unique = false
		}
		seen[v.Name] = true
		if v.Storage {
			storage++
		}
		if msgs := validation.IsDNS1035Label(v.Name); len(msgs) > 0 {
			errs = append(errs, field.Invalid(vPath.Child("name"), v.Name, strings.Join(msgs, ",")))
		}
		errs = append(errs, validateVersion(v, spec, vPath)...)
	}
	if !unique {
		errs = append(errs, field.Invalid(versionsPath, spec.Versions, "must contain unique version names"))
	}
	if len(spec.Versions) > 0 && storage != 1 {
		errs = append(errs, field.Invalid(versionsPath, spec.Versions, "must have exactly one version marked as storage version"))
	}
	if spec.PreserveUnknownFields {
		errs = append(errs, field.Invalid(specPath.Child("preserveUnknownFields"), spec.PreserveUnknownFields, "cannot set to true, set x-kubernetes-preserve-unknown-fields to true in spec.versions[*].schema instead"))
	}
	errs = append(errs, validateConversion(spec.Conversion, specPath.Child("conversion"))...)
	return errs
}

func validateNames(n *apiextv1.CustomResourceDefinitionNames, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if n.Plural == "" {
		errs = append(errs, field.Required(p.Child("plural"), ""))
	} else if msgs := validation.IsDNS1035Label(n.Plural); len(msgs) > 0 {
		errs = append(errs, field.Invalid(p.Child("plural"), n.Plural, strings.Join(msgs, ",")))
	}
	if n.Singular == "" {
		errs = append(errs, field.Required(p.Child("singular"), ""))
	} else if msgs := validation.IsDNS1035Label(n.Singular); len(msgs) > 0 {
		errs = append(errs, field.Invalid(p.Child("singular"), n.Singular, strings.Join(msgs, ",")))
	}
	if n.Kind == "" {
		errs = append(errs, field.Required(p.Child("kind"), ""))
	} else if msgs := validation.IsDNS1035Label(strings.ToLower(n.Kind)); len(msgs) > 0 {
		errs = append(errs, field.Invalid(p.Child("kind"), n.Kind, "may have mixed case, but should otherwise match: "+strings.Join(msgs, ",")))
	}
	if n.ListKind == "" {
		errs = append(errs, field.Required(p.Child("listKind"), ""))
	} else if msgs := validation.IsDNS1035Label(strings.ToLower(n.ListKind)); len(msgs) > 0 {
		errs = append(errs, field.Invalid(p.Child("listKind"), n.ListKind, "may have mixed case, but should otherwise match: "+strings.Join(msgs, ",")))
	}
	for i, s := range n.ShortNames {
		if msgs := validation.IsDNS1035Label(s); len(msgs) > 0 {
			errs = append(errs, field.Invalid(p.Child("shortNames").Index(i), s, strings.Join(msgs, ",")))
		}
	}
	if n.Kind != "" && n.Kind == n.ListKind {
		errs = append(errs, field.Invalid(p.Child("listKind"), n.ListKind, "kind and listKind may not be the same"))
	}
	for i, c := range n.Categories {
		if msgs := validation.IsDNS1035Label(c); len(msgs) > 0 {
			errs = append(errs, field.Invalid(p.Child("categories").Index(i), c, strings.Join(msgs, ",")))
		}
	}
	return errs
}

var (
	printerColumnTypes   = []string{"boolean", "date", "integer", "number", "string"}
	printerColumnFormats = []string{"byte", "date", "date-time", "double", "float", "int32", "int64", "password"}
)

func validateVersion(v *apiextv1.CustomResourceDefinitionVersion, spec *apiextv1.CustomResourceDefinitionSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	schemaPath := p.Child("schema", "openAPIV3Schema")
	var s *apiextv1.JSONSchemaProps
	if v.Schema != nil {
		s = v.Schema.OpenAPIV3Schema
	}
	if s == nil {
		errs = append(errs, field.Required(schemaPath, ""))
	} else {
		serrs := crdschema.ValidateStructural(schemaPath, s)
		errs = append(errs, serrs...)
		if len(serrs) == 0 {
			errs = append(errs, crdschema.ValidateDefaults(schemaPath, s)...)
		}
		if s.Nullable {
			errs = append(errs, field.Forbidden(schemaPath.Child("nullable"), "nullable cannot be true at the root"))
		}
		if v.Subresources != nil && v.Subresources.Status != nil {
			if s.Type != "" && s.Type != "object" {
				errs = append(errs, field.Invalid(schemaPath.Child("type"), s.Type, `only "object" is allowed as the type at the root of the schema if the status subresource is enabled`))
			}
		}
		errs = append(errs, crdschema.ValidateRules(schemaPath, s)...)
	}
	if sub := v.Subresources; sub != nil && sub.Scale != nil {
		sp := p.Child("subresources")
		if sub.Scale.SpecReplicasPath == "" {
			errs = append(errs, field.Required(sp.Child("scale.specReplicasPath"), ""))
		} else if !strings.HasPrefix(sub.Scale.SpecReplicasPath, ".spec.") {
			errs = append(errs, field.Invalid(sp.Child("scale.specReplicasPath"), sub.Scale.SpecReplicasPath, "should be a json path under .spec"))
		}
		if sub.Scale.StatusReplicasPath == "" {
			errs = append(errs, field.Required(sp.Child("scale.statusReplicasPath"), ""))
		} else if !strings.HasPrefix(sub.Scale.StatusReplicasPath, ".status.") {
			errs = append(errs, field.Invalid(sp.Child("scale.statusReplicasPath"), sub.Scale.StatusReplicasPath, "should be a json path under .status"))
		}
		if lp := sub.Scale.LabelSelectorPath; lp != nil && !strings.HasPrefix(*lp, ".spec.") && !strings.HasPrefix(*lp, ".status.") {
			errs = append(errs, field.Invalid(sp.Child("scale.labelSelectorPath"), *lp, "should be a json path under either .spec or .status"))
		}
	}
	for i, col := range v.AdditionalPrinterColumns {
		cp := p.Child("additionalPrinterColumns").Index(i)
		if col.Name == "" {
			errs = append(errs, field.Required(cp.Child("name"), ""))
		}
		if col.Type == "" {
			errs = append(errs, field.Required(cp.Child("type"), "must be one of "+strings.Join(printerColumnTypes, ",")))
		} else if !slices.Contains(printerColumnTypes, col.Type) {
			errs = append(errs, field.Invalid(cp.Child("type"), col.Type, "must be one of "+strings.Join(printerColumnTypes, ",")))
		}
		if col.Format != "" && !slices.Contains(printerColumnFormats, col.Format) {
			errs = append(errs, field.Invalid(cp.Child("format"), col.Format, "must be one of "+strings.Join(printerColumnFormats, ",")))
		}
		if col.JSONPath == "" {
			errs = append(errs, field.Required(cp.Child("JSONPath"), ""))
		} else if err := jsonpath.New(col.Name).Parse("{" + col.JSONPath + "}"); err != nil {
			errs = append(errs, field.Invalid(cp.Child("JSONPath"), col.JSONPath, fmt.Sprintf("is an invalid path: %v", err)))
		}
	}
	seen := map[string]bool{}
	for i, sf := range v.SelectableFields {
		fp := p.Child("selectableFields").Index(i).Child("jsonPath")
		switch {
		case sf.JSONPath == "":
			errs = append(errs, field.Required(fp, ""))
		case strings.HasPrefix(sf.JSONPath, ".metadata"):
			errs = append(errs, field.Invalid(fp, sf.JSONPath, "must not point to fields in metadata"))
		case s != nil && !crdschema.IsSelectableType(s, sf.JSONPath):
			errs = append(errs, field.Invalid(fp, sf.JSONPath, "must point to a field of type string, boolean or integer. Enum string fields and strings with formats are allowed."))
		case seen[sf.JSONPath]:
			errs = append(errs, field.Duplicate(fp, sf.JSONPath))
		}
		seen[sf.JSONPath] = true
	}
	if len(v.SelectableFields) > 8 {
		errs = append(errs, field.TooMany(p.Child("selectableFields"), len(v.SelectableFields), 8))
	}
	return errs
}

func validateConversion(c *apiextv1.CustomResourceConversion, p *field.Path) field.ErrorList {
	if c == nil {
		return nil
	}
	var errs field.ErrorList
	switch c.Strategy {
	case apiextv1.NoneConverter:
		if c.Webhook != nil && c.Webhook.ClientConfig != nil {
			errs = append(errs, field.Forbidden(p.Child("webhookClientConfig"), "should not be set when strategy is not set to Webhook"))
		}
	case apiextv1.WebhookConverter:
		if c.Webhook == nil || c.Webhook.ClientConfig == nil {
			errs = append(errs, field.Required(p.Child("webhook"), "required when strategy is set to Webhook"))
			break
		}
		cc := c.Webhook.ClientConfig
		if (cc.URL == nil) == (cc.Service == nil) {
			errs = append(errs, field.Required(p.Child("webhook", "clientConfig"), "exactly one of url or service is required"))
		}
		if len(c.Webhook.ConversionReviewVersions) == 0 {
			errs = append(errs, field.Required(p.Child("webhook", "conversionReviewVersions"), ""))
		} else if !slices.Contains(c.Webhook.ConversionReviewVersions, "v1") && !slices.Contains(c.Webhook.ConversionReviewVersions, "v1beta1") {
			errs = append(errs, field.Invalid(p.Child("webhook", "conversionReviewVersions"), c.Webhook.ConversionReviewVersions, "must include at least one of v1, v1beta1"))
		}
	default:
		errs = append(errs, field.NotSupported(p.Child("strategy"), c.Strategy, []string{string(apiextv1.NoneConverter), string(apiextv1.WebhookConverter)}))
	}
	return errs
}
