package openapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/cli-runtime/pkg/resource"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/openapi"
	"k8s.io/client-go/openapi3"
	"k8s.io/client-go/rest"
	"k8s.io/kube-openapi/pkg/util/proto"
	explainv2 "k8s.io/kubectl/pkg/explain/v2"
	kubectlopenapi "k8s.io/kubectl/pkg/util/openapi"
)

// newTestServer serves the documents of testResources over TLS, as the apiserver
// will, and returns a client config for it.
func newTestServer(t *testing.T) *rest.Config {
	t.Helper()
	docs, err := Build(testResources())
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/openapi/", docs)
	srv := httptest.NewTLSServer(mux)
	t.Cleanup(srv.Close)
	return &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
}

func newOpenAPIClient(t *testing.T, cfg *rest.Config) openapi.Client {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return dc.OpenAPIV3()
}

var (
	deploymentsGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	podsGVR        = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
)

func TestKubectlExplain(t *testing.T) {
	client := newOpenAPIClient(t, newTestServer(t))
	tests := []struct {
		name      string
		gvr       schema.GroupVersionResource
		fields    []string
		recursive bool
		want      []string // lines or fragments the output must contain
		wantNot   []string
	}{{
		name:   "deployment.spec.replicas",
		gvr:    deploymentsGVR,
		fields: []string{"spec", "replicas"},
		want: []string{
			"GROUP:      apps\nKIND:       Deployment\nVERSION:    v1\n",
			"FIELD: replicas <integer>\n",
			"DESCRIPTION:\n    Number of desired pods. This is a pointer to distinguish between explicit\n    zero and not specified. Defaults to 1.\n",
		},
	}, {
		name: "deployment top level",
		gvr:  deploymentsGVR,
		want: []string{
			"KIND:       Deployment\n",
			"DESCRIPTION:\n    Deployment enables declarative updates for Pods and ReplicaSets.\n",
			"  apiVersion\t<string>\n",
			"  metadata\t<ObjectMeta>\n",
			"  spec\t<DeploymentSpec> -required-\n", // +required in k8s.io/api 0.37
			"  status\t<DeploymentStatus>\n",
		},
	}, {
		name:   "required and special types",
		gvr:    deploymentsGVR,
		fields: []string{"spec", "template", "spec", "containers"},
		want: []string{
			"FIELD: containers <[]Container>\n",
			"  name\t<string> -required-\n",
			"  resources\t<ResourceRequirements>\n",
		},
	}, {
		name:   "quantity and int-or-string",
		gvr:    deploymentsGVR,
		fields: []string{"spec", "strategy", "rollingUpdate"},
		want:   []string{"  maxSurge\t<IntOrString>\n", "  maxUnavailable\t<IntOrString>\n"},
	}, {
		name:   "time is a string",
		gvr:    podsGVR,
		fields: []string{"metadata", "creationTimestamp"},
		want:   []string{"FIELD: creationTimestamp <string>\n"},
	}, {
		name:   "enum",
		gvr:    podsGVR,
		fields: []string{"spec", "restartPolicy"},
		want:   []string{"FIELD: restartPolicy <string>\nENUM:\n    Always\n    Never\n    OnFailure\n"},
	}, {
		name:      "pods recursive",
		gvr:       podsGVR,
		recursive: true,
		want: []string{
			"KIND:       Pod\nVERSION:    v1\n",
			"FIELDS:\n  apiVersion\t<string>\n  kind\t<string>\n  metadata\t<ObjectMeta>\n",
			"\n    containers\t<[]Container> -required-\n      args\t<[]string>\n",
			"\n        limits\t<map[string]Quantity>\n",
			"\n    nodeName\t<string>\n",
			"\n  status\t<PodStatus>\n",
		},
		wantNot: []string{"<no description>"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			if err := explainv2.PrintModelDescription(tt.fields, &out, client, tt.gvr, tt.recursive, 0, "plaintext"); err != nil {
				t.Fatalf("explain: %v", err)
			}
			got := out.String()
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("output lacks %q; got:\n%s", w, truncate(got, 3000))
				}
			}
			for _, w := range tt.wantNot {
				if strings.Contains(got, w) {
					t.Errorf("output contains %q", w)
				}
			}
		})
	}
}

func TestExplainUnknownField(t *testing.T) {
	client := newOpenAPIClient(t, newTestServer(t))
	var out bytes.Buffer
	err := explainv2.PrintModelDescription([]string{"spec", "nosuch"}, &out, client, deploymentsGVR, false, 0, "plaintext")
	if err == nil || !strings.Contains(err.Error(), `field "nosuch" does not exist`) {
		t.Fatalf("explain spec.nosuch: got error %v, want field does not exist", err)
	}
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

func TestOpenAPI3RootParses(t *testing.T) {
	root := openapi3.NewRoot(newOpenAPIClient(t, newTestServer(t)))
	gvs, err := root.GroupVersions()
	if err != nil {
		t.Fatal(err)
	}
	if want := []schema.GroupVersion{{Version: "v1"}, {Group: "apps", Version: "v1"}}; !sameGVs(gvs, want) {
		t.Errorf("GroupVersions = %v, want %v", gvs, want)
	}
	tests := []struct {
		gv         schema.GroupVersion
		definition string
		path       string
	}{
		{schema.GroupVersion{Group: "apps", Version: "v1"}, "io.k8s.api.apps.v1.Deployment", "/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale"},
		{schema.GroupVersion{Version: "v1"}, "io.k8s.api.core.v1.Pod", "/api/v1/nodes/{name}/status"},
	}
	for _, tt := range tests {
		spec, err := root.GVSpec(tt.gv)
		if err != nil {
			t.Fatalf("GVSpec(%v): %v", tt.gv, err)
		}
		if _, ok := spec.Components.Schemas[tt.definition]; !ok {
			t.Errorf("GVSpec(%v) lacks schema %s", tt.gv, tt.definition)
		}
		if _, ok := spec.Paths.Paths[tt.path]; !ok {
			t.Errorf("GVSpec(%v) lacks path %s", tt.gv, tt.path)
		}
	}
	if _, err := root.GVSpec(schema.GroupVersion{Group: "batch", Version: "v1"}); err == nil {
		t.Error("GVSpec(batch/v1) found a group version that is not served")
	}
}

func sameGVs(got, want []schema.GroupVersion) bool {
	if len(got) != len(want) {
		return false
	}
	seen := map[schema.GroupVersion]bool{}
	for _, gv := range got {
		seen[gv] = true
	}
	for _, gv := range want {
		if !seen[gv] {
			return false
		}
	}
	return true
}

// TestQueryParamVerifiers runs kubectl's checks for server-side field validation:
// the v3 one kubectl uses, and the v2 one it falls back to.
func TestQueryParamVerifiers(t *testing.T) {
	cfg := newTestServer(t)
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	verifiers := map[string]resource.Verifier{
		"v3": resource.NewQueryParamVerifierV3(dyn, dc.OpenAPIV3(), resource.QueryParamFieldValidation),
		"v2": resource.NewQueryParamVerifier(dyn, dc, resource.QueryParamFieldValidation),
	}
	for name, verifier := range verifiers {
		for _, gvk := range []schema.GroupVersionKind{
			{Group: "apps", Version: "v1", Kind: "Deployment"},
			{Version: "v1", Kind: "Pod"},
			{Version: "v1", Kind: "Node"},
		} {
			if err := verifier.HasSupport(gvk); err != nil {
				t.Errorf("%s HasSupport(%v) = %v, want supported", name, gvk, err)
			}
		}
		// A kind the documents do not describe is not supported.
		if err := verifier.HasSupport(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "StatefulSet"}); err == nil {
			t.Errorf("%s HasSupport(StatefulSet) = nil for a kind that is not served", name)
		}
	}
}

func TestOpenAPIV2ProtoForKubectl(t *testing.T) {
	dc, err := discovery.NewDiscoveryClientForConfig(newTestServer(t))
	if err != nil {
		t.Fatal(err)
	}
	// OpenAPISchema asks for the protobuf form, as kubectl does.
	doc, err := dc.OpenAPISchema()
	if err != nil {
		t.Fatalf("OpenAPISchema: %v", err)
	}
	resources, err := kubectlopenapi.NewOpenAPIData(doc)
	if err != nil {
		t.Fatalf("NewOpenAPIData: %v", err)
	}
	deployment := resources.LookupResource(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"})
	kind, ok := deployment.(*proto.Kind)
	if !ok {
		t.Fatalf("LookupResource(Deployment) = %T, want *proto.Kind", deployment)
	}
	if kind.Fields["spec"] == nil {
		t.Fatalf("Deployment has no spec field: %v", kind.Keys())
	}
	spec := kind.Fields["spec"].(proto.Reference).SubSchema().(*proto.Kind)
	if !spec.IsRequired("selector") || spec.IsRequired("replicas") {
		t.Errorf("DeploymentSpec required = %v, want selector and template", spec.RequiredFields)
	}
	if p, ok := spec.Fields["replicas"].(*proto.Primitive); !ok || p.Type != "integer" || p.Format != "int32" {
		t.Errorf("DeploymentSpec.replicas = %#v, want integer int32", spec.Fields["replicas"])
	}
	if got := resources.GetConsumes(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, "PATCH"); !contains(got, "application/strategic-merge-patch+json") {
		t.Errorf("PATCH consumes = %v, want strategic merge patch among them", got)
	}
	if resources.LookupResource(schema.GroupVersionKind{Version: "v1", Kind: "Pod"}) == nil {
		t.Error("LookupResource(Pod) = nil")
	}
}

// TestStrategicMergeFromV3 computes a three-way patch with the v3 schema, as kubectl
// apply does: containers merge by name, so changing one container's image patches
// just that element.
func TestStrategicMergeFromV3(t *testing.T) {
	root := openapi3.NewRoot(newOpenAPIClient(t, newTestServer(t)))
	spec, err := root.GVSpec(schema.GroupVersion{Group: "apps", Version: "v1"})
	if err != nil {
		t.Fatal(err)
	}
	meta := strategicpatch.PatchMetaFromOpenAPIV3{
		Schema:     spec.Components.Schemas["io.k8s.api.apps.v1.Deployment"],
		SchemaList: spec.Components.Schemas,
	}
	deployment := func(images ...string) []byte {
		d := appsv1.Deployment{}
		for i, image := range images {
			d.Spec.Template.Spec.Containers = append(d.Spec.Template.Spec.Containers,
				corev1.Container{Name: "c" + string(rune('0'+i)), Image: image})
		}
		b, _ := json.Marshal(d)
		return b
	}
	original, modified := deployment("a", "b"), deployment("a", "b2")
	patch, err := strategicpatch.CreateThreeWayMergePatch(original, modified, original, meta, false)
	if err != nil {
		t.Fatalf("CreateThreeWayMergePatch: %v", err)
	}
	want := `{"spec":{"template":{"spec":{"$setElementOrder/containers":[{"name":"c0"},{"name":"c1"}],"containers":[{"image":"b2","name":"c1"}]}}}}`
	if string(patch) != want {
		t.Errorf("patch = %s\nwant    %s", patch, want)
	}
}
