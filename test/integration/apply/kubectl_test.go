package apply

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	kubectlcmd "k8s.io/kubectl/pkg/cmd"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"

	"mizzen/internal/apiserver/openapi"
	"mizzen/internal/registry"
	"mizzen/internal/server"
	"mizzen/internal/testing/apiserver"
)

// kubectlExit is how a kubectl run in this process ends on an error: kubectl would
// exit the process, so the test makes it panic with this and recovers.
type kubectlExit struct{ msg string }

// runKubectl runs the upstream kubectl in this process against the test server and
// returns what it printed, and the error it reported if it failed.
func runKubectl(kubeconfig string, args ...string) (out, failure string) {
	var stdout, stderr bytes.Buffer
	cmdutil.BehaviorOnFatal(func(msg string, code int) { panic(kubectlExit{fmt.Sprintf("exit %d: %s", code, msg)}) })
	defer cmdutil.DefaultBehaviorOnFatal()
	defer func() {
		if r := recover(); r != nil {
			exit, ok := r.(kubectlExit)
			if !ok {
				panic(r)
			}
			out, failure = stdout.String(), exit.msg+stderr.String()
		}
	}()
	args = append([]string{"--kubeconfig", kubeconfig}, args...)
	cmd := kubectlcmd.NewDefaultKubectlCommandWithArgs(kubectlcmd.KubectlOptions{
		Arguments:   append([]string{"kubectl"}, args...),
		ConfigFlags: genericclioptions.NewConfigFlags(true),
		IOStreams:   genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &stdout, ErrOut: &stderr},
	})
	cmd.SetArgs(args)
	if err := cmd.Execute(); err != nil {
		return stdout.String(), err.Error() + stderr.String()
	}
	return stdout.String(), ""
}

func kubectl(t *testing.T, kubeconfig string, args ...string) string {
	t.Helper()
	out, failure := runKubectl(kubeconfig, args...)
	if failure != "" {
		t.Fatalf("kubectl %s: %s", strings.Join(args, " "), failure)
	}
	return out
}

func writeManifest(t *testing.T, dir, name, replicas, image string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	manifest := `apiVersion: apps/v1
kind: Deployment
metadata:
  name: shop
  namespace: default
  labels: {app: shop}
spec:
  replicas: ` + replicas + `
  selector: {matchLabels: {app: shop}}
  template:
    metadata: {labels: {app: shop}}
    spec:
      containers:
      - name: shop
        image: ` + image + `
`
	if err := os.WriteFile(path, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestKubectlApplyServerSide(t *testing.T) {
	t.Setenv("KUBECACHEDIR", t.TempDir())
	// kubectl validates manifests against the OpenAPI documents, which a test server
	// serves only when asked.
	kc := apiserver.StartWithOptions(t, func(o *server.Options) {
		o.OpenAPI = func(resources []*registry.Resource) (http.Handler, error) { return openapi.Build(resources) }
	}).AdminKubeconfig
	dir := t.TempDir()

	v1 := writeManifest(t, dir, "v1.yaml", "2", "shop:1")
	if out := kubectl(t, kc, "apply", "--server-side", "-f", v1); strings.TrimSpace(out) != "deployment.apps/shop serverside-applied" {
		t.Errorf("first apply printed %q", out)
	}
	v2 := writeManifest(t, dir, "v2.yaml", "2", "shop:2")
	if out := kubectl(t, kc, "apply", "--server-side", "-f", v2); strings.TrimSpace(out) != "deployment.apps/shop serverside-applied" {
		t.Errorf("second apply printed %q", out)
	}
	if img := kubectl(t, kc, "get", "deployment", "shop", "-o", "jsonpath={.spec.template.spec.containers[0].image}"); img != "shop:2" {
		t.Errorf("image after the second apply = %q", img)
	}

	// Another manager changing kubectl's replicas: refused, with kubectl's advice,
	// until it forces.
	other := writeManifest(t, dir, "other.yaml", "5", "shop:2")
	_, failure := runKubectl(kc, "apply", "--server-side", "--field-manager", "autoscaler", "-f", other)
	if !strings.Contains(failure, `Apply failed with 1 conflict: conflict with "kubectl": .spec.replicas`) {
		t.Fatalf("conflicting apply reported %q", failure)
	}
	if replicas := kubectl(t, kc, "get", "deployment", "shop", "-o", "jsonpath={.spec.replicas}"); replicas != "2" {
		t.Errorf("a refused apply changed replicas to %s", replicas)
	}
	kubectl(t, kc, "apply", "--server-side", "--force-conflicts", "--field-manager", "autoscaler", "-f", other)
	if replicas := kubectl(t, kc, "get", "deployment", "shop", "-o", "jsonpath={.spec.replicas}"); replicas != "5" {
		t.Errorf("replicas after a forced apply = %s", replicas)
	}

	// A client-side edit shows up as its own manager next to the appliers.
	kubectl(t, kc, "label", "deployment", "shop", "tier=web")
	yaml := kubectl(t, kc, "get", "deployment", "shop", "-o", "yaml", "--show-managed-fields")
	for _, want := range []string{"manager: kubectl\n", "manager: autoscaler\n", "operation: Apply", "manager: kubectl-label\n", "operation: Update", "fieldsType: FieldsV1", "f:replicas: {}"} {
		if !strings.Contains(yaml, want) {
			t.Errorf("kubectl get -o yaml --show-managed-fields lacks %q:\n%s", want, yaml)
		}
	}
	if plain := kubectl(t, kc, "get", "deployment", "shop", "-o", "yaml"); strings.Contains(plain, "managedFields") {
		t.Errorf("managedFields shown without --show-managed-fields")
	}
}
