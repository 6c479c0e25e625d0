package apply

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"mizzen/internal/apiserver/openapi"
	"mizzen/internal/controlplane/core"
	"mizzen/internal/registry"
	"mizzen/internal/testing/apiserver"
	"mizzen/internal/testing/kubectlrun"
)

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
	kc := apiserver.StartWithOptions(t, func(o *core.Options) {
		o.OpenAPI = func(resources []*registry.Resource) (http.Handler, error) { return openapi.Build(resources) }
	}).AdminKubeconfig
	dir := t.TempDir()

	v1 := writeManifest(t, dir, "v1.yaml", "2", "shop:1")
	if out := kubectlrun.MustRun(t, kc, "apply", "--server-side", "-f", v1); strings.TrimSpace(out) != "deployment.apps/shop serverside-applied" {
		t.Errorf("first apply printed %q", out)
	}
	v2 := writeManifest(t, dir, "v2.yaml", "2", "shop:2")
	if out := kubectlrun.MustRun(t, kc, "apply", "--server-side", "-f", v2); strings.TrimSpace(out) != "deployment.apps/shop serverside-applied" {
		t.Errorf("second apply printed %q", out)
	}
	if img := kubectlrun.MustRun(t, kc, "get", "deployment", "shop", "-o", "jsonpath={.spec.template.spec.containers[0].image}"); img != "shop:2" {
		t.Errorf("image after the second apply = %q", img)
	}

	// Another manager changing kubectl's replicas: refused, with kubectl's advice,
	// until it forces.
	other := writeManifest(t, dir, "other.yaml", "5", "shop:2")
	_, failure := kubectlrun.Run(kc, "apply", "--server-side", "--field-manager", "autoscaler", "-f", other)
	if !strings.Contains(failure, `Apply failed with 1 conflict: conflict with "kubectl": .spec.replicas`) {
		t.Fatalf("conflicting apply reported %q", failure)
	}
	if replicas := kubectlrun.MustRun(t, kc, "get", "deployment", "shop", "-o", "jsonpath={.spec.replicas}"); replicas != "2" {
		t.Errorf("a refused apply changed replicas to %s", replicas)
	}
	kubectlrun.MustRun(t, kc, "apply", "--server-side", "--force-conflicts", "--field-manager", "autoscaler", "-f", other)
	if replicas := kubectlrun.MustRun(t, kc, "get", "deployment", "shop", "-o", "jsonpath={.spec.replicas}"); replicas != "5" {
		t.Errorf("replicas after a forced apply = %s", replicas)
	}

	// A client-side edit shows up as its own manager next to the appliers.
	kubectlrun.MustRun(t, kc, "label", "deployment", "shop", "tier=web")
	yaml := kubectlrun.MustRun(t, kc, "get", "deployment", "shop", "-o", "yaml", "--show-managed-fields")
	for _, want := range []string{"manager: kubectl\n", "manager: autoscaler\n", "operation: Apply", "manager: kubectl-label\n", "operation: Update", "fieldsType: FieldsV1", "f:replicas: {}"} {
		if !strings.Contains(yaml, want) {
			t.Errorf("kubectl get -o yaml --show-managed-fields lacks %q:\n%s", want, yaml)
		}
	}
	if plain := kubectlrun.MustRun(t, kc, "get", "deployment", "shop", "-o", "yaml"); strings.Contains(plain, "managedFields") {
		t.Errorf("managedFields shown without --show-managed-fields")
	}
}
