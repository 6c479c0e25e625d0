package apiserver

import (
	"net/http/httptest"
	"net/url"
	"testing"
)

// A list or watch that selects one object by name is authorized as a request for
// that object, as upstream's request info does; anything else names nothing.
func TestSelectedName(t *testing.T) {
	for _, tc := range []struct{ selector, want string }{
		{"metadata.name=kube-root-ca.crt", "kube-root-ca.crt"},
		{"metadata.name==cm", "cm"},
		{"metadata.name=cm,metadata.namespace=ns", "cm"},
		{"metadata.name!=cm", ""},
		{"spec.nodeName=a", ""},
		{"metadata.name=..", ""},
		{"metadata.name=a/b", ""},
		{"", ""},
	} {
		r := httptest.NewRequest("GET", "/api/v1/namespaces/ns/configmaps?fieldSelector="+url.QueryEscape(tc.selector), nil)
		if got := selectedName(r); got != tc.want {
			t.Errorf("fieldSelector %q: got %q, want %q", tc.selector, got, tc.want)
		}
	}
}
