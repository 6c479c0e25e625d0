package customresources

import (
	"strings"
	"testing"

	"mizzen/internal/testing/kubectlrun"
)

// TestServerSideApplyOfCRDs: tools that install CRDs with server-side apply (Helm,
// Flux, Argo CD) can, and can apply them again.
func TestServerSideApplyOfCRDs(t *testing.T) {
	srv := startServer(t)
	kc := srv.AdminKubeconfig
	for i := 0; i < 2; i++ {
		out := kubectlrun.MustRun(t, kc, "apply", "--server-side", "--field-manager=installer", "-f", "testdata/certificates-crd.yaml")
		if !strings.Contains(out, "serverside-applied") {
			t.Fatalf("apply %d: %s", i, out)
		}
	}
	out := kubectlrun.MustRun(t, kc, "get", "crd", "certificates.certs.example.com", "-o", "jsonpath={.metadata.managedFields[*].manager}")
	if !strings.Contains(out, "installer") {
		t.Errorf("managers: %s", out)
	}
}
