package openapi

import (
	"reflect"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"mizzen/internal/registry"
)

// Media types the server reads and writes, as the operations list them.
var (
	objectMediaTypes = []string{"application/json", "application/yaml", "application/vnd.kubernetes.protobuf", "application/cbor"}
	watchMediaTypes  = []string{"application/json", "application/yaml", "application/vnd.kubernetes.protobuf", "application/cbor",
		"application/json;stream=watch", "application/vnd.kubernetes.protobuf;stream=watch", "application/cbor-seq"}
	patchMediaTypes = []string{"application/json-patch+json", "application/merge-patch+json",
		"application/strategic-merge-patch+json", "application/apply-patch+yaml", "application/apply-patch+cbor"}
	anyMediaType = []string{"*/*"}
)

// parameter is one operation or path parameter.
type parameter struct {
	name        string
	in          string // "query" or "path"
	typ         string // "string", "integer" or "boolean"
	description string
	required    bool
}

// response is one response of an operation; refName is empty for a bodiless one.
type response struct {
	code        string
	description string
	refName     string
}

// operation is one HTTP method on one path.
type operation struct {
	method      string
	description string
	id          string
	tags        []string
	action      string // x-kubernetes-action
	gvk         *gvk
	params      []parameter
	bodyRef     string // definition name of the request body; empty for none
	consumes    []string
	produces    []string
	responses   []response
}

// pathItem is one path with its operations and the parameters they share.
type pathItem struct {
	path       string
	params     []parameter
	operations []*operation
}

// apiPrefix is how a group version is addressed: "api/v1" for the core group,
// "apis/<group>/<version>" otherwise; it is also the key of its v3 document.
func apiPrefix(gv schema.GroupVersion) string {
	if gv.Group == "" {
		return "api/" + gv.Version
	}
	return "apis/" + gv.Group + "/" + gv.Version
}

// groupWords splits a group name into the words upstream builds operation ids and
// tags from: "rbac.authorization.k8s.io" -> rbac, authorization; "" -> core.
func groupWords(group string) []string {
	if group == "" {
		return []string{"core"}
	}
	group = strings.TrimSuffix(group, ".k8s.io")
	return strings.Split(group, ".")
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// operationPrefix is the group-version part of operation ids ("AppsV1", "CoreV1").
func operationPrefix(gv schema.GroupVersion) string {
	var b strings.Builder
	for _, w := range groupWords(gv.Group) {
		b.WriteString(upperFirst(w))
	}
	b.WriteString(upperFirst(gv.Version))
	return b.String()
}

// groupTag is the operation tag of a group's own path ("apps", "rbacAuthorization").
func groupTag(group string) string {
	words := groupWords(group)
	var b strings.Builder
	b.WriteString(words[0])
	for _, w := range words[1:] {
		b.WriteString(upperFirst(w))
	}
	return b.String()
}

// tag is the operation tag of a group version ("apps_v1", "rbacAuthorization_v1").
func tag(gv schema.GroupVersion) string {
	return groupTag(gv.Group) + "_" + gv.Version
}

// setTags tags every operation of items with the group version's tag.
func setTags(items []*pathItem, gv schema.GroupVersion) []*pathItem {
	for _, item := range items {
		for _, op := range item.operations {
			op.tags = []string{tag(gv)}
		}
	}
	return items
}

// queryParameters describes the query parameters of an options struct (ListOptions,
// DeleteOptions, ...) from its JSON fields and their SwaggerDoc, as upstream derives
// them; fields named in skip, and struct-valued fields, are left out.
func queryParameters(options any, skip ...string) []parameter {
	t := reflect.TypeOf(options)
	docs := options.(swaggerDocumented).SwaggerDoc()
	var params []parameter
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous || name == "" || name == "-" {
			continue
		}
		if contains(skip, name) {
			continue
		}
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		typ, _ := scalarType(ft.Kind())
		if ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.String {
			typ = "string"
		}
		if typ == "" {
			continue
		}
		if typ == "number" {
			typ = "integer"
		}
		params = append(params, parameter{name: name, in: "query", typ: typ, description: docs[name]})
	}
	return params
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// queryParams holds the query parameters of each kind of request.
type queryParams struct {
	list, deleteCollection, delete, create, update, patch []parameter
}

func newQueryParams() queryParams {
	list := queryParameters(metav1.ListOptions{})
	deleteOpts := queryParameters(metav1.DeleteOptions{}, "preconditions")
	var deleteCollection []parameter
	for _, p := range list {
		if p.name != "watch" && p.name != "allowWatchBookmarks" {
			deleteCollection = append(deleteCollection, p)
		}
	}
	deleteCollection = append(deleteCollection, deleteOpts...)
	return queryParams{
		list:             sortParams(list),
		deleteCollection: sortParams(deleteCollection),
		delete:           sortParams(deleteOpts),
		create:           sortParams(queryParameters(metav1.CreateOptions{})),
		update:           sortParams(queryParameters(metav1.UpdateOptions{})),
		patch:            sortParams(queryParameters(metav1.PatchOptions{})),
	}
}

func sortParams(p []parameter) []parameter {
	sort.Slice(p, func(i, j int) bool { return p[i].name < p[j].name })
	return p
}

// joinParams returns a new sorted slice of the parameters of all lists.
func joinParams(lists ...[]parameter) []parameter {
	var out []parameter
	for _, l := range lists {
		out = append(out, l...)
	}
	return sortParams(out)
}

var prettyParam = parameter{
	name: "pretty", in: "query", typ: "string",
	description: "If 'true', then the output is pretty printed. Defaults to 'false' unless the user-agent indicates a browser or command-line HTTP tool (curl and wget).",
}

var namespaceParam = parameter{
	name: "namespace", in: "path", typ: "string", required: true,
	description: "object name and auth scope, such as for teams and projects",
}

func nameParam(what string) parameter {
	return parameter{name: "name", in: "path", typ: "string", required: true, description: "name of the " + what}
}

// resourceNames are the definition names a resource's operations refer to.
type resourceNames struct {
	object, list, scale, status, deleteOptions, watchEvent, patch, resourceList string
}

// resourcePaths returns the paths serving one resource, with every operation
// upstream's apiserver registers for it (watch paths included).
func resourcePaths(r *registry.Resource, names resourceNames, q queryParams) []*pathItem {
	gv := r.GroupVersion
	root := "/" + apiPrefix(gv)
	kind := r.Kind
	objGVK := &gvk{Group: gv.Group, Version: gv.Version, Kind: kind}
	scope := ""
	collection := root + "/" + r.Resource
	watchCollection := root + "/watch/" + r.Resource
	shared := []parameter{prettyParam}
	if r.Namespaced {
		scope = "Namespaced"
		collection = root + "/namespaces/{namespace}/" + r.Resource
		watchCollection = root + "/watch/namespaces/{namespace}/" + r.Resource
		shared = []parameter{namespaceParam, prettyParam}
	}
	prefix := operationPrefix(gv)
	op := func(verb, sub string) string { return verb + prefix + scope + kind + sub }
	ok := func(ref string) []response {
		return []response{{"200", "OK", ref}, {"401", "Unauthorized", ""}}
	}
	created := func(ref string) []response {
		return []response{{"200", "OK", ref}, {"201", "Created", ref}, {"401", "Unauthorized", ""}}
	}
	named := append([]parameter{nameParam(kind)}, shared...)

	var paths []*pathItem
	item := &pathItem{path: collection, params: shared}
	if names.list != "" {
		item.operations = append(item.operations,
			&operation{method: "get", description: "list or watch objects of kind " + kind, id: op("list", ""),
				action: "list", gvk: objGVK, params: q.list, consumes: anyMediaType, produces: watchMediaTypes,
				responses: ok(names.list)},
			&operation{method: "delete", description: "delete collection of " + kind, id: "delete" + prefix + "Collection" + scope + kind,
				action: "deletecollection", gvk: objGVK, params: q.deleteCollection, bodyRef: names.deleteOptions,
				consumes: anyMediaType, produces: objectMediaTypes, responses: ok(names.status)})
	}
	item.operations = append(item.operations,
		&operation{method: "post", description: "create a " + kind, id: op("create", ""), action: "post", gvk: objGVK,
			params: q.create, bodyRef: names.object, consumes: anyMediaType, produces: objectMediaTypes,
			responses: []response{{"200", "OK", names.object}, {"201", "Created", names.object},
				{"202", "Accepted", names.object}, {"401", "Unauthorized", ""}}})
	paths = append(paths, item)

	paths = append(paths, &pathItem{path: collection + "/{name}", params: named, operations: []*operation{
		{method: "get", description: "read the specified " + kind, id: op("read", ""), action: "get", gvk: objGVK,
			consumes: anyMediaType, produces: objectMediaTypes, responses: ok(names.object)},
		{method: "put", description: "replace the specified " + kind, id: op("replace", ""), action: "put", gvk: objGVK,
			params: q.update, bodyRef: names.object, consumes: anyMediaType, produces: objectMediaTypes, responses: created(names.object)},
		{method: "patch", description: "partially update the specified " + kind, id: op("patch", ""), action: "patch", gvk: objGVK,
			params: q.patch, bodyRef: names.patch, consumes: patchMediaTypes, produces: objectMediaTypes, responses: created(names.object)},
		{method: "delete", description: "delete a " + kind, id: op("delete", ""), action: "delete", gvk: objGVK,
			params: q.delete, bodyRef: names.deleteOptions, consumes: anyMediaType, produces: objectMediaTypes,
			responses: []response{{"200", "OK", names.status}, {"202", "Accepted", names.status}, {"401", "Unauthorized", ""}}},
	}})

	subresource := func(sub, ref string, subGVK *gvk) *pathItem {
		word := sub
		return &pathItem{path: collection + "/{name}/" + sub, params: named, operations: []*operation{
			{method: "get", description: "read " + word + " of the specified " + kind, id: op("read", upperFirst(sub)),
				action: "get", gvk: subGVK, consumes: anyMediaType, produces: objectMediaTypes, responses: ok(ref)},
			{method: "put", description: "replace " + word + " of the specified " + kind, id: op("replace", upperFirst(sub)),
				action: "put", gvk: subGVK, params: q.update, bodyRef: ref, consumes: anyMediaType, produces: objectMediaTypes,
				responses: created(ref)},
			{method: "patch", description: "partially update " + word + " of the specified " + kind, id: op("patch", upperFirst(sub)),
				action: "patch", gvk: subGVK, params: q.patch, bodyRef: names.patch, consumes: patchMediaTypes,
				produces: objectMediaTypes, responses: created(ref)},
		}}
	}
	if r.Scale != nil && names.scale != "" {
		paths = append(paths, subresource("scale", names.scale, &gvk{Group: "autoscaling", Version: "v1", Kind: "Scale"}))
	}
	if r.HasStatus {
		paths = append(paths, subresource("status", names.object, objGVK))
	}

	if names.list != "" {
		watchParams := joinParams(q.list, shared)
		paths = append(paths,
			&pathItem{path: watchCollection, params: watchParams, operations: []*operation{{
				method: "get", id: op("watch", "List"), action: "watchlist", gvk: objGVK,
				description: "watch individual changes to a list of " + kind + ". deprecated: use the 'watch' parameter with a list operation instead.",
				consumes:    anyMediaType, produces: watchMediaTypes, responses: ok(names.watchEvent)}}},
			&pathItem{path: watchCollection + "/{name}", params: joinParams(watchParams, []parameter{nameParam(kind)}), operations: []*operation{{
				method: "get", id: op("watch", ""), action: "watch", gvk: objGVK,
				description: "watch changes to an object of kind " + kind + ". deprecated: use the 'watch' parameter with a list operation instead, filtered to a single item with the 'fieldSelector' parameter.",
				consumes:    anyMediaType, produces: watchMediaTypes, responses: ok(names.watchEvent)}}})
		if r.Namespaced {
			listParams := joinParams(q.list, []parameter{prettyParam})
			allID := "list" + prefix + kind + "ForAllNamespaces"
			watchAllID := "watch" + prefix + kind + "ListForAllNamespaces"
			paths = append(paths,
				&pathItem{path: root + "/" + r.Resource, params: listParams, operations: []*operation{{
					method: "get", description: "list or watch objects of kind " + kind, id: allID, action: "list", gvk: objGVK,
					consumes: anyMediaType, produces: watchMediaTypes, responses: ok(names.list)}}},
				&pathItem{path: root + "/watch/" + r.Resource, params: listParams, operations: []*operation{{
					method: "get", id: watchAllID, action: "watchlist", gvk: objGVK,
					description: "watch individual changes to a list of " + kind + ". deprecated: use the 'watch' parameter with a list operation instead.",
					consumes:    anyMediaType, produces: watchMediaTypes, responses: ok(names.watchEvent)}}})
		}
	}
	return setTags(paths, gv)
}

// resourcesPath is the group version's own path, listing its resources
// (GET /apis/apps/v1/).
func resourcesPath(gv schema.GroupVersion, resourceList string) *pathItem {
	return setTags([]*pathItem{{path: "/" + apiPrefix(gv) + "/", operations: []*operation{{
		method: "get", description: "get available resources", id: "get" + operationPrefix(gv) + "APIResources",
		consumes:  []string{"application/json", "application/yaml", "application/vnd.kubernetes.protobuf", "application/cbor"},
		produces:  []string{"application/json", "application/yaml", "application/vnd.kubernetes.protobuf", "application/cbor"},
		responses: []response{{"200", "OK", resourceList}, {"401", "Unauthorized", ""}},
	}}}}, gv)[0]
}
