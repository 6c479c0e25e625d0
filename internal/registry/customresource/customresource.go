// Package customresource turns a CustomResourceDefinition into the registry Resources
// the apiserver serves for it, one per served version: identity from the CRD's
// accepted names, objects as unstructured JSON, a Strategy that prunes, defaults and
// validates with the version's schema (crdschema) and its CEL rules, the status and
// scale subresources, selectable fields, and the additionalPrinterColumns as a Printer.
//
// All versions share one stored resource (the storage version's); with conversion
// None, serving another version only rewrites apiVersion, as upstream does. Like every
// registry package, it never imports the apiserver: the server installs and removes
// what Resources returns while it runs.
package customresource

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/util/jsonpath"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"mizzen/internal/registry"
	"mizzen/internal/registry/apiextensions/crdschema"
)

// Converter converts a custom resource to another apiVersion of its group (the CRD's
// conversion webhook); it must not modify obj.
type Converter func(ctx context.Context, obj *unstructured.Unstructured, apiVersion string) (*unstructured.Unstructured, error)

// Resources returns the resources a CRD serves, one per served version, named as its
// status.acceptedNames say (the names the server has accepted), storage version first.
// Versions convert by their apiVersion alone (conversion None).
func Resources(crd *apiextv1.CustomResourceDefinition) ([]*registry.Resource, error) {
	return ResourcesWithConverter(crd, nil)
}

// ResourcesWithConverter is Resources for a CRD whose versions convert through conv
// (conversion Webhook); a nil conv converts by apiVersion alone.
func ResourcesWithConverter(crd *apiextv1.CustomResourceDefinition, conv Converter) ([]*registry.Resource, error) {
	if conv == nil {
		conv = func(_ context.Context, obj *unstructured.Unstructured, apiVersion string) (*unstructured.Unstructured, error) {
			out := obj.DeepCopy()
			out.SetAPIVersion(apiVersion)
			return out, nil
		}
	}
	names := crd.Status.AcceptedNames
	if names.Plural == "" {
		names = crd.Spec.Names
	}
	storageVersion := ""
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			storageVersion = v.Name
		}
	}
	storedGR := schema.GroupResource{Group: crd.Spec.Group, Resource: names.Plural}
	storageGVK := schema.GroupVersionKind{Group: crd.Spec.Group, Version: storageVersion, Kind: names.Kind}
	var out []*registry.Resource
	for i := range crd.Spec.Versions {
		v := &crd.Spec.Versions[i]
		if !v.Served {
			continue
		}
		r, err := versionResource(crd, names, v, storageGVK, conv)
		if err != nil {
			return nil, err
		}
		if v.Name == storageVersion {
			out = append([]*registry.Resource{r}, out...)
		} else {
			gr := storedGR
			r.StorageResource = &gr
			out = append(out, r)
		}
	}
	return out, nil
}

func versionResource(crd *apiextv1.CustomResourceDefinition, names apiextv1.CustomResourceDefinitionNames, v *apiextv1.CustomResourceDefinitionVersion, storageGVK schema.GroupVersionKind, conv Converter) (*registry.Resource, error) {
	gvk := schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: names.Kind}
	var s *apiextv1.JSONSchemaProps
	if v.Schema != nil && v.Schema.OpenAPIV3Schema != nil {
		s = v.Schema.OpenAPIV3Schema.DeepCopy()
	}
	validator, err := crdschema.NewValidator(s)
	if err != nil {
		return nil, fmt.Errorf("version %s: %w", v.Name, err)
	}
	hasStatus := v.Subresources != nil && v.Subresources.Status != nil
	st := &strategy{gvk: gvk, schema: s, validator: validator, rules: crdschema.NewRules(s), hasStatus: hasStatus}
	r := &registry.Resource{
		GroupVersion: gvk.GroupVersion(),
		Resource:     names.Plural,
		Kind:         names.Kind,
		SingularName: names.Singular,
		Namespaced:   crd.Spec.Scope == apiextv1.NamespaceScoped,
		ShortNames:   append([]string(nil), names.ShortNames...),
		Categories:   append([]string(nil), names.Categories...),
		New:          func() runtime.Object { return &unstructured.Unstructured{Object: map[string]interface{}{}} },
		NewList:      func() runtime.Object { return &unstructured.UnstructuredList{Object: map[string]interface{}{}} },
		Strategy:     st,
		HasStatus:    hasStatus,
		Prune: func(obj runtime.Object) []string {
			u, ok := obj.(*unstructured.Unstructured)
			if !ok {
				return nil
			}
			return crdschema.Prune(u.Object, s)
		},
		// Objects are stored in the version that was the storage version when they were
		// written; reading one converts it to the served version and defaults it with
		// that version's schema, as upstream defaults on read.
		FromStorage: func(obj runtime.Object) (runtime.Object, error) {
			in := obj.(*unstructured.Unstructured)
			var u *unstructured.Unstructured
			if in.GetAPIVersion() == gvk.GroupVersion().String() {
				u = in.DeepCopy()
			} else {
				var err error
				if u, err = conv(context.Background(), in, gvk.GroupVersion().String()); err != nil {
					return nil, err
				}
			}
			crdschema.Default(u.Object, s)
			return u, nil
		},
		ToStorage: func(obj runtime.Object) (runtime.Object, error) {
			in := obj.(*unstructured.Unstructured)
			if in.GetAPIVersion() == storageGVK.GroupVersion().String() {
				return in.DeepCopy(), nil
			}
			return conv(context.Background(), in, storageGVK.GroupVersion().String())
		},
	}
	if len(v.SelectableFields) > 0 {
		paths := make([]string, 0, len(v.SelectableFields))
		for _, sf := range v.SelectableFields {
			paths = append(paths, sf.JSONPath)
		}
		r.Fields = func(obj runtime.Object) fields.Set { return selectableFields(obj, paths) }
	}
	if v.Subresources != nil && v.Subresources.Scale != nil {
		r.Scale = scaleAdapter(v.Subresources.Scale)
	}
	r.Printer = printer(v.AdditionalPrinterColumns)
	model := &spec.Schema{}
	if s != nil {
		if m, err := crdschema.ToOpenAPI(s); err == nil {
			model = m
		}
	}
	r.OpenAPIModel = completeModel(model, gvk)
	return r, nil
}

// ModelName is upstream's OpenAPI definition name of a custom kind
// (com.example.v1.Widget for group example.com).
func ModelName(gvk schema.GroupVersionKind) string {
	parts := strings.Split(gvk.Group, ".")
	for i, j := 0, len(parts)-1; i < j; i, j = i+1, j-1 {
		parts[i], parts[j] = parts[j], parts[i]
	}
	return strings.Join(parts, ".") + "." + gvk.Version + "." + gvk.Kind
}

// completeModel completes a version's schema for publishing and server-side apply:
// type object, apiVersion, kind and metadata as every object has them, and the kind
// it describes.
func completeModel(s *spec.Schema, gvk schema.GroupVersionKind) *spec.Schema {
	if s.Properties == nil {
		s.Properties = map[string]spec.Schema{}
	}
	s.Type = spec.StringOrArray{"object"}
	if _, ok := s.Properties["apiVersion"]; !ok {
		s.Properties["apiVersion"] = spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{"string"},
			Description: "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources"}}
	}
	if _, ok := s.Properties["kind"]; !ok {
		s.Properties["kind"] = spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{"string"},
			Description: "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds"}}
	}
	s.Properties["metadata"] = spec.Schema{SchemaProps: spec.SchemaProps{
		Ref:         spec.MustCreateRef("#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"),
		Description: "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"}}
	if s.Extensions == nil {
		s.Extensions = spec.Extensions{}
	}
	s.Extensions["x-kubernetes-group-version-kind"] = []interface{}{map[string]interface{}{"group": gvk.Group, "version": gvk.Version, "kind": gvk.Kind}}
	return s
}

// strategy is a custom resource version's write steps.
type strategy struct {
	registry.BaseStrategy
	gvk       schema.GroupVersionKind
	schema    *apiextv1.JSONSchemaProps
	validator *crdschema.Validator
	rules     *crdschema.Rules
	hasStatus bool
}

func content(obj runtime.Object) map[string]interface{} {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return u.Object
	}
	return nil
}

// Default applies the schema's defaults, as upstream does when it decodes a body.
func (s *strategy) Default(obj runtime.Object) {
	crdschema.Default(content(obj), s.schema)
}

// PrepareForCreate drops the status of a resource that has a status subresource: it is
// written only through that.
func (s *strategy) PrepareForCreate(_ context.Context, obj runtime.Object) {
	if s.hasStatus {
		delete(content(obj), "status")
	}
}

func (s *strategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	return s.validate(obj, nil)
}

func (s *strategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	return s.validate(obj, old)
}

func (s *strategy) validate(obj, old runtime.Object) field.ErrorList {
	u := content(obj)
	var errs field.ErrorList
	if apiVersion, _ := u["apiVersion"].(string); apiVersion != s.gvk.GroupVersion().String() {
		errs = append(errs, field.Invalid(field.NewPath("apiVersion"), apiVersion, "must be "+s.gvk.GroupVersion().String()))
	}
	if kind, _ := u["kind"].(string); kind != s.gvk.Kind {
		errs = append(errs, field.Invalid(field.NewPath("kind"), kind, "must be "+s.gvk.Kind))
	}
	verrs := s.validator.Validate(u)
	errs = append(errs, verrs...)
	errs = append(errs, crdschema.ValidateEmbedded(u, s.schema)...)
	if len(verrs) == 0 {
		var oldContent map[string]interface{}
		if old != nil {
			oldContent = content(old)
		}
		errs = append(errs, s.rules.Validate(u, oldContent)...)
	}
	return errs
}

// selectableFields evaluates each path on obj; a field that is absent is absent from
// the set, and matches no selector but !=.
func selectableFields(obj runtime.Object, paths []string) fields.Set {
	set := fields.Set{}
	u := content(obj)
	for _, p := range paths {
		v, found, err := unstructured.NestedFieldNoCopy(u, splitPath(p)...)
		if err != nil || !found {
			continue
		}
		key := strings.TrimPrefix(p, ".")
		switch x := v.(type) {
		case string:
			set[key] = x
		case bool:
			set[key] = strconv.FormatBool(x)
		case int64:
			set[key] = strconv.FormatInt(x, 10)
		case float64:
			set[key] = strconv.FormatFloat(x, 'f', -1, 64)
		}
	}
	return set
}

func splitPath(p string) []string {
	return strings.Split(strings.TrimPrefix(p, "."), ".")
}

func scaleAdapter(sc *apiextv1.CustomResourceSubresourceScale) *registry.ScaleAdapter {
	spec, status := splitPath(sc.SpecReplicasPath), splitPath(sc.StatusReplicasPath)
	var selector []string
	if sc.LabelSelectorPath != nil && *sc.LabelSelectorPath != "" {
		selector = splitPath(*sc.LabelSelectorPath)
	}
	return &registry.ScaleAdapter{
		Get: func(obj runtime.Object) (int32, int32, string) {
			u := content(obj)
			specReplicas, _, _ := unstructured.NestedInt64(u, spec...)
			statusReplicas, _, _ := unstructured.NestedInt64(u, status...)
			sel := ""
			if selector != nil {
				sel, _, _ = unstructured.NestedString(u, selector...)
			}
			return int32(specReplicas), int32(statusReplicas), sel
		},
		Set: func(obj runtime.Object, replicas int32) {
			_ = unstructured.SetNestedField(content(obj), int64(replicas), spec...)
		},
	}
}

// printer renders the additionalPrinterColumns after NAME, as upstream's table
// convertor does; without any, NAME and AGE, as upstream's default columns for
// custom resources.
func printer(cols []apiextv1.CustomResourceColumnDefinition) *registry.Printer {
	if len(cols) == 0 {
		cols = []apiextv1.CustomResourceColumnDefinition{{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp",
			Description: registry.AgeColumn.Description}}
	}
	p := &registry.Printer{Columns: []metav1.TableColumnDefinition{registry.NameColumn}}
	var paths []*jsonpath.JSONPath
	for _, col := range cols {
		jp := jsonpath.New(col.Name)
		if err := jp.Parse("{" + col.JSONPath + "}"); err != nil {
			jp = nil
		} else {
			jp.AllowMissingKeys(true)
		}
		paths = append(paths, jp)
		desc := col.Description
		if desc == "" {
			desc = "Custom resource definition column (in JSONPath format): " + col.JSONPath
		}
		p.Columns = append(p.Columns, metav1.TableColumnDefinition{Name: col.Name, Type: col.Type, Format: col.Format, Description: desc, Priority: col.Priority})
	}
	p.Row = func(obj runtime.Object) []interface{} {
		u := content(obj)
		cells := []interface{}{obj.(*unstructured.Unstructured).GetName()}
		for i, jp := range paths {
			if jp == nil {
				cells = append(cells, nil)
				continue
			}
			results, err := jp.FindResults(u)
			if err != nil || len(results) == 0 || len(results[0]) == 0 {
				cells = append(cells, nil)
				continue
			}
			value := results[0][0].Interface()
			if cols[i].Type == "string" {
				var buf bytes.Buffer
				if err := jp.PrintResults(&buf, []reflect.Value{reflect.ValueOf(value)}); err == nil {
					cells = append(cells, buf.String())
				} else {
					cells = append(cells, nil)
				}
				continue
			}
			cells = append(cells, cell(cols[i].Type, value))
		}
		return cells
	}
	return p
}

func cell(typ string, value interface{}) interface{} {
	switch typ {
	case "integer":
		switch x := value.(type) {
		case int64:
			return x
		case float64:
			return int64(x)
		}
	case "number":
		switch x := value.(type) {
		case int64:
			return float64(x)
		case float64:
			return x
		}
	case "boolean":
		if b, ok := value.(bool); ok {
			return b
		}
	case "date":
		if str, ok := value.(string); ok {
			var t metav1.Time
			if err := t.UnmarshalQueryParameter(str); err != nil {
				return "<invalid>"
			}
			return registry.Age(t)
		}
	}
	return nil
}
