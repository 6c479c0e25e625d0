// Package openapi builds the apiserver's OpenAPI v2 and v3 documents from the Go types
// of the served resources, and serves them at /openapi/v2 and /openapi/v3 the way
// kubectl and client-go expect (content negotiation, the v3 index of hashed URLs,
// ETags and long-lived caching of hashed documents).
//
// Schemas are derived by reflection: JSON tags name the properties, omitempty makes a
// property optional, SwaggerDoc methods give the descriptions, the patchStrategy and
// patchMergeKey tags give the strategic-merge-patch extensions. What only the types'
// comments say (+optional/+required, +listType, +mapType, +enum, +default) comes from
// a table that go generate extracts from the API sources (internal/markergen). The
// documents are built once; only their serialized, gzip-compressed bytes are kept.
//
// Not described: enum value explanations in descriptions, +default=ref(...)
// defaults, and subresources the registry does not model (pods/log, exec, attach,
// portforward, proxy, binding, eviction, ephemeralcontainers, resize).
package openapi

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"

	"mizzen/internal/registry"
)

// infoTitle and infoVersion fill the documents' info object.
const (
	infoTitle   = "Kubernetes"
	infoVersion = "unversioned"
)

// Documents holds the serialized OpenAPI documents and serves them.
type Documents struct {
	v2      storedDoc
	v2Proto *protoDoc
	v3Index storedDoc
	// v3 maps a document's key ("apis/apps/v1", "api/v1", "apis", "version") to it.
	v3      map[string]storedDoc
	v3Proto map[string]*protoDoc
}

// Size is the number of bytes the documents hold (compressed), for memory
// accounting; it includes protobuf forms once clients have asked for them.
func (d *Documents) Size() int {
	held, _ := d.sizes()
	return held
}

// UncompressedSize is the total length of the documents as served.
func (d *Documents) UncompressedSize() int {
	_, served := d.sizes()
	return served
}

func (d *Documents) sizes() (held, served int) {
	add := func(h, s int) { held, served = held+h, served+s }
	add(len(d.v2.gz), d.v2.size)
	add(len(d.v3Index.gz), d.v3Index.size)
	add(d.v2Proto.sizes())
	for key, doc := range d.v3 {
		add(len(doc.gz), doc.size)
		add(d.v3Proto[key].sizes())
	}
	return held, served
}

// V3Keys lists the keys of the v3 documents ("api/v1", "apis/apps/v1", ...), sorted.
func (d *Documents) V3Keys() []string {
	keys := make([]string, 0, len(d.v3))
	for k := range d.v3 {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Build returns the OpenAPI documents for the given resources. extraTypes are values
// (or pointers to values) of further struct types whose definitions the v2 document
// should carry even if no operation refers to them.
func Build(resources []*registry.Resource, extraTypes ...any) (*Documents, error) {
	b, err := newBuilder(resources, extraTypes...)
	if err != nil {
		return nil, err
	}
	return b.serialize(time.Now())
}

// newBuilder derives the definitions and paths of the given resources.
func newBuilder(resources []*registry.Resource, extraTypes ...any) (*builder, error) {
	b := &builder{defs: newDefinitions(), gvks: map[string][]gvk{}, byGV: map[schema.GroupVersion][]*pathItem{}, v3Defs: map[string]json.RawMessage{}}
	if err := b.addResources(resources); err != nil {
		return nil, err
	}
	for _, t := range extraTypes {
		if _, err := b.defs.add(reflect.TypeOf(t)); err != nil {
			return nil, err
		}
	}
	for name, list := range b.gvks {
		b.defs.byName[name].GroupVersionKinds = list
	}
	return b, nil
}

// builder accumulates definitions and paths.
type builder struct {
	defs *definitions
	gvks map[string][]gvk // definition name -> x-kubernetes-group-version-kind
	byGV map[schema.GroupVersion][]*pathItem
	// v3Defs caches serialized v3 definitions, shared by the v3 documents.
	v3Defs map[string]json.RawMessage
	// misc holds the paths outside any group version: /api/, /apis/, /apis/<g>/, /version/.
	misc map[string][]*pathItem
}

func (b *builder) mustAdd(v any) string {
	name, err := b.defs.add(reflect.TypeOf(v))
	if err != nil {
		// Only called with apimachinery's own types, which are always describable.
		panic(err)
	}
	return name
}

func (b *builder) addGVK(name string, k gvk) {
	for _, have := range b.gvks[name] {
		if have == k {
			return
		}
	}
	b.gvks[name] = append(b.gvks[name], k)
}

func (b *builder) addResources(resources []*registry.Resource) error {
	q := newQueryParams()
	common := resourceNames{
		status:        b.mustAdd(metav1.Status{}),
		deleteOptions: b.mustAdd(metav1.DeleteOptions{}),
		watchEvent:    b.mustAdd(metav1.WatchEvent{}),
		patch:         b.mustAdd(metav1.Patch{}),
		resourceList:  b.mustAdd(metav1.APIResourceList{}),
	}
	b.addGVK(common.status, gvk{Version: "v1", Kind: "Status"})

	groups := map[string]bool{} // the named groups served
	for _, r := range resources {
		if r.New == nil {
			return fmt.Errorf("openapi: resource %s has no New function", r.GroupVersionResource())
		}
		gv := r.GroupVersion
		names := common
		var err error
		if r.OpenAPIModel != nil {
			names.object, names.list = b.addCustom(r)
		} else if names.object, err = b.defs.add(reflect.TypeOf(r.New())); err != nil {
			return fmt.Errorf("openapi: %s: %w", r.GroupVersionResource(), err)
		}
		b.addGVK(names.object, gvk{Group: gv.Group, Version: gv.Version, Kind: r.Kind})
		if r.OpenAPIModel != nil {
			b.addGVK(names.list, gvk{Group: gv.Group, Version: gv.Version, Kind: r.Kind + "List"})
		} else if r.NewList != nil {
			if names.list, err = b.defs.add(reflect.TypeOf(r.NewList())); err != nil {
				return fmt.Errorf("openapi: %s list: %w", r.GroupVersionResource(), err)
			}
			b.addGVK(names.list, gvk{Group: gv.Group, Version: gv.Version, Kind: r.Kind + "List"})
		}
		if r.Scale != nil {
			names.scale = b.mustAdd(autoscalingv1.Scale{})
			b.addGVK(names.scale, gvk{Group: "autoscaling", Version: "v1", Kind: "Scale"})
		}
		if _, seen := b.byGV[gv]; !seen {
			b.byGV[gv] = []*pathItem{resourcesPath(gv, common.resourceList)}
			if gv.Group != "" {
				groups[gv.Group] = true
			}
			b.addGVK(common.deleteOptions, gvk{Group: gv.Group, Version: gv.Version, Kind: "DeleteOptions"})
			b.addGVK(common.watchEvent, gvk{Group: gv.Group, Version: gv.Version, Kind: "WatchEvent"})
		}
		b.byGV[gv] = append(b.byGV[gv], resourcePaths(r, names, q)...)
	}
	b.addMiscPaths(groups)
	return nil
}

// addMiscPaths adds the discovery and version paths, each in its own v3 document as
// upstream serves them.
func (b *builder) addMiscPaths(groups map[string]bool) {
	get := func(path, id, tag, description, ref string) []*pathItem {
		return []*pathItem{{path: path, operations: []*operation{{
			method: "get", id: id, tags: []string{tag}, description: description,
			consumes: objectMediaTypes, produces: objectMediaTypes,
			responses: []response{{"200", "OK", ref}, {"401", "Unauthorized", ""}},
		}}}}
	}
	b.misc = map[string][]*pathItem{
		"api": get("/api/", "getCoreAPIVersions", "core", "get available API versions",
			b.mustAdd(metav1.APIVersions{})),
		"apis": get("/apis/", "getAPIVersions", "apis", "get available API versions",
			b.mustAdd(metav1.APIGroupList{})),
		"version": get("/version/", "getCodeVersion", "version", "get the version information for this server",
			b.mustAdd(version.Info{})),
	}
	group := b.mustAdd(metav1.APIGroup{})
	for g := range groups {
		id := "get" + operationPrefix(schema.GroupVersion{Group: g}) + "APIGroup"
		b.misc["apis/"+g] = get("/apis/"+g+"/", id, groupTag(g), "get information of a group", group)
	}
}

// serialize renders and marshals every document.
func (b *builder) serialize(now time.Time) (*Documents, error) {
	d := &Documents{v3: map[string]storedDoc{}, v3Proto: map[string]*protoDoc{}}

	all := map[string]any{}
	v3Docs := map[string][]*pathItem{}
	for gv, items := range b.byGV {
		v3Docs[apiPrefix(gv)] = items
	}
	for key, items := range b.misc {
		v3Docs[key] = items
	}
	params := sharedParams{}
	for _, items := range v3Docs {
		for _, item := range items {
			all[item.path] = item.renderV2(params)
		}
	}
	defsV2 := make(map[string]*jsonSchema, len(b.defs.byName))
	for name, def := range b.defs.byName {
		defsV2[name] = def.toV2()
	}
	v2, err := json.Marshal(map[string]any{
		"swagger":             "2.0",
		"info":                map[string]string{"title": infoTitle, "version": infoVersion},
		"paths":               all,
		"definitions":         defsV2,
		"parameters":          params,
		"securityDefinitions": map[string]any{"BearerToken": bearerToken},
		"security":            []map[string][]string{{"BearerToken": {}}},
	})
	if err != nil {
		return nil, fmt.Errorf("openapi: marshal v2: %w", err)
	}
	if d.v2, err = newStoredDoc(v2, "", now); err != nil {
		return nil, err
	}
	d.v2Proto = &protoDoc{source: d.v2, toPB: toProtoV2}

	index := map[string]map[string]string{}
	for key, items := range v3Docs {
		data, err := b.marshalV3(items)
		if err != nil {
			return nil, fmt.Errorf("openapi: marshal v3 %s: %w", key, err)
		}
		doc, err := newStoredDoc(data, "", now)
		if err != nil {
			return nil, err
		}
		d.v3[key] = doc
		d.v3Proto[key] = &protoDoc{source: doc, toPB: toProtoV3}
		index[key] = map[string]string{"serverRelativeURL": serverRelativeURL(key, doc.etag)}
	}
	indexData, err := json.Marshal(map[string]any{"paths": index})
	if err != nil {
		return nil, err
	}
	if d.v3Index, err = newStoredDoc(indexData, "", now); err != nil {
		return nil, err
	}
	return d, nil
}

var bearerToken = map[string]string{
	"type": "apiKey", "name": "authorization", "in": "header", "description": "Bearer Token authentication",
}

// v3Definition returns the serialized v3 form of a definition, marshalling it once
// however many documents carry it.
func (b *builder) v3Definition(name string) (json.RawMessage, error) {
	if raw, ok := b.v3Defs[name]; ok {
		return raw, nil
	}
	raw, err := json.Marshal(b.defs.byName[name].toV3())
	if err != nil {
		return nil, err
	}
	b.v3Defs[name] = raw
	return raw, nil
}

// marshalV3 renders one v3 document with the paths given and every definition they
// reach.
func (b *builder) marshalV3(items []*pathItem) ([]byte, error) {
	paths := map[string]any{}
	reached := map[string]bool{}
	var visit func(string)
	visit = func(name string) {
		if name == "" || reached[name] {
			return
		}
		reached[name] = true
		b.defs.byName[name].references(visit)
	}
	for _, item := range items {
		paths[item.path] = item.renderV3()
		for _, op := range item.operations {
			visit(op.bodyRef)
			for _, r := range op.responses {
				visit(r.refName)
			}
		}
	}
	schemas := make(map[string]json.RawMessage, len(reached))
	for name := range reached {
		raw, err := b.v3Definition(name)
		if err != nil {
			return nil, err
		}
		schemas[name] = raw
	}
	return json.Marshal(map[string]any{
		"openapi": "3.0.0",
		"info":    map[string]string{"title": infoTitle, "version": infoVersion},
		"paths":   paths,
		"components": map[string]any{
			"schemas":         schemas,
			"securitySchemes": map[string]any{"BearerToken": bearerToken},
		},
		"security": []map[string][]string{{"BearerToken": {}}},
	})
}
