// Package openapi builds the apiserver's OpenAPI v2 and v3 documents from the Go types
// of the served resources, and serves them at /openapi/v2 and /openapi/v3 the way
// kubectl and client-go expect (content negotiation, the v3 index of hashed URLs,
// ETags and long-lived caching of hashed documents).
//
// Schemas are derived by reflection: JSON tags name the properties, omitempty makes a
// property optional, SwaggerDoc methods give the descriptions, the patchStrategy and
// patchMergeKey tags give the strategic-merge-patch extensions. The documents are built
// once; only their serialized bytes are kept.
package openapi

import (
	"crypto/sha512"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"time"

	openapiv2 "github.com/google/gnostic-models/openapiv2"
	"google.golang.org/protobuf/proto"
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
	v2      servedDoc
	v2Proto servedDoc
	v3Index servedDoc
	// v3 maps a document's key ("apis/apps/v1", "api/v1", "apis", "version") to it.
	v3 map[string]servedDoc
}

// servedDoc is one serialized document.
type servedDoc struct {
	data         []byte
	etag         string // upstream's form: the SHA-512 of the JSON bytes in upper-case hex
	lastModified time.Time
}

func newServedDoc(data []byte, etag string, now time.Time) servedDoc {
	if etag == "" {
		etag = fmt.Sprintf("%X", sha512.Sum512(data))
	}
	return servedDoc{data: data, etag: etag, lastModified: now}
}

// Size is the number of bytes the documents hold, for memory accounting.
func (d *Documents) Size() int {
	n := len(d.v2.data) + len(d.v2Proto.data) + len(d.v3Index.data)
	for _, doc := range d.v3 {
		n += len(doc.data)
	}
	return n
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
	b := &builder{defs: newDefinitions(), gvks: map[string][]gvk{}, byGV: map[schema.GroupVersion][]*pathItem{}}
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
	return b.serialize(time.Now())
}

// builder accumulates definitions and paths.
type builder struct {
	defs *definitions
	gvks map[string][]gvk // definition name -> x-kubernetes-group-version-kind
	byGV map[schema.GroupVersion][]*pathItem
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

	groups := map[string][]string{} // group -> versions, in order of first appearance
	for _, r := range resources {
		if r.New == nil {
			return fmt.Errorf("openapi: resource %s has no New function", r.GroupVersionResource())
		}
		gv := r.GroupVersion
		names := common
		var err error
		if names.object, err = b.defs.add(reflect.TypeOf(r.New())); err != nil {
			return fmt.Errorf("openapi: %s: %w", r.GroupVersionResource(), err)
		}
		b.addGVK(names.object, gvk{Group: gv.Group, Version: gv.Version, Kind: r.Kind})
		if r.NewList != nil {
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
			if gv.Group != "" && !contains(groups[gv.Group], gv.Version) {
				groups[gv.Group] = append(groups[gv.Group], gv.Version)
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
func (b *builder) addMiscPaths(groups map[string][]string) {
	get := func(path, id, tag, ref string) *pathItem {
		return &pathItem{path: path, operations: []*operation{{
			method: "get", id: id, tags: []string{tag}, consumes: objectMediaTypes, produces: objectMediaTypes,
			description: map[string]string{
				"version": "get the version information for this server",
				"core":    "get available API versions",
				"apis":    "get available API versions",
			}[tag],
			responses: []response{{"200", "OK", ref}, {"401", "Unauthorized", ""}},
		}}}
	}
	b.misc = map[string][]*pathItem{
		"api":     {get("/api/", "getCoreAPIVersions", "core", b.mustAdd(metav1.APIVersions{}))},
		"apis":    {get("/apis/", "getAPIVersions", "apis", b.mustAdd(metav1.APIGroupList{}))},
		"version": {get("/version/", "getCodeVersion", "version", b.mustAdd(version.Info{}))},
	}
	group := b.mustAdd(metav1.APIGroup{})
	for g := range groups {
		gv := schema.GroupVersion{Group: g}
		item := get("/apis/"+g+"/", "get"+operationPrefix(gv)+"APIGroup", groupTag(g), group)
		item.operations[0].description = "get information of a group"
		b.misc["apis/"+g] = []*pathItem{item}
	}
}

// serialize renders and marshals every document.
func (b *builder) serialize(now time.Time) (*Documents, error) {
	d := &Documents{v3: map[string]servedDoc{}}

	all := map[string]any{}
	v3Docs := map[string][]*pathItem{}
	for gv, items := range b.byGV {
		v3Docs[apiPrefix(gv)] = items
	}
	for key, items := range b.misc {
		v3Docs[key] = items
	}
	for _, items := range v3Docs {
		for _, item := range items {
			all[item.path] = item.renderV2()
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
		"securityDefinitions": map[string]any{"BearerToken": bearerToken},
		"security":            []map[string][]string{{"BearerToken": {}}},
	})
	if err != nil {
		return nil, fmt.Errorf("openapi: marshal v2: %w", err)
	}
	d.v2 = newServedDoc(v2, "", now)
	pb, err := toProtoV2(v2)
	if err != nil {
		return nil, err
	}
	// One ETag for both forms, as upstream: responses vary by Accept.
	d.v2Proto = newServedDoc(pb, d.v2.etag, now)

	index := map[string]map[string]string{}
	for key, items := range v3Docs {
		data, err := b.marshalV3(items)
		if err != nil {
			return nil, fmt.Errorf("openapi: marshal v3 %s: %w", key, err)
		}
		doc := newServedDoc(data, "", now)
		d.v3[key] = doc
		index[key] = map[string]string{"serverRelativeURL": serverRelativeURL(key, doc.etag)}
	}
	indexData, err := json.Marshal(map[string]any{"paths": index})
	if err != nil {
		return nil, err
	}
	d.v3Index = newServedDoc(indexData, "", now)
	return d, nil
}

// toProtoV2 converts the v2 JSON document to gnostic's protobuf form, which client-go's
// discovery client asks for.
func toProtoV2(jsonDoc []byte) ([]byte, error) {
	doc, err := openapiv2.ParseDocument(jsonDoc)
	if err != nil {
		return nil, fmt.Errorf("openapi: v2 document does not parse as OpenAPI v2: %w", err)
	}
	return proto.Marshal(doc)
}

var bearerToken = map[string]string{
	"type": "apiKey", "name": "authorization", "in": "header", "description": "Bearer Token authentication",
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
	schemas := make(map[string]*jsonSchema, len(reached))
	for name := range reached {
		schemas[name] = b.defs.byName[name].toV3()
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
