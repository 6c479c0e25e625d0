package openapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
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
// that serves discovery and the OpenAPI documents.
func runKubectl(t *testing.T, args ...string) string {
	t.Helper()
	resources := testResources()
	docs, err := Build(resources)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/openapi/", docs)
	mux.Handle("/", discoveryHandler(resources))
	srv := httptest.NewTLSServer(mux)
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
	return out.String()
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
		args: []string{"explain", "deploy.spec.strategy.rollingUpdate.maxSurge"},
		want: []string{"FIELD: maxSurge <IntOrString>\n"},
	}, {
		args: []string{"explain", "no.status.capacity"},
		want: []string{"KIND:       Node\n", "FIELD: capacity <map[string]Quantity>\n"},
	}}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			got := runKubectl(t, tt.args...)
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("output lacks %q; got:\n%s", w, truncate(got, 2500))
				}
			}
		})
	}
}
