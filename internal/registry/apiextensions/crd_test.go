package apiextensions

import (
	"context"
	"reflect"
	"strings"
	"testing"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"
)

const validCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, kind: Widget, shortNames: [wd]}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
`

func crdOf(t *testing.T, doc string, edit func(*apiextv1.CustomResourceDefinition)) *apiextv1.CustomResourceDefinition {
	t.Helper()
	crd := &apiextv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict([]byte(doc), crd); err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(crd)
	}
	crdStrategy{}.Default(crd)
	return crd
}

func TestDefault(t *testing.T) {
	crd := crdOf(t, validCRD, nil)
	if crd.Spec.Names.Singular != "widget" || crd.Spec.Names.ListKind != "WidgetList" || crd.Spec.Conversion.Strategy != apiextv1.NoneConverter {
		t.Errorf("defaults: %+v %+v", crd.Spec.Names, crd.Spec.Conversion)
	}
	crdStrategy{}.PrepareForCreate(context.Background(), crd)
	if !reflect.DeepEqual(crd.Status.StoredVersions, []string{"v1"}) {
		t.Errorf("storedVersions %v", crd.Status.StoredVersions)
	}
}

func TestValidateCRD(t *testing.T) {
	schema := func(doc string) *apiextv1.CustomResourceValidation {
		s := &apiextv1.JSONSchemaProps{}
		if err := yaml.UnmarshalStrict([]byte(doc), s); err != nil {
			t.Fatal(err)
		}
		return &apiextv1.CustomResourceValidation{OpenAPIV3Schema: s}
	}
	tests := []struct {
		name string
		edit func(*apiextv1.CustomResourceDefinition)
		want []string
	}{
		{"valid", nil, nil},
		{"name", func(c *apiextv1.CustomResourceDefinition) { c.Name = "gadgets.example.com" },
			[]string{`metadata.name: Invalid value: "gadgets.example.com": must be spec.names.plural+"."+spec.group`}},
		{"group without a dot", func(c *apiextv1.CustomResourceDefinition) { c.Spec.Group = "example"; c.Name = "widgets.example" },
			[]string{`spec.group: Invalid value: "example": should be a domain with at least one dot`}},
		{"scope", func(c *apiextv1.CustomResourceDefinition) { c.Spec.Scope = "Everywhere" },
			[]string{`spec.scope: Unsupported value: "Everywhere": supported values: "Cluster", "Namespaced"`}},
		{"no storage version", func(c *apiextv1.CustomResourceDefinition) { c.Spec.Versions[0].Storage = false },
			[]string{`spec.versions: Invalid value: [{"name":"v1","served":true,"storage":false,`, `]: must have exactly one version marked as storage version`}},
		{"two storage versions", func(c *apiextv1.CustomResourceDefinition) {
			v2 := *c.Spec.Versions[0].DeepCopy()
			v2.Name = "v2"
			c.Spec.Versions = append(c.Spec.Versions, v2)
		}, []string{`must have exactly one version marked as storage version`}},
		{"duplicate versions", func(c *apiextv1.CustomResourceDefinition) {
			v := *c.Spec.Versions[0].DeepCopy()
			v.Storage = false
			c.Spec.Versions = append(c.Spec.Versions, v)
		}, []string{`must contain unique version names`}},
		{"no schema", func(c *apiextv1.CustomResourceDefinition) { c.Spec.Versions[0].Schema = nil },
			[]string{`spec.versions[0].schema.openAPIV3Schema: Required value`}},
		{"non-structural", func(c *apiextv1.CustomResourceDefinition) {
			c.Spec.Versions[0].Schema = schema("{type: object, properties: {spec: {properties: {a: {type: string}}}}}")
		}, []string{`spec.versions[0].schema.openAPIV3Schema.properties[spec].type: Required value: must not be empty for specified object fields`}},
		{"kind", func(c *apiextv1.CustomResourceDefinition) {
			c.Spec.Names.Kind = "Wid_get"
			c.Spec.Names.ListKind = "WidgetList"
		},
			[]string{`spec.names.kind: Invalid value: "Wid_get": may have mixed case, but should otherwise match: a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')`}},
		{"short name", func(c *apiextv1.CustomResourceDefinition) { c.Spec.Names.ShortNames = []string{"W D"} },
			[]string{`spec.names.shortNames[0]: Invalid value: "W D"`}},
		{"scale paths", func(c *apiextv1.CustomResourceDefinition) {
			c.Spec.Versions[0].Subresources = &apiextv1.CustomResourceSubresources{Scale: &apiextv1.CustomResourceSubresourceScale{SpecReplicasPath: ".status.replicas", StatusReplicasPath: ".status.replicas"}}
		}, []string{`spec.versions[0].subresources.scale.specReplicasPath: Invalid value: ".status.replicas": should be a json path under .spec`}},
		{"printer column type", func(c *apiextv1.CustomResourceDefinition) {
			c.Spec.Versions[0].AdditionalPrinterColumns = []apiextv1.CustomResourceColumnDefinition{{Name: "Size", Type: "int", JSONPath: ".spec.size"}}
		}, []string{`spec.versions[0].additionalPrinterColumns[0].type: Invalid value: "int": must be one of boolean,date,integer,number,string`}},
		{"selectable field type", func(c *apiextv1.CustomResourceDefinition) {
			c.Spec.Versions[0].SelectableFields = []apiextv1.SelectableField{{JSONPath: ".spec"}}
		}, []string{`spec.versions[0].selectableFields[0].jsonPath: Invalid value: ".spec": must point to a field of type string, boolean or integer. Enum string fields and strings with formats are allowed.`}},
		{"bad CEL rule", func(c *apiextv1.CustomResourceDefinition) {
			c.Spec.Versions[0].Schema.OpenAPIV3Schema.XValidations = apiextv1.ValidationRules{{Rule: "self.spec.size >"}}
		}, []string{`spec.versions[0].schema.openAPIV3Schema.x-kubernetes-validations[0].rule: Invalid value: `, "compilation failed"}},
		{"webhook conversion without config", func(c *apiextv1.CustomResourceDefinition) {
			c.Spec.Conversion = &apiextv1.CustomResourceConversion{Strategy: apiextv1.WebhookConverter}
		}, []string{`spec.conversion.webhook: Required value: required when strategy is set to Webhook`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := ValidateCRD(crdOf(t, validCRD, tt.edit))
			if tt.want == nil {
				if len(errs) > 0 {
					t.Fatalf("unexpected errors: %v", errs)
				}
				return
			}
			got := errs.ToAggregate()
			if got == nil {
				t.Fatalf("no errors, want %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(got.Error(), w) {
					t.Errorf("errors\n  %v\ndo not contain\n  %s", got, w)
				}
			}
		})
	}
}

func TestValidateUpdate(t *testing.T) {
	old := crdOf(t, validCRD, nil)
	crdStrategy{}.PrepareForCreate(context.Background(), old)
	updated := old.DeepCopy()
	updated.Spec.Names.Plural = "gadgets"
	updated.Name = "gadgets.example.com"
	errs := crdStrategy{}.ValidateUpdate(context.Background(), updated, old)
	if !containsPath(errs, "spec.names.plural") {
		t.Errorf("changing the plural: %v", errs)
	}
	// A new storage version is added to storedVersions; the old one must stay served.
	updated = old.DeepCopy()
	v2 := *updated.Spec.Versions[0].DeepCopy()
	v2.Name = "v2"
	updated.Spec.Versions[0].Storage = false
	updated.Spec.Versions = append(updated.Spec.Versions, v2)
	crdStrategy{}.PrepareForUpdate(context.Background(), updated, old)
	if !reflect.DeepEqual(updated.Status.StoredVersions, []string{"v1", "v2"}) {
		t.Errorf("storedVersions %v", updated.Status.StoredVersions)
	}
	if errs := (crdStrategy{}).ValidateUpdate(context.Background(), updated, old); len(errs) > 0 {
		t.Errorf("adding v2: %v", errs)
	}
	updated.Spec.Versions = updated.Spec.Versions[1:]
	errs = crdStrategy{}.ValidateUpdate(context.Background(), updated, old)
	if !strings.Contains(errs.ToAggregate().Error(), "missing from spec.versions; v1 was previously a storage version") {
		t.Errorf("dropping v1: %v", errs)
	}
}

func containsPath(errs field.ErrorList, path string) bool {
	for _, e := range errs {
		if e.Field == path {
			return true
		}
	}
	return false
}
