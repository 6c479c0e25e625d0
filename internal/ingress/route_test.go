package ingress

import (
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ing builds an Ingress; each rule is host plus paths "TYPE PATH -> SERVICE".
type testPath struct {
	typ     networkingv1.PathType
	path    string
	service string
}

func exact(p, svc string) testPath  { return testPath{networkingv1.PathTypeExact, p, svc} }
func prefix(p, svc string) testPath { return testPath{networkingv1.PathTypePrefix, p, svc} }
func implSpecific(p, svc string) testPath {
	return testPath{networkingv1.PathTypeImplementationSpecific, p, svc}
}

type testRule struct {
	host  string
	paths []testPath
}

func testIngress(name string, age int, def string, rules ...testRule) *networkingv1.Ingress {
	ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name,
		CreationTimestamp: metav1.NewTime(time.Unix(1_700_000_000-int64(age), 0))}}
	if def != "" {
		ing.Spec.DefaultBackend = &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: def, Port: networkingv1.ServiceBackendPort{Number: 80}}}
	}
	for _, r := range rules {
		rule := networkingv1.IngressRule{Host: r.host}
		if r.paths != nil {
			rule.HTTP = &networkingv1.HTTPIngressRuleValue{}
			for _, p := range r.paths {
				typ := p.typ
				rule.HTTP.Paths = append(rule.HTTP.Paths, networkingv1.HTTPIngressPath{Path: p.path, PathType: &typ,
					Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: p.service, Port: networkingv1.ServiceBackendPort{Number: 80}}}})
			}
		}
		ing.Spec.Rules = append(ing.Spec.Rules, rule)
	}
	return ing
}

func TestMatch(t *testing.T) {
	type req struct {
		host, path string
		want       string // service, "" for no match
	}
	tests := []struct {
		name      string
		ingresses []*networkingv1.Ingress
		requests  []req
	}{{
		// The API reference's table of Prefix and Exact examples.
		name: "path types as the API reference's examples",
		ingresses: []*networkingv1.Ingress{testIngress("a", 0, "",
			testRule{"", []testPath{prefix("/", "root"), exact("/foo", "exact-foo"), prefix("/aaa/bb", "aaa-bb"),
				prefix("/aaa/bbb", "aaa-bbb"), prefix("/aaa/bbb/", "aaa-bbb-slash"), exact("/ccc/", "ccc-exact")}})},
		requests: []req{
			{"x", "/", "root"},
			{"x", "/anything", "root"},
			{"x", "/foo", "exact-foo"},
			{"x", "/foo/", "root"}, // Exact /foo does not match /foo/
			{"x", "/aaa/bb", "aaa-bb"},
			{"x", "/aaa/bbb", "aaa-bbb"}, // /aaa/bbb and /aaa/bbb/ are the same prefix; the first wins
			{"x", "/aaa/bbb/", "aaa-bbb"},
			{"x", "/aaa/bbb/ccc", "aaa-bbb"},
			{"x", "/aaa/bbbxyz", "root"}, // not an element-wise prefix of /aaa/bbb nor /aaa/bb
			{"x", "/aaa/bbxyz", "root"},
			{"x", "/ccc/", "ccc-exact"},
			{"x", "/ccc", "root"},
		},
	}, {
		name: "longest path first, Exact before Prefix at equal length, ImplementationSpecific as Prefix",
		ingresses: []*networkingv1.Ingress{testIngress("a", 0, "",
			testRule{"h", []testPath{prefix("/api", "api"), implSpecific("/api/v1", "v1"), prefix("/api/v1/x", "x"),
				prefix("/same", "same-prefix"), exact("/same", "same-exact")}})},
		requests: []req{
			{"h", "/api/v2", "api"},
			{"h", "/api/v1/pods", "v1"},
			{"h", "/api/v1/x/y", "x"},
			{"h", "/same", "same-exact"},
			{"h", "/same/z", "same-prefix"},
			{"h", "/other", ""},
		},
	}, {
		name: "exact hosts before wildcards before rules without a host; a wildcard covers one label",
		ingresses: []*networkingv1.Ingress{testIngress("a", 0, "",
			testRule{"foo.example.com", []testPath{prefix("/only", "foo")}},
			testRule{"*.example.com", []testPath{prefix("/", "wild")}},
			testRule{"", []testPath{prefix("/", "any")}})},
		requests: []req{
			{"foo.example.com", "/only/x", "foo"},
			{"FOO.Example.COM:8080", "/only", "foo"},
			// the exact host is its own server: its unmatched paths do not fall to the wildcard
			{"foo.example.com", "/elsewhere", ""},
			{"bar.example.com", "/x", "wild"},
			{"bar.example.com:443", "/x", "wild"},
			{"a.bar.example.com", "/x", "any"},
			{"example.com", "/x", "any"},
			{"10.0.0.1", "/", "any"},
			{"[::1]:80", "/", "any"},
		},
	}, {
		name: "default backends: the host's Ingress's, then the oldest one's",
		ingresses: []*networkingv1.Ingress{
			testIngress("old", 10, "old-default", testRule{"old.test", []testPath{exact("/x", "old-x")}}),
			testIngress("new", 5, "new-default", testRule{"new.test", []testPath{exact("/x", "new-x")}}),
			testIngress("plain", 1, "", testRule{"plain.test", []testPath{exact("/x", "plain-x")}}),
		},
		requests: []req{
			{"old.test", "/x", "old-x"},
			{"old.test", "/y", "old-default"},
			{"new.test", "/y", "new-default"},
			{"plain.test", "/y", "old-default"},
			{"unknown.test", "/", "old-default"},
		},
	}, {
		name: "the older Ingress keeps a host and path both claim; others merge into the host",
		ingresses: []*networkingv1.Ingress{
			testIngress("young", 1, "", testRule{"h", []testPath{prefix("/", "young"), prefix("/young", "young-only")}}),
			testIngress("elder", 9, "", testRule{"h", []testPath{prefix("/", "elder")}}),
		},
		requests: []req{
			{"h", "/", "elder"},
			{"h", "/young/1", "young-only"},
		},
	}, {
		name:      "nothing at all",
		ingresses: nil,
		requests:  []req{{"h", "/", ""}},
	}, {
		name:      "a host rule without paths still gets the Ingress's default backend",
		ingresses: []*networkingv1.Ingress{testIngress("a", 0, "def", testRule{host: "h"})},
		requests:  []req{{"h", "/x", "def"}, {"other", "/", "def"}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := BuildRoutes(tt.ingresses)
			for _, q := range tt.requests {
				b, ok := r.Match(q.host, q.path)
				got := ""
				if ok {
					got = b.Service
				}
				if got != q.want {
					t.Errorf("Match(%q, %q) = %q, want %q", q.host, q.path, got, q.want)
				}
			}
		})
	}
}
