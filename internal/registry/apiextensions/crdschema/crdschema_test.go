package crdschema

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"
)

func schemaOf(t testing.TB, doc string) *apiextv1.JSONSchemaProps {
	t.Helper()
	s := &apiextv1.JSONSchemaProps{}
	if err := yaml.UnmarshalStrict([]byte(doc), s); err != nil {
		t.Fatalf("schema: %v", err)
	}
	return s
}

func objectOf(t testing.TB, doc string) map[string]interface{} {
	t.Helper()
	var obj map[string]interface{}
	if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
		t.Fatalf("object: %v", err)
	}
	// The server decodes JSON numbers as int64 or float64, as unstructured does.
	data, _ := json.Marshal(obj)
	out, err := decodeJSON(data)
	if err != nil {
		t.Fatalf("object: %v", err)
	}
	return out.(map[string]interface{})
}

func messages(errs field.ErrorList) []string {
	out := []string{}
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

func TestValidateStructural(t *testing.T) {
	path := field.NewPath("spec", "versions").Index(0).Child("schema", "openAPIV3Schema")
	tests := []struct {
		name   string
		schema string
		want   []string
	}{
		{"structural", `
type: object
properties:
  spec:
    type: object
    properties:
      replicas: {type: integer}
      port:
        x-kubernetes-int-or-string: true
        anyOf: [{type: integer}, {type: string}]
      extra:
        type: object
        x-kubernetes-preserve-unknown-fields: true
`, []string{}},
		{"missing type of a field", `
type: object
properties:
  spec:
    properties:
      a: {type: string}
`, []string{`spec.versions[0].schema.openAPIV3Schema.properties[spec].type: Required value: must not be empty for specified object fields`}},
		{"missing root type", `
properties:
  spec: {type: object}
`, []string{`spec.versions[0].schema.openAPIV3Schema.type: Required value: must not be empty at the root`}},
		{"root not an object", `type: string`, []string{`spec.versions[0].schema.openAPIV3Schema.type: Invalid value: "string": must be object at the root`}},
		{"array without items", `
type: object
properties:
  list: {type: array}
`, []string{`spec.versions[0].schema.openAPIV3Schema.properties[list].items: Required value: must be specified`}},
		{"items without type", `
type: object
properties:
  list:
    type: array
    items: {minLength: 1}
`, []string{`spec.versions[0].schema.openAPIV3Schema.properties[list].items.type: Required value: must not be empty for specified array items`}},
		{"type in a junctor", `
type: object
properties:
  a:
    type: string
    anyOf:
    - type: string
`, []string{`spec.versions[0].schema.openAPIV3Schema.properties[a].anyOf[0].type: Forbidden: must be empty to be structural`}},
		{"junctor property missing from the structure", `
type: object
properties:
  a: {type: string}
allOf:
- properties:
    b: {minLength: 1}
`, []string{`spec.versions[0].schema.openAPIV3Schema.properties[b]: Required value: because it is defined in spec.versions[0].schema.openAPIV3Schema.allOf[0].properties[b]`}},
		{"metadata beyond name", `
type: object
properties:
  metadata:
    type: object
    properties:
      labels: {type: object}
`, []string{`spec.versions[0].schema.openAPIV3Schema.properties[metadata]: Forbidden: must not specify anything other than name and generateName, but metadata is implicitly specified`}},
		{"additionalProperties at the root", `
type: object
additionalProperties: {type: string}
`, []string{`spec.versions[0].schema.openAPIV3Schema.additionalProperties: Forbidden: must not be used at the root`}},
		{"embedded resource not an object", `
type: object
properties:
  template:
    x-kubernetes-embedded-resource: true
    x-kubernetes-preserve-unknown-fields: true
`, []string{`spec.versions[0].schema.openAPIV3Schema.properties[template].type: Required value: must be object if x-kubernetes-embedded-resource is true`}},
		{"bad pattern", `
type: object
properties:
  a: {type: string, pattern: "["}
`, []string{"spec.versions[0].schema.openAPIV3Schema.properties[a].pattern: Invalid value: \"[\": must be a valid regular expression, but isn't: error parsing regexp: missing closing ]: `[`"}},
		{"preserve false", `
type: object
x-kubernetes-preserve-unknown-fields: false
`, []string{`spec.versions[0].schema.openAPIV3Schema.x-kubernetes-preserve-unknown-fields: Invalid value: false: must be true or undefined`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := messages(ValidateStructural(path, schemaOf(t, tt.schema)))
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got\n  %q\nwant\n  %q", got, tt.want)
			}
		})
	}
}

const widgetSchema = `
type: object
properties:
  apiVersion: {type: string}
  kind: {type: string}
  metadata: {type: object}
  spec:
    type: object
    required: [size]
    properties:
      size: {type: integer, minimum: 1, maximum: 10}
      color: {type: string, enum: [red, green]}
      name: {type: string, pattern: '^[a-z]+$', maxLength: 5, minLength: 2}
      tags: {type: array, maxItems: 2, minItems: 1, items: {type: string}}
      labels: {type: object, maxProperties: 1, additionalProperties: {type: string}}
      ratio: {type: number, nullable: true}
      when: {type: string, format: date-time}
      port:
        x-kubernetes-int-or-string: true
        anyOf: [{type: integer}, {type: string}]
      shape:
        type: object
        properties:
          a: {type: string}
          b: {type: string}
        oneOf:
        - required: [a]
        - required: [b]
      notEmpty:
        type: string
        not: {enum: [""]}
`

func TestValidate(t *testing.T) {
	v, err := NewValidator(schemaOf(t, widgetSchema))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		spec string
		want []string
	}{
		{"valid", `{size: 3, color: red, name: abc, tags: [x], port: 80, ratio: null}`, []string{}},
		{"int-or-string as string", `{size: 3, port: https}`, []string{}},
		{"required", `{color: red}`, []string{`spec.size: Required value`}},
		{"type", `{size: "three"}`, []string{`spec.size: Invalid value: "string": spec.size in body must be of type integer: "string"`}},
		{"enum", `{size: 1, color: blue}`, []string{`spec.color: Unsupported value: "blue": supported values: "red", "green"`}},
		{"maximum", `{size: 11}`, []string{`spec.size: Invalid value: 11: spec.size in body should be less than or equal to 10`}},
		{"minimum", `{size: 0}`, []string{`spec.size: Invalid value: 0: spec.size in body should be greater than or equal to 1`}},
		{"pattern", `{size: 1, name: ABC}`, []string{`spec.name: Invalid value: "ABC": spec.name in body should match '^[a-z]+$'`}},
		{"maxLength", `{size: 1, name: abcdef}`, []string{`spec.name: Too long: may not be more than 5 bytes`}},
		{"minLength", `{size: 1, name: a}`, []string{`spec.name: Invalid value: "a": spec.name in body should be at least 2 chars long`}},
		{"maxItems", `{size: 1, tags: [a, b, c]}`, []string{`spec.tags: Too many: 3: must have at most 2 items`}},
		{"minItems", `{size: 1, tags: []}`, []string{`spec.tags: Invalid value: 0: spec.tags in body should have at least 1 items`}},
		{"maxProperties", `{size: 1, labels: {a: p, b: q}}`, []string{`spec.labels: Too many: 2: must have at most 1 item`}},
		{"not nullable", `{size: 1, name: null}`, []string{`spec.name: Invalid value: "null": spec.name in body must be of type string: "null"`}},
		{"format", `{size: 1, when: yesterday}`, []string{`spec.when: Invalid value: "yesterday": spec.when in body must be of type date-time: "yesterday"`}},
		{"oneOf", `{size: 1, shape: {a: p, b: q}}`, []string{`<nil>: Invalid value: "": "spec.shape" must validate one and only one schema (oneOf). Found 2 valid alternatives`}},
		{"not", `{size: 1, notEmpty: ""}`, []string{`<nil>: Invalid value: "": "spec.notEmpty" must not validate the schema (not)`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := objectOf(t, "apiVersion: example.com/v1\nkind: Widget\nspec: "+tt.spec)
			got := messages(v.Validate(obj))
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got\n  %q\nwant\n  %q", got, tt.want)
			}
		})
	}
}

func TestPrune(t *testing.T) {
	s := schemaOf(t, `
type: object
properties:
  spec:
    type: object
    properties:
      known: {type: string}
      list:
        type: array
        items:
          type: object
          properties:
            a: {type: string}
      free:
        type: object
        x-kubernetes-preserve-unknown-fields: true
        properties:
          typed:
            type: object
            properties:
              x: {type: string}
      map:
        type: object
        additionalProperties:
          type: object
          properties:
            v: {type: string}
      template:
        type: object
        x-kubernetes-embedded-resource: true
        properties:
          spec: {type: object, properties: {x: {type: string}}}
`)
	obj := objectOf(t, `
apiVersion: example.com/v1
kind: Widget
metadata: {name: w}
spec:
  known: k
  unknown: u
  list: [{a: x, b: y}]
  free: {anything: 1, typed: {x: "1", z: 2}}
  map: {k1: {v: a, w: b}}
  template: {apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {x: a, z: b}, other: 1}
status: {ready: true}
`)
	pruned := Prune(obj, s)
	want := []string{"spec.free.typed.z", "spec.list[0].b", "spec.map.k1.w", "spec.template.other", "spec.template.spec.z", "spec.unknown", "status"}
	if !reflect.DeepEqual(pruned, want) {
		t.Errorf("pruned %q, want %q", pruned, want)
	}
	got, _ := json.Marshal(obj)
	const wantObj = `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"free":{"anything":1,"typed":{"x":"1"}},"known":"k","list":[{"a":"x"}],"map":{"k1":{"v":"a"}},"template":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"x":"a"}}}}`
	if string(got) != wantObj {
		t.Errorf("after pruning:\n  %s\nwant\n  %s", got, wantObj)
	}
}

func TestDefault(t *testing.T) {
	s := schemaOf(t, `
type: object
properties:
  spec:
    type: object
    default: {}
    properties:
      replicas: {type: integer, default: 1}
      mode: {type: string, default: fast}
      nullable: {type: string, nullable: true, default: x}
      dropped: {type: string}
      items:
        type: array
        items:
          type: object
          properties:
            port: {type: integer, default: 80}
`)
	tests := []struct{ in, want string }{
		{`{}`, `{"spec":{"mode":"fast","nullable":"x","replicas":1}}`},
		{`{spec: {replicas: 3}}`, `{"spec":{"mode":"fast","nullable":"x","replicas":3}}`},
		{`{spec: {mode: null, dropped: null, nullable: null}}`, `{"spec":{"mode":"fast","nullable":null,"replicas":1}}`},
		{`{spec: {items: [{}, {port: 8080}]}}`, `{"spec":{"items":[{"port":80},{"port":8080}],"mode":"fast","nullable":"x","replicas":1}}`},
	}
	for _, tt := range tests {
		obj := objectOf(t, tt.in)
		Default(obj, s)
		got, _ := json.Marshal(obj)
		if string(got) != tt.want {
			t.Errorf("Default(%s) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

func TestValidateDefaults(t *testing.T) {
	s := schemaOf(t, `
type: object
properties:
  spec:
    type: object
    properties:
      replicas: {type: integer, minimum: 1, default: 0}
      mode: {type: string, default: 3}
      obj: {type: object, properties: {a: {type: string}}, default: {b: x}}
`)
	got := messages(ValidateDefaults(field.NewPath("schema"), s))
	want := []string{
		`schema.properties[spec].properties[mode].default: Invalid value: "integer": schema.properties[spec].properties[mode].default in body must be of type string: "integer"`,
		`schema.properties[spec].properties[obj].default: Invalid value: {"b":"x"}: must not have unknown fields`,
		`schema.properties[spec].properties[replicas].default: Invalid value: 0: schema.properties[spec].properties[replicas].default in body should be greater than or equal to 1`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got\n  %q\nwant\n  %q", got, want)
	}
}

func TestRules(t *testing.T) {
	s := schemaOf(t, `
type: object
properties:
  spec:
    type: object
    x-kubernetes-validations:
    - rule: self.min <= self.max
      message: min must not exceed max
    - rule: self.max == oldSelf.max || self.max > oldSelf.max
      message: max may only grow
    - rule: size(self.name) > 0
      messageExpression: "'name of ' + string(self.max) + ' is empty'"
      fieldPath: .name
      reason: FieldValueRequired
    properties:
      min: {type: integer}
      max: {type: integer}
      name: {type: string}
      ratio:
        type: number
        x-kubernetes-validations:
        - rule: self * 2.0 <= 3.0 && self > 0
          message: ratio out of range
      immutable:
        type: string
        x-kubernetes-validations:
        - rule: self == oldSelf
          message: is immutable
`)
	if errs := ValidateRules(field.NewPath("schema"), s); len(errs) > 0 {
		t.Fatalf("rules do not compile: %v", errs)
	}
	rules := NewRules(s)
	tests := []struct {
		name, obj, old string
		want           []string
	}{
		{"valid create", `{spec: {min: 1, max: 2, name: a, immutable: x}}`, ``, []string{}},
		{"a whole number in a number field is a double", `{spec: {min: 1, max: 2, name: a, ratio: 1}}`, ``, []string{}},
		{"number rule fails", `{spec: {min: 1, max: 2, name: a, ratio: 2}}`, ``, []string{`spec.ratio: Invalid value: "number": ratio out of range`}},
		{"rule fails", `{spec: {min: 3, max: 2, name: a}}`, ``, []string{`spec: Invalid value: "object": min must not exceed max`}},
		{"message expression and field path", `{spec: {min: 1, max: 2, name: ""}}`, ``, []string{`spec.name: Required value: name of 2 is empty`}},
		{"transition rule", `{spec: {min: 1, max: 2, name: a}}`, `{spec: {min: 1, max: 5, name: a}}`, []string{`spec: Invalid value: "object": max may only grow`}},
		{"immutable", `{spec: {min: 1, max: 2, name: a, immutable: y}}`, `{spec: {min: 1, max: 2, name: a, immutable: x}}`, []string{`spec.immutable: Invalid value: "string": is immutable`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var old map[string]interface{}
			if tt.old != "" {
				old = objectOf(t, tt.old)
			}
			got := messages(rules.Validate(objectOf(t, tt.obj), old))
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got\n  %q\nwant\n  %q", got, tt.want)
			}
		})
	}
}

func TestValidateRulesRefusesBadRules(t *testing.T) {
	s := schemaOf(t, `
type: object
x-kubernetes-validations:
- rule: "self.a +"
- rule: ""
- rule: "true"
  message: "two\nlines"
`)
	got := messages(ValidateRules(field.NewPath("schema"), s))
	if len(got) != 3 || !strings.Contains(got[0], "compilation failed") || !strings.Contains(got[1], "rule is not specified") || !strings.Contains(got[2], "must not contain line breaks") {
		t.Errorf("got %q", got)
	}
}

func TestValidateEmbedded(t *testing.T) {
	s := schemaOf(t, `
type: object
properties:
  spec:
    type: object
    properties:
      template:
        type: object
        x-kubernetes-embedded-resource: true
        x-kubernetes-preserve-unknown-fields: true
`)
	tests := []struct {
		obj  string
		want []string
	}{
		{`{spec: {template: {apiVersion: v1, kind: Pod, metadata: {labels: {app: web}}}}}`, []string{}},
		{`{spec: {template: {metadata: {name: ok}}}}`, []string{"spec.template.kind: Required value: must not be empty", "spec.template.apiVersion: Required value: must not be empty"}},
		{`{spec: {template: {apiVersion: apps/v1, kind: Deployment, metadata: {name: Bad_Name}}}}`, []string{`spec.template.metadata.name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`}},
	}
	for _, tt := range tests {
		got := messages(ValidateEmbedded(objectOf(t, tt.obj), s))
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s:\n got  %q\n want %q", tt.obj, got, tt.want)
		}
	}
}

func TestKubernetesLibrary(t *testing.T) {
	s := schemaOf(t, `
type: object
properties:
  spec:
    type: object
    properties:
      ports: {type: array, items: {type: integer}}
      host: {type: string}
    x-kubernetes-validations:
    - rule: self.ports.isSorted() && self.ports.sum() < 100 && self.ports.min() > 0 && self.ports.max() < 50 && self.ports.indexOf(20) == 1 && self.ports.lastIndexOf(30) == 2
      message: ports
    - rule: self.host.find('[0-9]+') == '42' && self.host.findAll('[a-z]+') == ['web', 'example']
      message: host
`)
	if errs := ValidateRules(field.NewPath("schema"), s); len(errs) > 0 {
		t.Fatalf("rules do not compile: %v", errs)
	}
	rules := NewRules(s)
	if errs := rules.Validate(objectOf(t, `{spec: {ports: [10, 20, 30], host: web42.example}}`), nil); len(errs) > 0 {
		t.Errorf("valid: %v", errs)
	}
	got := messages(rules.Validate(objectOf(t, `{spec: {ports: [20, 10], host: x}}`), nil))
	want := []string{`spec: Invalid value: "object": ports`, `spec: Invalid value: "object": host`}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}
