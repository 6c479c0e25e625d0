package openapi

import (
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"mizzen/internal/registry"
)

// addCustom adds the definitions of a resource described by its OpenAPIModel (a
// custom resource) and of its list, and returns their names, as upstream names them
// (com.example.v1.Widget, com.example.v1.WidgetList).
func (b *builder) addCustom(r *registry.Resource) (object, list string) {
	parts := strings.Split(r.GroupVersion.Group, ".")
	for i, j := 0, len(parts)-1; i < j; i, j = i+1, j-1 {
		parts[i], parts[j] = parts[j], parts[i]
	}
	object = strings.Join(parts, ".") + "." + r.GroupVersion.Version + "." + r.Kind
	list = object + "List"
	meta := b.mustAdd(metav1.ObjectMeta{})
	listMeta := b.mustAdd(metav1.ListMeta{})
	def := fromSpec(r.OpenAPIModel)
	if def.Properties == nil {
		def.Properties = map[string]*jsonSchema{}
	}
	def.Type = "object"
	def.opaqueInV2 = def.PreserveUnknown
	def.Properties["metadata"] = &jsonSchema{refName: meta, Description: "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"}
	b.defs.byName[object] = def
	b.defs.byName[list] = &jsonSchema{
		Description: r.Kind + "List is a list of " + r.Kind,
		Type:        "object",
		Required:    []string{"items"},
		Properties: map[string]*jsonSchema{
			"apiVersion": {Type: "string", Description: def.Properties["apiVersion"].describe()},
			"kind":       {Type: "string", Description: def.Properties["kind"].describe()},
			"items":      {Type: "array", Description: "List of " + r.Resource + ". More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md", Items: &jsonSchema{refName: object}},
			"metadata":   {refName: listMeta, Description: "Standard list metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds"},
		},
	}
	return object, list
}

func (s *jsonSchema) describe() string {
	if s == nil {
		return ""
	}
	return s.Description
}

// fromSpec converts a kube-openapi schema into the documents' form: the structure,
// descriptions, types and formats, required fields, string enums, defaults, value
// limits (minimum, pattern, ...) and the Kubernetes extensions. Both documents carry
// the limits, as upstream's do; allOf, anyOf, oneOf and not are left out.
func fromSpec(in *spec.Schema) *jsonSchema {
	if in == nil {
		return nil
	}
	out := &jsonSchema{Description: in.Description, Format: in.Format, Required: in.Required}
	if len(in.Type) > 0 {
		out.Type = in.Type[0]
	}
	if ref := in.Ref.String(); ref != "" {
		out.refName = ref[strings.LastIndex(ref, "/")+1:]
	}
	for _, e := range in.Enum {
		if s, ok := e.(string); ok {
			out.Enum = append(out.Enum, s)
		}
	}
	out.zero = in.Default
	out.Pattern, out.Maximum, out.ExclusiveMaximum, out.Minimum, out.ExclusiveMinimum = in.Pattern, in.Maximum, in.ExclusiveMaximum, in.Minimum, in.ExclusiveMinimum
	out.MultipleOf, out.MaxLength, out.MinLength, out.MaxItems, out.MinItems = in.MultipleOf, in.MaxLength, in.MinLength, in.MaxItems, in.MinItems
	out.UniqueItems, out.MaxProperties, out.MinProperties, out.Nullable = in.UniqueItems, in.MaxProperties, in.MinProperties, in.Nullable
	if in.Items != nil && in.Items.Schema != nil {
		out.Items = fromSpec(in.Items.Schema)
	}
	if in.AdditionalProperties != nil && in.AdditionalProperties.Schema != nil {
		out.AdditionalProperties = fromSpec(in.AdditionalProperties.Schema)
	}
	if len(in.Properties) > 0 {
		out.Properties = make(map[string]*jsonSchema, len(in.Properties))
		for k, v := range in.Properties {
			v := v
			out.Properties[k] = fromSpec(&v)
		}
	}
	ext := in.Extensions
	if b, ok := ext.GetBool("x-kubernetes-preserve-unknown-fields"); ok && b {
		out.PreserveUnknown = true
	}
	if b, ok := ext.GetBool("x-kubernetes-embedded-resource"); ok && b {
		out.EmbeddedResource = true
	}
	if b, ok := ext.GetBool("x-kubernetes-int-or-string"); ok && b {
		out.IntOrString = true
		out.Type = ""
	}
	if s, ok := ext.GetString("x-kubernetes-list-type"); ok {
		out.ListType = s
	}
	if s, ok := ext.GetString("x-kubernetes-map-type"); ok {
		out.MapType = s
	}
	if keys, ok := ext.GetStringSlice("x-kubernetes-list-map-keys"); ok {
		out.ListMapKeys = keys
	}
	return out
}

// Dynamic serves the documents of the built-in resources and of the custom resources
// installed while the server runs; SetCustom rebuilds them in the background, one
// rebuild at a time, the last set of resources winning.
type Dynamic struct {
	builtin []*registry.Resource
	current atomic.Pointer[Documents]

	mu       sync.Mutex
	pending  []*registry.Resource
	dirty    bool
	building bool
	// rebuilt, when set, is called after each rebuild (tests wait on it).
	rebuilt func()
}

// NewDynamic builds the documents of the built-in resources.
func NewDynamic(builtin []*registry.Resource) (*Dynamic, error) {
	docs, err := Build(builtin)
	if err != nil {
		return nil, err
	}
	d := &Dynamic{builtin: builtin}
	d.current.Store(docs)
	return d, nil
}

// Current returns the documents served now.
func (d *Dynamic) Current() *Documents { return d.current.Load() }

// ServeHTTP serves the current documents.
func (d *Dynamic) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d.current.Load().ServeHTTP(w, r)
}

// SetCustom publishes the given custom resources besides the built-in ones.
func (d *Dynamic) SetCustom(custom []*registry.Resource) {
	d.mu.Lock()
	d.pending, d.dirty = custom, true
	if d.building {
		d.mu.Unlock()
		return
	}
	d.building = true
	d.mu.Unlock()
	go d.rebuild()
}

func (d *Dynamic) rebuild() {
	for {
		d.mu.Lock()
		if !d.dirty {
			d.building = false
			d.mu.Unlock()
			return
		}
		custom := d.pending
		d.dirty = false
		d.mu.Unlock()
		all := append(append([]*registry.Resource(nil), d.builtin...), custom...)
		docs, err := Build(all)
		if err != nil {
			slog.Error("openapi: building the documents with custom resources", "err", err)
			continue
		}
		d.current.Store(docs)
	}
}
