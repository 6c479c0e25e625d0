package rbac

import (
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"

	"mizzen/internal/apiserver/authz"
)

func res(verb, group, resource, subresource, ns, name string) authz.Attributes {
	return authz.Attributes{Verb: verb, ResourceRequest: true, Group: group, Resource: resource, Subresource: subresource, Namespace: ns, Name: name}
}

func path(verb, p string) authz.Attributes { return authz.Attributes{Verb: verb, Path: p} }

func TestRuleAllows(t *testing.T) {
	tests := []struct {
		name  string
		rule  rbacv1.PolicyRule
		attrs authz.Attributes
		want  bool
	}{
		{"exact", rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}}, res("get", "", "pods", "", "ns", "p"), true},
		{"other verb", rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}}, res("delete", "", "pods", "", "ns", "p"), false},
		{"other group", rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{"apps"}, Resources: []string{"pods"}}, res("get", "", "pods", "", "ns", "p"), false},
		{"star verb and group", rbacv1.PolicyRule{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"deployments"}}, res("patch", "apps", "deployments", "", "ns", "d"), true},
		{"star resource covers subresources", rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"*"}}, res("get", "", "pods", "log", "ns", "p"), true},
		{"resource does not cover its subresource", rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}}, res("get", "", "pods", "log", "ns", "p"), false},
		{"subresource", rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods/log"}}, res("get", "", "pods", "log", "ns", "p"), true},
		{"subresource does not cover the resource", rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods/log"}}, res("get", "", "pods", "", "ns", "p"), false},
		{"*/scale", rbacv1.PolicyRule{Verbs: []string{"update"}, APIGroups: []string{"apps"}, Resources: []string{"*/scale"}}, res("update", "apps", "deployments", "scale", "ns", "d"), true},
		{"*/scale is not */status", rbacv1.PolicyRule{Verbs: []string{"update"}, APIGroups: []string{"apps"}, Resources: []string{"*/scale"}}, res("update", "apps", "deployments", "status", "ns", "d"), false},
		{"*/scale is not the resource", rbacv1.PolicyRule{Verbs: []string{"update"}, APIGroups: []string{"apps"}, Resources: []string{"*/scale"}}, res("update", "apps", "deployments", "", "ns", "d"), false},
		{"resource name", rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"a", "b"}}, res("get", "", "configmaps", "", "ns", "b"), true},
		{"other resource name", rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"a"}}, res("get", "", "configmaps", "", "ns", "c"), false},
		{"resource names never allow list", rbacv1.PolicyRule{Verbs: []string{"list"}, APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"a"}}, res("list", "", "configmaps", "", "ns", ""), false},
		{"path", rbacv1.PolicyRule{Verbs: []string{"get"}, NonResourceURLs: []string{"/version"}}, path("get", "/version"), true},
		{"path prefix", rbacv1.PolicyRule{Verbs: []string{"get"}, NonResourceURLs: []string{"/apis/*"}}, path("get", "/apis/apps/v1"), true},
		{"path prefix needs its slash", rbacv1.PolicyRule{Verbs: []string{"get"}, NonResourceURLs: []string{"/apis/*"}}, path("get", "/apis"), false},
		{"any path", rbacv1.PolicyRule{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}}, path("create", "/anything"), true},
		{"other path", rbacv1.PolicyRule{Verbs: []string{"get"}, NonResourceURLs: []string{"/version"}}, path("get", "/healthz"), false},
		{"path verb", rbacv1.PolicyRule{Verbs: []string{"get"}, NonResourceURLs: []string{"/version"}}, path("create", "/version"), false},
		{"resource rule is no path rule", rbacv1.PolicyRule{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}}, path("get", "/version"), false},
		{"path rule is no resource rule", rbacv1.PolicyRule{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}}, res("get", "", "pods", "", "ns", "p"), false},
	}
	for _, tt := range tests {
		if got := RuleAllows(tt.attrs, &tt.rule); got != tt.want {
			t.Errorf("%s: RuleAllows(%+v, %s) = %v, want %v", tt.name, tt.attrs, CompactString(tt.rule), got, tt.want)
		}
	}
}

func TestCovers(t *testing.T) {
	pods := rbacv1.PolicyRule{Verbs: []string{"get", "list"}, APIGroups: []string{""}, Resources: []string{"pods"}}
	tests := []struct {
		name        string
		owner       []rbacv1.PolicyRule
		servant     []rbacv1.PolicyRule
		wantMissing []string
	}{
		{"same", []rbacv1.PolicyRule{pods}, []rbacv1.PolicyRule{pods}, nil},
		{"star covers", []rbacv1.PolicyRule{{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}}}, []rbacv1.PolicyRule{pods}, nil},
		{"split across rules", []rbacv1.PolicyRule{
			{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}},
			{Verbs: []string{"list"}, APIGroups: []string{""}, Resources: []string{"pods", "services"}},
		}, []rbacv1.PolicyRule{pods}, nil},
		{"missing verbs merged per resource", []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}}},
			[]rbacv1.PolicyRule{{Verbs: []string{"get", "delete", "create"}, APIGroups: []string{""}, Resources: []string{"pods", "secrets"}}},
			[]string{
				`{APIGroups:[""], Resources:["pods"], Verbs:["delete" "create"]}`,
				`{APIGroups:[""], Resources:["secrets"], Verbs:["get" "delete" "create"]}`,
			}},
		{"star is only covered by star", []rbacv1.PolicyRule{pods}, []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"*"}}},
			[]string{`{APIGroups:[""], Resources:["*"], Verbs:["get"]}`}},
		{"named owner covers only those names", []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"a"}}},
			[]rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"a", "b"}}},
			[]string{`{APIGroups:[""], Resources:["configmaps"], ResourceNames:["b"], Verbs:["get"]}`}},
		{"named owner does not cover unnamed", []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"a"}}},
			[]rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"configmaps"}}},
			[]string{`{APIGroups:[""], Resources:["configmaps"], Verbs:["get"]}`}},
		{"*/scale owner", []rbacv1.PolicyRule{{Verbs: []string{"update"}, APIGroups: []string{"apps"}, Resources: []string{"*/scale"}}},
			[]rbacv1.PolicyRule{{Verbs: []string{"update"}, APIGroups: []string{"apps"}, Resources: []string{"deployments/scale", "deployments"}}},
			[]string{`{APIGroups:["apps"], Resources:["deployments"], Verbs:["update"]}`}},
		{"url prefix", []rbacv1.PolicyRule{{Verbs: []string{"get"}, NonResourceURLs: []string{"/apis/*"}}},
			[]rbacv1.PolicyRule{{Verbs: []string{"get"}, NonResourceURLs: []string{"/apis/apps", "/healthz"}}},
			[]string{`{NonResourceURLs:["/healthz"], Verbs:["get"]}`}},
	}
	for _, tt := range tests {
		ok, missing := Covers(tt.owner, tt.servant)
		var got []string
		for _, r := range missing {
			got = append(got, CompactString(r))
		}
		if ok != (len(tt.wantMissing) == 0) || len(got) != len(tt.wantMissing) {
			t.Errorf("%s: Covers = %v, missing %q; want missing %q", tt.name, ok, got, tt.wantMissing)
			continue
		}
		for i := range got {
			if got[i] != tt.wantMissing[i] {
				t.Errorf("%s: missing[%d] = %s, want %s", tt.name, i, got[i], tt.wantMissing[i])
			}
		}
	}
}
