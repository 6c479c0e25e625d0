// Package customresources tests CustomResourceDefinitions and their custom resources
// against a real apiserver on embedded etcd, through the embedded kubectl and
// client-go's dynamic client, as a user sees them.
package customresources

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"mizzen/internal/apiserver/openapi"
	"mizzen/internal/controlplane/core"
	"mizzen/internal/registry"
	"mizzen/internal/testing/apiserver"
	"mizzen/internal/testing/kubectlrun"
)

// startServer runs an apiserver that publishes OpenAPI, as `mizzen server` does, for
// kubectl's validation and explain.
func startServer(t *testing.T) *apiserver.Server {
	return apiserver.StartWithOptions(t, func(o *core.Options) {
		o.OpenAPI = func(rs []*registry.Resource) (http.Handler, error) { return openapi.NewDynamic(rs) }
	})
}

// eventually retries f until it returns "" or the time is up, then fails with the last
// problem.
func eventually(t *testing.T, what string, f func() string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		problem := f()
		if problem == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s", what, problem)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestCertificateCRDWithKubectl(t *testing.T) {
	srv := startServer(t)
	kc := srv.AdminKubeconfig
	kubectl := func(args ...string) string { t.Helper(); return kubectlrun.MustRun(t, kc, args...) }

	kubectl("apply", "-f", "testdata/certificates-crd.yaml")
	eventually(t, "the CRD is established", func() string {
		out, fail := kubectlrun.Run(kc, "get", "crd", "certificates.certs.example.com", "-o", `jsonpath={.status.conditions[?(@.type=="Established")].status}`)
		if fail != "" || out != "True" {
			return out + fail
		}
		return ""
	})
	eventually(t, "kubectl api-resources lists it", func() string {
		out, fail := kubectlrun.Run(kc, "api-resources", "--api-group=certs.example.com")
		if fail != "" || !strings.Contains(out, "certificates") || !strings.Contains(out, "cert,certs") {
			return out + fail
		}
		return ""
	})
	kubectl("apply", "-f", "testdata/certificate.yaml")
	out := kubectl("get", "cert", "web")
	t.Logf("kubectl get cert web:\n%s", out)
	for _, want := range []string{"NAME", "READY", "SECRET", "REPLICAS", "AGE", "web-tls", "2"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl get cert: no %q in\n%s", want, out)
		}
	}
	out = kubectl("get", "certificates.v1.certs.example.com", "web", "-o", "yaml")
	for _, want := range []string{"duration: 2160h", "kind: ClusterIssuer", "generation: 1"} {
		if !strings.Contains(out, want) {
			t.Errorf("defaults: no %q in\n%s", want, out)
		}
	}
	out = kubectl("scale", "cert", "web", "--replicas=5")
	t.Logf("scale: %s", out)
	out = kubectl("get", "cert", "web", "-o", "jsonpath={.spec.replicas}")
	if out != "5" {
		t.Errorf("after kubectl scale: spec.replicas = %q, want 5", out)
	}
	out = kubectl("get", "certificates.v1alpha1.certs.example.com", "web", "-o", "jsonpath={.apiVersion}")
	if out != "certs.example.com/v1alpha1" {
		t.Errorf("served as v1alpha1: apiVersion %q", out)
	}
	// The OpenAPI documents are rebuilt in the background once the CRD is served.
	eventually(t, "kubectl explain", func() string {
		out, fail := kubectlrun.Run(kc, "explain", "certificates.spec.issuerRef")
		if fail != "" || !strings.Contains(out, "name\t<string> -required-") {
			return out + fail
		}
		return ""
	})
	out = kubectl("get", "certs", "-o", "wide")
	if !strings.Contains(out, "ISSUER") || !strings.Contains(out, "letsencrypt") {
		t.Errorf("kubectl get -o wide: %s", out)
	}
	out = kubectl("get", "certs-example")
	if !strings.Contains(out, "web-tls") {
		t.Errorf("kubectl get <category>: %s", out)
	}
	out = kubectl("get", "crd")
	if !strings.Contains(out, "CREATED AT") || !strings.Contains(out, "certificates.certs.example.com") {
		t.Errorf("kubectl get crd: %s", out)
	}
	// kubectl scale owns spec.replicas now: applying the manifest again conflicts,
	// as upstream, until the applier forces it.
	_, fail := kubectlrun.Run(kc, "apply", "--server-side", "--field-manager=ops", "-f", "testdata/certificate.yaml")
	if !strings.Contains(fail, `with subresource "scale"`) || !strings.Contains(fail, ".spec.replicas") {
		t.Errorf("kubectl apply --server-side after a scale: %s", fail)
	}
	out = kubectl("apply", "--server-side", "--force-conflicts", "--field-manager=ops", "-f", "testdata/certificate.yaml")
	if !strings.Contains(out, "serverside-applied") {
		t.Errorf("kubectl apply --server-side: %s", out)
	}
	if out = kubectl("get", "cert", "web", "-o", "jsonpath={.spec.replicas}"); out != "2" {
		t.Errorf("after a forced apply: replicas %s", out)
	}
	kubectl("delete", "cert", "web")
	kubectl("delete", "crd", "certificates.certs.example.com")
	eventually(t, "kubectl api-resources forgets it", func() string {
		out, fail := kubectlrun.Run(kc, "api-resources", "--api-group=certs.example.com")
		if fail != "" || strings.Contains(out, "certificates") {
			return out + fail
		}
		return ""
	})
}
