package kubelet

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// A pod's hostname, its domain and the sandbox's kernel hostname, as upstream's kubelet
// makes them: hostnameOverride wins and has no domain; a subdomain gives the pod a
// domain; setHostnameAsFQDN puts the fully qualified name in the kernel.
func TestPodHostname(t *testing.T) {
	kl := &Kubelet{opts: Options{Hostname: "node-1", ClusterDomain: "cluster.local"}}
	long := strings.Repeat("a", 62) + "-b"
	for _, tc := range []struct {
		name                           string
		mutate                         func(*v1.Pod)
		hostname, domain, kernel, fail string
	}{
		{name: "pod name", mutate: func(*v1.Pod) {}, hostname: "p", kernel: "p"},
		{name: "hostname and subdomain", mutate: func(p *v1.Pod) { p.Spec.Hostname, p.Spec.Subdomain = "web", "sub" },
			hostname: "web", domain: "sub.default.svc.cluster.local", kernel: "web"},
		{name: "as FQDN", mutate: func(p *v1.Pod) {
			p.Spec.Hostname, p.Spec.Subdomain, p.Spec.SetHostnameAsFQDN = "web", "sub", ptr.To(true)
		}, hostname: "web", domain: "sub.default.svc.cluster.local", kernel: "web.sub.default.svc.cluster.local"},
		{name: "as FQDN without a subdomain", mutate: func(p *v1.Pod) { p.Spec.SetHostnameAsFQDN = ptr.To(true) },
			hostname: "p", kernel: "p"},
		{name: "override", mutate: func(p *v1.Pod) {
			p.Spec.Hostname, p.Spec.Subdomain, p.Spec.HostnameOverride = "web", "sub", ptr.To("override.example.host")
		}, hostname: "override.example.host", kernel: "override.example.host"},
		{name: "long name", mutate: func(p *v1.Pod) { p.Name = long + "c" }, hostname: strings.Repeat("a", 62), kernel: strings.Repeat("a", 62)},
		{name: "FQDN too long", mutate: func(p *v1.Pod) {
			p.Spec.Hostname, p.Spec.Subdomain, p.Spec.SetHostnameAsFQDN = strings.Repeat("h", 40), "sub", ptr.To(true)
		}, hostname: strings.Repeat("h", 40), domain: "sub.default.svc.cluster.local", fail: "FQDN " + strings.Repeat("h", 40) + ".sub.default.svc.cluster.local is too long"},
		{name: "host network", mutate: func(p *v1.Pod) { p.Spec.HostNetwork, p.Spec.Hostname = true, "web" }, hostname: "node-1", kernel: "node-1"},
	} {
		pod := newPod("p", "app")
		tc.mutate(pod)
		hostname, domain := kl.podHostname(pod)
		kernel, err := kl.kernelHostname(pod)
		if hostname != tc.hostname || domain != tc.domain {
			t.Errorf("%s: hostname %q domain %q, want %q %q", tc.name, hostname, domain, tc.hostname, tc.domain)
		}
		if tc.fail != "" {
			if err == nil || !strings.Contains(err.Error(), tc.fail) {
				t.Errorf("%s: kernel hostname %q, %v; want an error %q", tc.name, kernel, err, tc.fail)
			}
		} else if err != nil || kernel != tc.kernel {
			t.Errorf("%s: kernel hostname %q, %v; want %q", tc.name, kernel, err, tc.kernel)
		}
	}
}
