package openapi

import (
	"encoding/json"
	"reflect"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// lookup walks a decoded JSON document along keys.
func lookup(doc any, keys ...string) (any, bool) {
	for _, k := range keys {
		m, ok := doc.(map[string]any)
		if !ok {
			return nil, false
		}
		if doc, ok = m[k]; !ok {
			return nil, false
		}
	}
	return doc, true
}

func decode(t *testing.T, stored storedDoc) map[string]any {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(plain(t, stored), &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// plain returns a stored document uncompressed.
func plain(t *testing.T, doc storedDoc) []byte {
	t.Helper()
	data, err := doc.bytes()
	if err != nil {
		t.Fatal(err)
	}
	return data
}

const (
	v2Defs = "definitions"
	v3Defs = "components"
)

func TestDocumentContents(t *testing.T) {
	docs := buildTestDocuments(t)
	v2 := decode(t, docs.v2)
	apps := decode(t, docs.v3["apis/apps/v1"])
	core := decode(t, docs.v3["api/v1"])
	def2 := func(name string, keys ...string) []string { return append([]string{v2Defs, name}, keys...) }
	def3 := func(name string, keys ...string) []string {
		return append([]string{v3Defs, "schemas", name}, keys...)
	}
	const (
		deploymentSpec = "io.k8s.api.apps.v1.DeploymentSpec"
		podSpec        = "io.k8s.api.core.v1.PodSpec"
		container      = "io.k8s.api.core.v1.Container"
		deploymentPath = "/apis/apps/v1/namespaces/{namespace}/deployments/{name}"
	)
	tests := []struct {
		name   string
		doc    map[string]any
		keys   []string
		want   string   // JSON object whose keys must all match (or a JSON value to equal)
		absent []string // keys the object must not have
	}{
		// Schemas in v2: plain $ref, no defaults.
		{"v2 pointer scalar is optional", v2, def2(deploymentSpec, "properties", "replicas"),
			`{"type":"integer","format":"int32","description":"Number of desired pods. This is a pointer to distinguish between explicit zero and not specified. Defaults to 1."}`, []string{"default"}},
		{"v2 struct field is a $ref", v2, def2(deploymentSpec, "properties", "template"),
			`{"$ref":"#/definitions/io.k8s.api.core.v1.PodTemplateSpec"}`, []string{"default", "allOf"}},
		{"v2 required from missing omitempty", v2, def2(deploymentSpec, "required"), `["selector","template"]`, nil},
		{"v2 merge list keyed by name", v2, def2(podSpec, "properties", "containers"),
			`{"type":"array","items":{"$ref":"#/definitions/io.k8s.api.core.v1.Container"},"x-kubernetes-patch-strategy":"merge","x-kubernetes-patch-merge-key":"name","x-kubernetes-list-type":"map","x-kubernetes-list-map-keys":["name"]}`, nil},
		{"v2 retainKeys strategy kept whole", v2, def2(podSpec, "properties", "volumes"),
			`{"x-kubernetes-patch-strategy":"merge,retainKeys","x-kubernetes-patch-merge-key":"name"}`, nil},
		{"v2 merged scalar list is a set", v2, def2("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", "properties", "finalizers"),
			`{"type":"array","items":{"type":"string"},"x-kubernetes-patch-strategy":"merge","x-kubernetes-list-type":"set"}`, nil},
		{"v2 list type from +listType", v2, def2(podSpec, "properties", "tolerations"),
			`{"type":"array","x-kubernetes-list-type":"atomic"}`, []string{"x-kubernetes-patch-strategy", "x-kubernetes-list-map-keys"}},
		{"v2 several list map keys", v2, def2(container, "properties", "ports"),
			`{"x-kubernetes-list-type":"map","x-kubernetes-list-map-keys":["containerPort","protocol"],"x-kubernetes-patch-merge-key":"containerPort"}`, nil},
		{"v2 atomic struct", v2, def2("io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector"), `{"x-kubernetes-map-type":"atomic"}`, nil},
		{"v2 enum", v2, def2(podSpec, "properties", "restartPolicy"), `{"type":"string","enum":["Always","Never","OnFailure"]}`, nil},
		{"v2 no enum on a list of enum values", v2, def2("io.k8s.api.core.v1.PersistentVolumeClaimSpec", "properties", "accessModes", "items"), `{"type":"string"}`, []string{"enum"}},
		{"v2 +optional without omitempty is optional", v2, def2("io.k8s.api.apps.v1.DeploymentCondition"), `{"type":"object"}`, []string{"required"}},
		{"v2 +required with omitempty is required", v2, def2("io.k8s.api.apps.v1.Deployment", "required"), `["spec"]`, nil},
		{"v2 required in declaration order", v2, def2("io.k8s.api.core.v1.NodeCondition", "required"), `["type","status"]`, nil},
		{"v2 Time", v2, def2("io.k8s.apimachinery.pkg.apis.meta.v1.Time"), `{"type":"string","format":"date-time"}`, []string{"properties"}},
		{"v2 IntOrString", v2, def2("io.k8s.apimachinery.pkg.util.intstr.IntOrString"), `{"type":"string","format":"int-or-string"}`, []string{"oneOf"}},
		{"v2 Quantity", v2, def2("io.k8s.apimachinery.pkg.api.resource.Quantity"), `{"type":"string"}`, []string{"oneOf", "format"}},
		{"v2 RawExtension is an object", v2, def2("io.k8s.apimachinery.pkg.runtime.RawExtension"), `{"type":"object"}`, []string{"properties"}},
		{"v2 bytes", v2, def2("io.k8s.api.core.v1.ConfigMap", "properties", "binaryData"),
			`{"type":"object","additionalProperties":{"type":"string","format":"byte"}}`, nil},
		{"v2 map of quantities", v2, def2("io.k8s.api.core.v1.ResourceRequirements", "properties", "limits"),
			`{"type":"object","additionalProperties":{"$ref":"#/definitions/io.k8s.apimachinery.pkg.api.resource.Quantity"}}`, nil},
		{"v2 inlined TypeMeta", v2, def2("io.k8s.api.apps.v1.Deployment", "properties", "kind"), `{"type":"string"}`, nil},
		{"v2 kind GVK", v2, def2("io.k8s.api.apps.v1.Deployment", "x-kubernetes-group-version-kind"), `[{"group":"apps","kind":"Deployment","version":"v1"}]`, nil},
		{"v2 list GVK", v2, def2("io.k8s.api.core.v1.PodList", "x-kubernetes-group-version-kind"), `[{"group":"","kind":"PodList","version":"v1"}]`, nil},
		{"v2 Scale GVK", v2, def2("io.k8s.api.autoscaling.v1.Scale", "x-kubernetes-group-version-kind"), `[{"group":"autoscaling","kind":"Scale","version":"v1"}]`, nil},
		{"v2 Status GVK", v2, def2("io.k8s.apimachinery.pkg.apis.meta.v1.Status", "x-kubernetes-group-version-kind"), `[{"group":"","kind":"Status","version":"v1"}]`, nil},
		{"v2 DeleteOptions per group version", v2, def2("io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions", "x-kubernetes-group-version-kind"),
			`[{"group":"apps","kind":"DeleteOptions","version":"v1"},{"group":"","kind":"DeleteOptions","version":"v1"}]`, nil},
		{"v2 type description from SwaggerDoc", v2, def2("io.k8s.api.apps.v1.Deployment", "description"),
			`"Deployment enables declarative updates for Pods and ReplicaSets."`, nil},

		// Operations in v2.
		{"v2 patch", v2, []string{"paths", deploymentPath, "patch"},
			`{"operationId":"patchAppsV1NamespacedDeployment","x-kubernetes-action":"patch","x-kubernetes-group-version-kind":{"group":"apps","kind":"Deployment","version":"v1"},"consumes":["application/json-patch+json","application/merge-patch+json","application/strategic-merge-patch+json","application/apply-patch+yaml","application/apply-patch+cbor"],"tags":["apps_v1"],"description":"partially update the specified Deployment"}`, nil},
		{"v2 delete collection", v2, []string{"paths", "/apis/apps/v1/namespaces/{namespace}/deployments", "delete"},
			`{"operationId":"deleteAppsV1CollectionNamespacedDeployment","x-kubernetes-action":"deletecollection","description":"delete collection of Deployment"}`, nil},
		{"v2 create responses", v2, []string{"paths", "/apis/apps/v1/namespaces/{namespace}/deployments", "post", "responses"},
			`{"200":{"description":"OK","schema":{"$ref":"#/definitions/io.k8s.api.apps.v1.Deployment"}},"201":{"description":"Created","schema":{"$ref":"#/definitions/io.k8s.api.apps.v1.Deployment"}},"202":{"description":"Accepted","schema":{"$ref":"#/definitions/io.k8s.api.apps.v1.Deployment"}},"401":{"description":"Unauthorized"}}`, nil},
		{"v2 scale subresource", v2, []string{"paths", deploymentPath + "/scale", "put"},
			`{"operationId":"replaceAppsV1NamespacedDeploymentScale","x-kubernetes-action":"put","x-kubernetes-group-version-kind":{"group":"autoscaling","kind":"Scale","version":"v1"}}`, nil},
		{"v2 status subresource", v2, []string{"paths", "/api/v1/namespaces/{namespace}/pods/{name}/status", "get"},
			`{"operationId":"readCoreV1NamespacedPodStatus","description":"read status of the specified Pod","x-kubernetes-action":"get"}`, nil},
		{"v2 all namespaces", v2, []string{"paths", "/apis/apps/v1/deployments", "get"},
			`{"operationId":"listAppsV1DeploymentForAllNamespaces","x-kubernetes-action":"list"}`, nil},
		{"v2 cluster scoped", v2, []string{"paths", "/api/v1/nodes", "get"}, `{"operationId":"listCoreV1Node","tags":["core_v1"]}`, nil},
		{"v2 watch", v2, []string{"paths", "/api/v1/watch/nodes/{name}", "get"},
			`{"operationId":"watchCoreV1Node","x-kubernetes-action":"watch","responses":{"200":{"description":"OK","schema":{"$ref":"#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent"}},"401":{"description":"Unauthorized"}}}`, nil},
		{"v2 watch list", v2, []string{"paths", "/apis/apps/v1/watch/namespaces/{namespace}/deployments", "get"},
			`{"operationId":"watchAppsV1NamespacedDeploymentList","x-kubernetes-action":"watchlist"}`, nil},
		{"v2 no scale without adapter", v2, []string{"paths", "/api/v1/namespaces/{namespace}/pods/{name}"}, `{}`, nil},
		{"v2 group path", v2, []string{"paths", "/apis/apps/", "get"}, `{"operationId":"getAppsAPIGroup","tags":["apps"]}`, nil},
		{"v2 resources path", v2, []string{"paths", "/apis/apps/v1/", "get"}, `{"operationId":"getAppsV1APIResources"}`, nil},
		{"v2 info", v2, []string{"info"}, `{"title":"Kubernetes"}`, nil},

		// Schemas in v3: references with siblings wrapped in allOf, defaults written.
		{"v3 struct field", apps, def3(deploymentSpec, "properties", "template"),
			`{"allOf":[{"$ref":"#/components/schemas/io.k8s.api.core.v1.PodTemplateSpec"}],"default":{}}`, []string{"$ref"}},
		{"v3 pointer struct field has no default", apps, def3(deploymentSpec, "properties", "selector"),
			`{"allOf":[{"$ref":"#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector"}]}`, []string{"default"}},
		{"v3 optional scalar has no default", apps, def3(deploymentSpec, "properties", "replicas"), `{"type":"integer"}`, []string{"default"}},
		{"v3 required scalar defaults to zero", apps, def3(container, "properties", "name"), `{"type":"string","default":""}`, nil},
		{"v3 list items", apps, def3(podSpec, "properties", "containers", "items"),
			`{"allOf":[{"$ref":"#/components/schemas/io.k8s.api.core.v1.Container"}],"default":{}}`, nil},
		{"v3 scalar items", apps, def3(container, "properties", "args", "items"), `{"type":"string","default":""}`, nil},
		{"v3 +default", apps, def3("io.k8s.api.core.v1.ContainerPort", "properties", "protocol"), `{"type":"string","default":"TCP"}`, nil},
		{"v3 Time field has no default", apps, def3("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", "properties", "creationTimestamp"),
			`{"allOf":[{"$ref":"#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.Time"}]}`, []string{"default"}},
		{"v3 map of quantities", apps, def3("io.k8s.api.core.v1.ResourceRequirements", "properties", "limits", "additionalProperties"),
			`{"$ref":"#/components/schemas/io.k8s.apimachinery.pkg.api.resource.Quantity"}`, []string{"allOf", "default"}},
		{"v3 IntOrString", apps, def3("io.k8s.apimachinery.pkg.util.intstr.IntOrString"),
			`{"format":"int-or-string","oneOf":[{"type":"integer"},{"type":"string"}]}`, []string{"type"}},
		{"v3 Quantity", core, def3("io.k8s.apimachinery.pkg.api.resource.Quantity"), `{"oneOf":[{"type":"string"},{"type":"number"}]}`, []string{"type"}},
		{"v3 document info", apps, []string{"openapi"}, `"3.0.0"`, nil},

		// Operations in v3.
		{"v3 patch body", apps, []string{"paths", deploymentPath, "patch", "requestBody"},
			`{"required":true,"content":{"application/strategic-merge-patch+json":{"schema":{"$ref":"#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.Patch"}}}}`, nil},
		{"v3 patch gvk", apps, []string{"paths", deploymentPath, "patch"},
			`{"x-kubernetes-group-version-kind":{"group":"apps","kind":"Deployment","version":"v1"},"x-kubernetes-action":"patch"}`, nil},
		{"v3 response content", core, []string{"paths", "/api/v1/nodes/{name}", "get", "responses", "200", "content", "application/json"},
			`{"schema":{"$ref":"#/components/schemas/io.k8s.api.core.v1.Node"}}`, nil},
		{"v3 path parameter", core, []string{"paths", "/api/v1/nodes/{name}"},
			`{"parameters":[{"name":"name","in":"path","required":true,"description":"name of the Node","schema":{"type":"string","uniqueItems":true}},{"name":"pretty","in":"query","description":"If 'true', then the output is pretty printed. Defaults to 'false' unless the user-agent indicates a browser or command-line HTTP tool (curl and wget).","schema":{"type":"string","uniqueItems":true}}]}`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := lookup(tt.doc, tt.keys...)
			if !ok {
				t.Fatalf("%v not found", tt.keys)
			}
			var want any
			if err := json.Unmarshal([]byte(tt.want), &want); err != nil {
				t.Fatalf("bad want: %v", err)
			}
			if !matches(got, want) {
				g, _ := json.Marshal(got)
				t.Errorf("%v =\n%s\nwant it to include\n%s", tt.keys, truncate(string(g), 1500), tt.want)
			}
			for _, k := range tt.absent {
				if _, has := got.(map[string]any)[k]; has {
					t.Errorf("%v has %q", tt.keys, k)
				}
			}
		})
	}
}

// matches reports whether got has every key of want with a matching value; other
// values (arrays, scalars) must be equal, and arrays of maps match element-wise.
func matches(got, want any) bool {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return false
		}
		for k, wv := range w {
			if !matches(g[k], wv) {
				return false
			}
		}
		return true
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return false
		}
		for i := range w {
			if !matches(g[i], w[i]) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(got, want)
}

func TestQueryParameters(t *testing.T) {
	docs := buildTestDocuments(t)
	apps := decode(t, docs.v3["apis/apps/v1"])
	const ns = "/apis/apps/v1/namespaces/{namespace}/deployments"
	tests := []struct {
		path, method string
		want         []string
	}{
		{ns + "/{name}", "patch", []string{"dryRun", "fieldManager", "fieldValidation", "force"}},
		{ns + "/{name}", "put", []string{"dryRun", "fieldManager", "fieldValidation"}},
		{ns, "post", []string{"dryRun", "fieldManager", "fieldValidation"}},
		{ns + "/{name}", "delete", []string{"dryRun", "gracePeriodSeconds", "ignoreStoreReadErrorWithClusterBreakingPotential", "orphanDependents", "propagationPolicy"}},
		{ns, "get", []string{"allowWatchBookmarks", "continue", "fieldSelector", "labelSelector", "limit", "resourceVersion", "resourceVersionMatch", "sendInitialEvents", "shardSelector", "timeoutSeconds", "watch"}},
		{ns, "delete", []string{"continue", "dryRun", "fieldSelector", "gracePeriodSeconds", "ignoreStoreReadErrorWithClusterBreakingPotential", "labelSelector", "limit", "orphanDependents", "propagationPolicy", "resourceVersion", "resourceVersionMatch", "sendInitialEvents", "shardSelector", "timeoutSeconds"}},
		{ns + "/{name}/status", "patch", []string{"dryRun", "fieldManager", "fieldValidation", "force"}},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			params, ok := lookup(apps, "paths", tt.path, tt.method, "parameters")
			if !ok {
				t.Fatal("no parameters")
			}
			var names []string
			for _, p := range params.([]any) {
				p := p.(map[string]any)
				if p["in"] != "query" {
					t.Errorf("parameter %v is in %v", p["name"], p["in"])
				}
				if p["description"] == "" || p["description"] == nil {
					t.Errorf("parameter %v has no description", p["name"])
				}
				names = append(names, p["name"].(string))
			}
			if !sort.StringsAreSorted(names) || !reflect.DeepEqual(names, tt.want) {
				t.Errorf("parameters = %v, want %v", names, tt.want)
			}
		})
	}
}

func TestV3DocumentsHoldOnlyWhatTheyReach(t *testing.T) {
	docs := buildTestDocuments(t)
	core := decode(t, docs.v3["api/v1"])
	if _, ok := lookup(core, v3Defs, "schemas", "io.k8s.api.apps.v1.Deployment"); ok {
		t.Error("api/v1 document holds apps/v1 Deployment")
	}
	for _, name := range []string{"io.k8s.api.core.v1.Pod", "io.k8s.api.core.v1.NodeList", "io.k8s.apimachinery.pkg.apis.meta.v1.Time", "io.k8s.apimachinery.pkg.apis.meta.v1.Status"} {
		if _, ok := lookup(core, v3Defs, "schemas", name); !ok {
			t.Errorf("api/v1 document lacks %s", name)
		}
	}
	// Every reference in every document resolves within it.
	for key, doc := range docs.v3 {
		decoded := decode(t, doc)
		schemas, _ := lookup(decoded, v3Defs, "schemas")
		walkRefs(decoded, func(ref string) {
			name := ref[len("#/components/schemas/"):]
			if _, ok := schemas.(map[string]any)[name]; !ok {
				t.Errorf("%s: dangling reference %s", key, ref)
			}
		})
	}
}

func walkRefs(v any, visit func(string)) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if s, ok := x.(string); ok && k == "$ref" {
				visit(s)
			}
			walkRefs(x, visit)
		}
	case []any:
		for _, x := range v {
			walkRefs(x, visit)
		}
	}
}

func TestDefinitionName(t *testing.T) {
	tests := []struct {
		v    any
		want string
	}{
		{corev1.Pod{}, "io.k8s.api.core.v1.Pod"},
		{&corev1.PodSpec{}, "io.k8s.api.core.v1.PodSpec"},
		{testType{}, "mizzen.internal.apiserver.openapi.testType"},
	}
	for _, tt := range tests {
		d := newDefinitions()
		got, err := d.add(reflect.TypeOf(tt.v))
		if err != nil || got != tt.want {
			t.Errorf("name of %T = %q, %v; want %q", tt.v, got, err, tt.want)
		}
	}
}

type testType struct {
	Plain    string            `json:"plain"`
	Optional *int64            `json:"optional,omitempty"`
	Untagged bool              //nolint:unused // described under its Go name, as encoding/json writes it
	Skipped  string            `json:"-"`
	Labels   map[string]string `json:"labels,omitempty"`
	Ratio    float64           `json:"ratio"`
	hidden   string            //nolint:unused // unexported fields are not part of the JSON form
}

func TestExtraTypes(t *testing.T) {
	docs, err := Build(testResources(), testType{})
	if err != nil {
		t.Fatal(err)
	}
	got, ok := lookup(decode(t, docs.v2), v2Defs, "mizzen.internal.apiserver.openapi.testType")
	if !ok {
		t.Fatal("extra type missing from v2 definitions")
	}
	want := `{"type":"object","required":["plain","Untagged","ratio"],"properties":{
		"plain":{"type":"string"},"optional":{"type":"integer","format":"int64"},"Untagged":{"type":"boolean"},
		"labels":{"type":"object","additionalProperties":{"type":"string"}},"ratio":{"type":"number","format":"double"}}}`
	var w any
	_ = json.Unmarshal([]byte(want), &w)
	if !matches(got, w) {
		g, _ := json.Marshal(got)
		t.Errorf("testType = %s\nwant %s", g, want)
	}
	if props := got.(map[string]any)["properties"].(map[string]any); len(props) != 5 {
		t.Errorf("testType has %d properties, want 5", len(props))
	}
}

func TestBuildRejectsResourceWithoutNew(t *testing.T) {
	r := testResources()[:1]
	r[0].New = nil
	if _, err := Build(r); err == nil {
		t.Error("Build accepted a resource without New")
	}
}

func TestPathParameters(t *testing.T) {
	docs := buildTestDocuments(t)
	apps := decode(t, docs.v3["apis/apps/v1"])
	list := []string{"allowWatchBookmarks", "continue", "fieldSelector", "labelSelector", "limit", "resourceVersion", "resourceVersionMatch", "sendInitialEvents", "shardSelector", "timeoutSeconds", "watch"}
	with := func(extra ...string) []string {
		out := append(append([]string{}, list...), extra...)
		sort.Strings(out)
		return out
	}
	tests := []struct {
		path string
		want []string
	}{
		{"/apis/apps/v1/namespaces/{namespace}/deployments", []string{"namespace", "pretty"}},
		{"/apis/apps/v1/namespaces/{namespace}/deployments/{name}", []string{"name", "namespace", "pretty"}},
		{"/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale", []string{"name", "namespace", "pretty"}},
		{"/apis/apps/v1/deployments", with("pretty")},
		{"/apis/apps/v1/watch/deployments", with("pretty")},
		{"/apis/apps/v1/watch/namespaces/{namespace}/deployments", with("namespace", "pretty")},
		{"/apis/apps/v1/watch/namespaces/{namespace}/deployments/{name}", with("name", "namespace", "pretty")},
	}
	for _, tt := range tests {
		params, ok := lookup(apps, "paths", tt.path, "parameters")
		if !ok {
			t.Errorf("%s: no parameters", tt.path)
			continue
		}
		var names []string
		for _, p := range params.([]any) {
			names = append(names, p.(map[string]any)["name"].(string))
		}
		if !reflect.DeepEqual(names, tt.want) {
			t.Errorf("%s parameters = %v, want %v", tt.path, names, tt.want)
		}
	}
}

func TestEnumDescription(t *testing.T) {
	docs := buildTestDocuments(t)
	got, ok := lookup(decode(t, docs.v3["api/v1"]), v3Defs, "schemas", "io.k8s.api.core.v1.PodSpec", "properties", "restartPolicy", "description")
	if !ok {
		t.Fatal("restartPolicy has no description")
	}
	const suffix = "\n\nPossible enum values:\n - `\"Always\"`\n - `\"Never\"`\n - `\"OnFailure\"`"
	if s := got.(string); !strings.HasSuffix(s, suffix) || len(s) == len(suffix) {
		t.Errorf("restartPolicy description = %q, want the field's text then %q", s, suffix)
	}
}
