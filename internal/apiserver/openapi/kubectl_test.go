package openapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	kubectlcmd "k8s.io/kubectl/pkg/cmd"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"

	"mizzen/internal/registry"
)

// discoveryHandler serves the legacy discovery documents of resources, the least
// kubectl needs to map "deployment" to a resource.
func discoveryHandler(resources []*registry.Resource) http.Handler {
	lists := map[string]*metav1.APIResourceList{}
	groups := &metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}}
	for _, r := range resources {
		path := "/" + apiPrefix(r.GroupVersion)
		list, ok := lists[path]
		if !ok {
			list = &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: r.GroupVersion.String()}
			lists[path] = list
			if r.GroupVersion.Group != "" {
				gv := metav1.GroupVersionForDiscovery{GroupVersion: r.GroupVersion.String(), Version: r.GroupVersion.Version}
				groups.Groups = append(groups.Groups, metav1.APIGroup{Name: r.GroupVersion.Group, Versions: []metav1.GroupVersionForDiscovery{gv}, PreferredVersion: gv})
			}
		}
		list.APIResources = append(list.APIResources, metav1.APIResource{
			Name: r.Resource, SingularName: r.SingularName, Namespaced: r.Namespaced, Kind: r.Kind, ShortNames: r.ShortNames,
			Verbs: metav1.Verbs{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"},
		})
	}
	docs := map[string]any{
		"/api":  &metav1.APIVersions{TypeMeta: metav1.TypeMeta{Kind: "APIVersions"}, Versions: []string{"v1"}},
		"/apis": groups,
	}
	for path, list := range lists {
		docs[path] = list
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		doc, ok := docs[strings.TrimSuffix(r.URL.Path, "/")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(doc)
	})
}

// runKubectl runs the upstream kubectl command, in process, against a TLS server
// that serves discovery and the OpenAPI documents, and objects through objects when
// it is not nil. It returns kubectl's output and the requests the server saw
// ("GET /openapi/v3").
func runKubectl(t *testing.T, objects http.Handler, args ...string) (string, []string) {
	t.Helper()
	resources := testResources()
	docs, err := Build(resources)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/openapi/", docs)
	mux.Handle("/", discoveryHandler(resources))
	if objects != nil {
		mux.Handle("/apis/apps/v1/namespaces/", objects)
	}
	var mu sync.Mutex
	var requests []string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		requests = append(requests, r.Method+" "+r.URL.Path)
		mu.Unlock()
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)

	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	config := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: test
  cluster: {server: %q, insecure-skip-tls-verify: true}
users:
- name: test
  user: {token: test}
contexts:
- name: test
  context: {cluster: test, user: test}
current-context: test
`, srv.URL)
	if err := os.WriteFile(kubeconfig, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}

	// kubectl exits the process on errors; turn that into a test failure.
	var fatal string
	cmdutil.BehaviorOnFatal(func(msg string, code int) { fatal = fmt.Sprintf("exit %d: %s", code, msg) })
	t.Cleanup(cmdutil.DefaultBehaviorOnFatal)

	var out, errOut bytes.Buffer
	argv := append([]string{"kubectl", "--kubeconfig", kubeconfig, "--cache-dir", filepath.Join(dir, "cache")}, args...)
	cmd := kubectlcmd.NewDefaultKubectlCommandWithArgs(kubectlcmd.KubectlOptions{
		Arguments: argv,
		IOStreams: genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut},
	})
	cmd.SetArgs(argv[1:])
	if err := cmd.Execute(); err != nil || fatal != "" {
		t.Fatalf("kubectl %s: %v %s\nstderr: %s", strings.Join(args, " "), err, fatal, errOut.String())
	}
	srv.Close() // waits for the handlers, so requests is complete
	return out.String(), requests
}

func TestKubectlExplainCommand(t *testing.T) {
	tests := []struct {
		args []string
		want []string
	}{{
		args: []string{"explain", "deployment.spec.replicas"},
		want: []string{"GROUP:      apps\nKIND:       Deployment\nVERSION:    v1\n\nFIELD: replicas <integer>\n\n\nDESCRIPTION:\n    Number of desired pods. This is a pointer to distinguish between explicit\n    zero and not specified. Defaults to 1.\n"},
	}, {
		args: []string{"explain", "pods", "--recursive"},
		want: []string{
			"KIND:       Pod\nVERSION:    v1\n\nDESCRIPTION:\n    Pod is a collection of containers that can run on a host.",
			"\nFIELDS:\n  apiVersion\t<string>\n  kind\t<string>\n  metadata\t<ObjectMeta>\n    annotations\t<map[string]string>\n",
			"\n  spec\t<PodSpec>\n    activeDeadlineSeconds\t<integer>\n    affinity\t<Affinity>\n",
			"\n      ports\t<[]ContainerPort>\n        containerPort\t<integer> -required-\n",
		},
	}, {
		// The legacy explain reads the v2 document (protobuf) instead.
		args: []string{"explain", "deployment.spec.replicas", "--output=plaintext-openapiv2"},
		want: []string{"KIND:     Deployment\nVERSION:  apps/v1\n\nFIELD:    replicas <integer>\n\nDESCRIPTION:\n     Number of desired pods."},
	}, {
		args: []string{"explain", "pods.spec.containers", "--output=plaintext-openapiv2"},
		want: []string{"RESOURCE: containers <[]Object>\n", "   image\t<string>\n", "   name\t<string> -required-\n"},
	}, {
		args: []string{"explain", "deploy.spec.strategy.rollingUpdate.maxSurge"},
		want: []string{"FIELD: maxSurge <IntOrString>\n"},
	}, {
		args: []string{"explain", "no.status.capacity"},
		want: []string{"KIND:       Node\n", "FIELD: capacity <map[string]Quantity>\n"},
	}}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			got, _ := runKubectl(t, nil, tt.args...)
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("output lacks %q; got:\n%s", w, truncate(got, 2500))
				}
			}
		})
	}
}

// TestKubectlApplyUsesTheV3Schema runs kubectl apply on a changed Deployment against
// a server holding the previously applied one. kubectl computes a strategic merge
// patch from the v3 schema (containers merge by name) and, having found
// fieldValidation in the document, asks the server to validate strictly.
func TestKubectlApplyUsesTheV3Schema(t *testing.T) {
	manifest := func(image string) string {
		return `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"default"},` +
			`"spec":{"selector":{"matchLabels":{"app":"web"}},"template":{"metadata":{"labels":{"app":"web"}},` +
			`"spec":{"containers":[{"name":"a","image":"a:1"},{"name":"b","image":"` + image + `"}]}}}}`
	}
	var current map[string]any
	if err := json.Unmarshal([]byte(manifest("b:1")), &current); err != nil {
		t.Fatal(err)
	}
	current["metadata"].(map[string]any)["annotations"] = map[string]any{
		"kubectl.kubernetes.io/last-applied-configuration": manifest("b:1") + "\n",
	}
	var patchType, patchBody, query string
	objects := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/apis/apps/v1/namespaces/default/deployments/web" {
			http.NotFound(w, r)
			return
		}
		switch r.Method {
		case http.MethodGet:
		case http.MethodPatch:
			body, _ := io.ReadAll(r.Body)
			patchType, patchBody, query = r.Header.Get("Content-Type"), string(body), r.URL.RawQuery
		default:
			http.Error(w, "unexpected method", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(current)
	})
	file := filepath.Join(t.TempDir(), "web.json")
	if err := os.WriteFile(file, []byte(manifest("b:2")), 0o600); err != nil {
		t.Fatal(err)
	}

	out, requests := runKubectl(t, objects, "apply", "-f", file)

	if !strings.Contains(out, "deployment.apps/web configured") {
		t.Errorf("output = %q, want deployment.apps/web configured", out)
	}
	if patchType != "application/strategic-merge-patch+json" {
		t.Errorf("patch Content-Type = %q, want a strategic merge patch", patchType)
	}
	var patch struct {
		Spec struct {
			Template struct {
				Spec map[string]json.RawMessage
			}
		}
	}
	if err := json.Unmarshal([]byte(patchBody), &patch); err != nil {
		t.Fatalf("patch %s: %v", patchBody, err)
	}
	podSpec := patch.Spec.Template.Spec
	if got, want := string(podSpec["containers"]), `[{"image":"b:2","name":"b"}]`; got != want {
		t.Errorf("patched containers = %s, want %s (merged by name)", got, want)
	}
	if got, want := string(podSpec["$setElementOrder/containers"]), `[{"name":"a"},{"name":"b"}]`; got != want {
		t.Errorf("$setElementOrder/containers = %s, want %s", got, want)
	}
	if !strings.Contains(query, "fieldValidation=Strict") {
		t.Errorf("patch query = %q, want fieldValidation=Strict", query)
	}
	if !contains(requests, "GET /openapi/v3/apis/apps/v1") {
		t.Errorf("kubectl did not read the apps/v1 v3 document; requests: %v", requests)
	}
}
