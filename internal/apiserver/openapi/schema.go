package openapi

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
)

// jsonSchema is one JSON schema as both documents write it. The exported fields are what
// is serialized; the unexported ones carry what differs between OpenAPI v2 and v3 and
// are applied by toV2 and toV3. Fields are declared in the order of their JSON names,
// so that the output reads alphabetically like upstream's.
type jsonSchema struct {
	Ref                  string                 `json:"$ref,omitempty"`
	AdditionalProperties *jsonSchema            `json:"additionalProperties,omitempty"`
	AllOf                []*jsonSchema          `json:"allOf,omitempty"`
	Default              any                    `json:"default,omitempty"`
	Description          string                 `json:"description,omitempty"`
	Enum                 []string               `json:"enum,omitempty"`
	Format               string                 `json:"format,omitempty"`
	Items                *jsonSchema            `json:"items,omitempty"`
	OneOf                []*jsonSchema          `json:"oneOf,omitempty"`
	Properties           map[string]*jsonSchema `json:"properties,omitempty"`
	Required             []string               `json:"required,omitempty"`
	Type                 string                 `json:"type,omitempty"`
	// Value limits, which only custom resources' schemas carry.
	Pattern           string   `json:"pattern,omitempty"`
	Maximum           *float64 `json:"maximum,omitempty"`
	ExclusiveMaximum  bool     `json:"exclusiveMaximum,omitempty"`
	Minimum           *float64 `json:"minimum,omitempty"`
	ExclusiveMinimum  bool     `json:"exclusiveMinimum,omitempty"`
	MultipleOf        *float64 `json:"multipleOf,omitempty"`
	MaxLength         *int64   `json:"maxLength,omitempty"`
	MinLength         *int64   `json:"minLength,omitempty"`
	MaxItems          *int64   `json:"maxItems,omitempty"`
	MinItems          *int64   `json:"minItems,omitempty"`
	UniqueItems       bool     `json:"uniqueItems,omitempty"`
	MaxProperties     *int64   `json:"maxProperties,omitempty"`
	MinProperties     *int64   `json:"minProperties,omitempty"`
	Nullable          bool     `json:"nullable,omitempty"`
	GroupVersionKinds []gvk    `json:"x-kubernetes-group-version-kind,omitempty"`
	ListMapKeys       []string `json:"x-kubernetes-list-map-keys,omitempty"`
	ListType          string   `json:"x-kubernetes-list-type,omitempty"`
	MapType           string   `json:"x-kubernetes-map-type,omitempty"`
	PatchMergeKey     string   `json:"x-kubernetes-patch-merge-key,omitempty"`
	PatchStrategy     string   `json:"x-kubernetes-patch-strategy,omitempty"`
	PreserveUnknown   bool     `json:"x-kubernetes-preserve-unknown-fields,omitempty"`
	EmbeddedResource  bool     `json:"x-kubernetes-embedded-resource,omitempty"`
	IntOrString       bool     `json:"x-kubernetes-int-or-string,omitempty"`

	// refName names the definition this schema refers to; Ref is derived from it.
	refName string
	// zero is the default the v3 document writes (see zeroDefault and +default);
	// v2 documents carry no defaults, as upstream prunes them.
	zero any
	// oneOfTypes replaces Type in v3 for types that accept several JSON types
	// (IntOrString, Quantity).
	oneOfTypes []string
	// opaqueInV2 marks a custom resource whose schema keeps unknown fields at its
	// root: the v2 document describes it as a bare object (kubectl's client-side
	// validation would otherwise refuse the unknown fields), as upstream does.
	opaqueInV2 bool
}

// gvk is the value of x-kubernetes-group-version-kind.
type gvk struct {
	Group   string `json:"group"`
	Kind    string `json:"kind"`
	Version string `json:"version"`
}

// The methods apimachinery's special types use to describe their JSON form.
type (
	openAPITyped      interface{ OpenAPISchemaType() []string }
	openAPIFormatted  interface{ OpenAPISchemaFormat() string }
	openAPIV3OneOf    interface{ OpenAPIV3OneOfTypes() []string }
	swaggerDocumented interface{ SwaggerDoc() map[string]string }
)

// typeDescription describes, in our own words, the apimachinery types whose Go
// definitions carry no SwaggerDoc.
func typeDescription(name string) string {
	switch name {
	case "io.k8s.apimachinery.pkg.apis.meta.v1.Time":
		return "Time is a timestamp in RFC 3339 form, at second precision, always written in UTC."
	case "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime":
		return "MicroTime is a timestamp in RFC 3339 form with microsecond precision."
	case "io.k8s.apimachinery.pkg.apis.meta.v1.Duration":
		return "Duration is a length of time written as a Go duration string such as \"1h30m\"."
	case "io.k8s.apimachinery.pkg.api.resource.Quantity":
		return "Quantity is a fixed-point amount written as a number with an optional suffix: a binary SI suffix (Ki, Mi, Gi, Ti, Pi, Ei), a decimal SI suffix (n, u, m, \"\", k, M, G, T, P, E) or a decimal exponent (e.g. 1e3). Examples: \"500m\" is half a unit, \"128Mi\" is 128 * 2^20."
	case "io.k8s.apimachinery.pkg.util.intstr.IntOrString":
		return "IntOrString holds either a 32-bit integer or a string; in JSON it is written as whichever of the two it holds."
	case "io.k8s.apimachinery.pkg.runtime.RawExtension":
		return "RawExtension holds an embedded object in its serialized form, usually a complete object with its own apiVersion and kind."
	case "io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent":
		return "Event represents a single event to a watched resource."
	}
	return ""
}

// definitions derives named schemas from Go types by reflection.
type definitions struct {
	byName map[string]*jsonSchema
	byType map[reflect.Type]string
}

func newDefinitions() *definitions {
	return &definitions{byName: map[string]*jsonSchema{}, byType: map[reflect.Type]string{}}
}

// definitionName is upstream's name for a Go type: the package path with its domain
// reversed and slashes turned into dots, then the type name
// (k8s.io/api/apps/v1.Deployment -> io.k8s.api.apps.v1.Deployment).
func definitionName(t reflect.Type) string {
	pkg := t.PkgPath()
	if i := strings.LastIndex(pkg, "/vendor/"); i >= 0 {
		pkg = pkg[i+len("/vendor/"):]
	}
	head, rest, _ := strings.Cut(pkg, "/")
	parts := strings.Split(head, ".")
	for i, j := 0, len(parts)-1; i < j; i, j = i+1, j-1 {
		parts[i], parts[j] = parts[j], parts[i]
	}
	name := strings.Join(parts, ".")
	if rest != "" {
		name += "." + strings.ReplaceAll(rest, "/", ".")
	}
	return name + "." + t.Name()
}

// add ensures a definition exists for the struct type t (a pointer is dereferenced)
// and returns its name.
func (d *definitions) add(t reflect.Type) (string, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if name, ok := d.byType[t]; ok {
		return name, nil
	}
	if t.Kind() != reflect.Struct || t.Name() == "" {
		return "", fmt.Errorf("openapi: %v is not a named struct type", t)
	}
	name := definitionName(t)
	d.byType[t] = name
	def := &jsonSchema{Description: typeDescription(name)}
	d.byName[name] = def

	zero := reflect.Zero(t).Interface()
	if typed, ok := zero.(openAPITyped); ok {
		if types := typed.OpenAPISchemaType(); len(types) > 0 {
			def.Type = types[0]
		}
		if f, ok := zero.(openAPIFormatted); ok {
			def.Format = f.OpenAPISchemaFormat()
		}
		if o, ok := zero.(openAPIV3OneOf); ok {
			def.oneOfTypes = o.OpenAPIV3OneOfTypes()
		}
		return name, nil
	}

	def.Type = "object"
	if m, ok := markedType(goName(t)); ok {
		def.MapType = m.mapType
	}
	if doc, ok := zero.(swaggerDocumented); ok {
		if s := doc.SwaggerDoc()[""]; s != "" {
			def.Description = s
		}
	}
	// Required keeps the fields' declaration order, as upstream writes it.
	if err := d.addFields(def, t); err != nil {
		return "", err
	}
	return name, nil
}

func derefType(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// goName names a Go type by package path and name, as markedType and enumValues
// look types up.
func goName(t reflect.Type) string {
	return t.PkgPath() + "." + t.Name()
}

// addFields adds the JSON fields of struct t to def, descending into inlined
// embedded structs (TypeMeta) with their own descriptions.
func (d *definitions) addFields(def *jsonSchema, t reflect.Type) error {
	var docs map[string]string
	if doc, ok := reflect.Zero(t).Interface().(swaggerDocumented); ok {
		docs = doc.SwaggerDoc()
	}
	marks, _ := markedType(goName(t))
	markersDecide := hasMarkerData(t.PkgPath())
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag, hasTag := f.Tag.Lookup("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" && opts == "" {
			continue
		}
		if f.Anonymous && (name == "" || strings.Contains(","+opts+",", ",inline,")) {
			et := f.Type
			for et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				if err := d.addFields(def, et); err != nil {
					return err
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if !hasTag || name == "" {
			name = f.Name
		}
		omitEmpty := strings.Contains(","+opts+",", ",omitempty,") || strings.Contains(","+opts+",", ",omitzero,")

		prop, err := d.schemaFor(f.Type)
		if err != nil {
			return fmt.Errorf("%s.%s: %w", t, f.Name, err)
		}
		fm := marks.fields[name]
		prop.Description = docs[name]
		if values := enumValues(goName(derefType(f.Type))); len(values) > 0 {
			// As upstream, only a field of an enum type itself, not a list of them.
			prop.Enum = values
			prop.Description = describeEnum(prop.Description, values)
		}
		prop.zero = zeroDefault(f.Type, omitEmpty)
		if fm.defaultJSON != "" {
			if err := json.Unmarshal([]byte(fm.defaultJSON), &prop.zero); err != nil {
				return fmt.Errorf("%s.%s: default %s: %w", t, f.Name, fm.defaultJSON, err)
			}
		}
		applyPatchTags(prop, f.Tag, !markersDecide)
		if fm.listType != "" {
			prop.ListType, prop.ListMapKeys = fm.listType, fm.listMapKeys
		}
		prop.MapType = fm.mapType
		if def.Properties == nil {
			def.Properties = map[string]*jsonSchema{}
		}
		def.Properties[name] = prop
		// upstream's rule: +required and +optional decide, else omitempty does.
		if fm.required || (!omitEmpty && !fm.optional) {
			def.Required = append(def.Required, name)
		}
	}
	return nil
}

// applyPatchTags turns the patchStrategy and patchMergeKey struct tags into their
// OpenAPI extensions. With deriveListType, for types whose +listType comments are
// unknown, it also derives the list type the tags imply: a list merged by key is a
// map list keyed by it, a merged list of scalars is a set.
func applyPatchTags(s *jsonSchema, tag reflect.StructTag, deriveListType bool) {
	strategy := tag.Get("patchStrategy")
	key := tag.Get("patchMergeKey")
	s.PatchStrategy = strategy
	s.PatchMergeKey = key
	if s.Type != "array" || !deriveListType {
		return
	}
	merges := false
	for _, part := range strings.Split(strategy, ",") {
		merges = merges || part == "merge"
	}
	switch {
	case merges && key != "":
		s.ListType = "map"
		s.ListMapKeys = []string{key}
	case merges && isScalar(s.Items):
		s.ListType = "set"
	}
}

func isScalar(s *jsonSchema) bool {
	return s != nil && s.refName == "" && s.Type != "" && s.Type != "object" && s.Type != "array"
}

// schemaFor returns the schema of a value of type t: a reference for named structs,
// an inline schema otherwise.
func (d *definitions) schemaFor(t reflect.Type) (*jsonSchema, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		name, err := d.add(t)
		if err != nil {
			return nil, err
		}
		return &jsonSchema{refName: name}, nil
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return &jsonSchema{Type: "string", Format: "byte"}, nil
		}
		items, err := d.schemaFor(t.Elem())
		if err != nil {
			return nil, err
		}
		items.zero = zeroDefault(t.Elem(), false)
		return &jsonSchema{Type: "array", Items: items}, nil
	case reflect.Map:
		values, err := d.schemaFor(t.Elem())
		if err != nil {
			return nil, err
		}
		values.zero = zeroDefault(t.Elem(), false)
		return &jsonSchema{Type: "object", AdditionalProperties: values}, nil
	case reflect.Interface:
		return &jsonSchema{Type: "object"}, nil
	}
	typ, format := scalarType(t.Kind())
	if typ == "" {
		return nil, fmt.Errorf("openapi: cannot describe Go type %v", t)
	}
	return &jsonSchema{Type: typ, Format: format}, nil
}

// scalarType maps a Go kind to an OpenAPI type and format, as openapi-gen does.
func scalarType(k reflect.Kind) (typ, format string) {
	switch k {
	case reflect.String:
		return "string", ""
	case reflect.Bool:
		return "boolean", ""
	case reflect.Int, reflect.Int32, reflect.Int16, reflect.Int8,
		reflect.Uint, reflect.Uint32, reflect.Uint16, reflect.Uint8:
		return "integer", "int32"
	case reflect.Int64, reflect.Uint64:
		return "integer", "int64"
	case reflect.Float32:
		return "number", "float"
	case reflect.Float64:
		return "number", "double"
	}
	return "", ""
}

// zeroDefault is the default a v3 document writes for a value of type t, as
// upstream's generator enforces it: {} for a plain struct, the zero value for a
// scalar that is always serialized, and none for pointers, collections and types
// that unmarshal themselves.
func zeroDefault(t reflect.Type, omitEmpty bool) any {
	// Types that decode themselves take null for their zero value.
	if reflect.PointerTo(t).Implements(reflect.TypeFor[json.Unmarshaler]()) {
		return nil
	}
	switch t.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Array, reflect.Interface:
		return nil
	case reflect.Struct:
		return map[string]any{}
	}
	if omitEmpty {
		return nil
	}
	switch typ, _ := scalarType(t.Kind()); typ {
	case "string":
		return ""
	case "boolean":
		return false
	case "integer", "number":
		return 0
	}
	return nil
}

// references returns the names of the definitions s refers to directly.
func (s *jsonSchema) references(visit func(string)) {
	if s == nil {
		return
	}
	if s.refName != "" {
		visit(s.refName)
	}
	s.Items.references(visit)
	s.AdditionalProperties.references(visit)
	for _, p := range s.Properties {
		p.references(visit)
	}
}

// toV2 renders s as OpenAPI v2 writes it: plain $ref siblings, no defaults.
func (s *jsonSchema) toV2() *jsonSchema {
	if s == nil {
		return nil
	}
	if s.opaqueInV2 {
		return &jsonSchema{Type: "object", GroupVersionKinds: s.GroupVersionKinds}
	}
	out := *s
	out.zero, out.oneOfTypes = nil, nil
	if s.refName != "" {
		out.Ref = "#/definitions/" + s.refName
	}
	// v2 has no nullable, and kubectl mishandles a node whose unknown fields are
	// kept, or which embeds a resource, if it has a type, items or properties: such
	// nodes lose them, as upstream's v2 conversion of custom resource schemas does.
	if s.Nullable || s.PreserveUnknown || s.EmbeddedResource {
		out.Type, out.Items, out.Properties = "", nil, nil
		out.Nullable, out.PreserveUnknown = false, false
		return &out
	}
	out.Items = s.Items.toV2()
	out.AdditionalProperties = s.AdditionalProperties.toV2()
	out.Properties = mapSchemas(s.Properties, (*jsonSchema).toV2)
	return &out
}

// toV3 renders s as OpenAPI v3 writes it: a reference with siblings is wrapped in
// allOf, defaults are written, and multi-typed values use oneOf.
func (s *jsonSchema) toV3() *jsonSchema {
	if s == nil {
		return nil
	}
	out := *s
	out.zero, out.oneOfTypes = nil, nil
	out.Default = s.zero
	if s.refName != "" {
		ref := &jsonSchema{Ref: "#/components/schemas/" + s.refName}
		if out.Description != "" || out.Default != nil {
			out.AllOf = []*jsonSchema{ref}
		} else {
			out.Ref = ref.Ref
		}
	}
	if len(s.oneOfTypes) > 0 {
		out.Type = ""
		for _, t := range s.oneOfTypes {
			out.OneOf = append(out.OneOf, &jsonSchema{Type: t})
		}
	}
	out.Items = s.Items.toV3()
	out.AdditionalProperties = s.AdditionalProperties.toV3()
	out.Properties = mapSchemas(s.Properties, (*jsonSchema).toV3)
	return &out
}

func mapSchemas(in map[string]*jsonSchema, f func(*jsonSchema) *jsonSchema) map[string]*jsonSchema {
	if in == nil {
		return nil
	}
	out := make(map[string]*jsonSchema, len(in))
	for k, v := range in {
		out[k] = f(v)
	}
	return out
}
