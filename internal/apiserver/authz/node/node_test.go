package node

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"mizzen/internal/apiserver/authz"
	"mizzen/internal/registry"
)

func podOn(name, node string, volumes ...corev1.Volume) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
		Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: "sa-" + name, Volumes: volumes,
			Containers: []corev1.Container{{Name: "c", Env: []corev1.EnvVar{{Name: "E", ValueFrom: &corev1.EnvVarSource{
				ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "env-" + name}}}}}}}}}
}

func secretVolume(name string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: name}}}
}

func claimVolume(name string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name}}}
}

func TestAuthorize(t *testing.T) {
	a := New([]rbacv1.PolicyRule{{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{""}, Resources: []string{"pods"}}})
	withClaims := podOn("pa", "a", secretVolume("only-a"), secretVolume("shared"), claimVolume("claim-a"))
	named, generated := "claim-pa", "pa-gpu-x7k2"
	withClaims.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "fixed", ResourceClaimName: &named}, {Name: "gpu", ResourceClaimTemplateName: &named}}
	withClaims.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: &generated}}
	a.Replace(podsGR, []runtime.Object{
		withClaims,
		podOn("pb", "b", secretVolume("shared")),
		podOn("unbound", "", secretVolume("unbound-secret")),
	})
	a.Replace(pvcsGR, []runtime.Object{&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "claim-a", Namespace: "ns"},
		Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-a"}}})
	node := func(n string) registry.User {
		return registry.User{Name: "system:node:" + n, Groups: []string{"system:nodes", "system:authenticated"}}
	}
	get := func(u registry.User, resource, ns, name string) authz.Attributes {
		return authz.Attributes{User: u, Verb: "get", ResourceRequest: true, Resource: resource, Namespace: ns, Name: name}
	}
	claim := func(u registry.User, verb, name string) authz.Attributes {
		return authz.Attributes{User: u, Verb: verb, ResourceRequest: true, Group: "resource.k8s.io", Resource: "resourceclaims", Namespace: "ns", Name: name}
	}
	cases := []struct {
		name  string
		attrs authz.Attributes
		allow bool
	}{
		{"own pod's secret", get(node("a"), "secrets", "ns", "only-a"), true},
		{"another node's pod's secret", get(node("b"), "secrets", "ns", "only-a"), false},
		{"shared secret from b", get(node("b"), "secrets", "ns", "shared"), true},
		{"unbound pod's secret", get(node("a"), "secrets", "ns", "unbound-secret"), false},
		{"env configmap", get(node("a"), "configmaps", "ns", "env-pa"), true},
		{"env configmap of b's pod", get(node("a"), "configmaps", "ns", "env-pb"), false},
		{"pvc", get(node("a"), "persistentvolumeclaims", "ns", "claim-a"), true},
		{"bound pv", get(node("a"), "persistentvolumes", "", "pv-a"), true},
		{"pv from b", get(node("b"), "persistentvolumes", "", "pv-a"), false},
		{"list secrets", authz.Attributes{User: node("a"), Verb: "list", ResourceRequest: true, Resource: "secrets", Namespace: "ns"}, false},
		{"watch own pod's configmap by name", authz.Attributes{User: node("a"), Verb: "watch", ResourceRequest: true, Resource: "configmaps", Namespace: "ns", Name: "env-pa"}, true},
		{"list own pod's secret by name", authz.Attributes{User: node("a"), Verb: "list", ResourceRequest: true, Resource: "secrets", Namespace: "ns", Name: "only-a"}, true},
		{"watch b's pod's configmap by name", authz.Attributes{User: node("a"), Verb: "watch", ResourceRequest: true, Resource: "configmaps", Namespace: "ns", Name: "env-pb"}, false},
		{"update own pod's secret", authz.Attributes{User: node("a"), Verb: "update", ResourceRequest: true, Resource: "secrets", Namespace: "ns", Name: "only-a"}, false},
		{"watch bound pv", authz.Attributes{User: node("a"), Verb: "watch", ResourceRequest: true, Resource: "persistentvolumes", Name: "pv-a"}, false},
		{"sa token", authz.Attributes{User: node("a"), Verb: "create", ResourceRequest: true, Resource: "serviceaccounts", Subresource: "token", Namespace: "ns", Name: "sa-pa"}, true},
		{"other sa token", authz.Attributes{User: node("a"), Verb: "create", ResourceRequest: true, Resource: "serviceaccounts", Subresource: "token", Namespace: "ns", Name: "sa-pb"}, false},
		{"rules: list pods", authz.Attributes{User: node("a"), Verb: "list", ResourceRequest: true, Resource: "pods"}, true},
		{"rules: delete nodes", authz.Attributes{User: node("a"), Verb: "delete", ResourceRequest: true, Resource: "nodes", Name: "b"}, false},
		{"not a node", get(registry.User{Name: "system:node:a"}, "secrets", "ns", "only-a"), false},
		{"own pod's resource claim", claim(node("a"), "get", "claim-pa"), true},
		{"own pod's generated resource claim", claim(node("a"), "get", "pa-gpu-x7k2"), true},
		{"another node's pod's resource claim", claim(node("b"), "get", "claim-pa"), false},
		{"list resource claims", claim(node("a"), "list", ""), false},
	}
	for _, tc := range cases {
		if ok, reason := a.Authorize(context.Background(), tc.attrs); ok != tc.allow {
			t.Errorf("%s: allowed %v (%q), want %v", tc.name, ok, reason, tc.allow)
		}
	}
	// The graph follows changes: the pod moving away (deleted) takes its uses along.
	a.Apply(podOn("pa", "a"), true)
	if ok, _ := a.Authorize(context.Background(), get(node("a"), "secrets", "ns", "only-a")); ok {
		t.Error("the deleted pod's secret is still readable")
	}
	if ok, reason := a.Authorize(context.Background(), get(node("b"), "secrets", "ns", "shared")); !ok {
		t.Errorf("b's own pod's secret: %q", reason)
	}
	if _, reason := a.Authorize(context.Background(), get(node("a"), "secrets", "ns", "shared")); reason != "no relationship found between node 'a' and this object" {
		t.Errorf("reason %q", reason)
	}
}

// A pod is left out unfed only when the cache's fields say it has no node: never a
// bound pod, never an object whose fields lack the node, never a claim.
func TestIgnoresOnlyPodsWithoutANode(t *testing.T) {
	a := New(nil)
	for _, c := range []struct {
		name   string
		gr     schema.GroupResource
		fields fields.Set
		want   bool
	}{
		{"pod without a node", podsGR, fields.Set{"spec.nodeName": "", "metadata.name": "p"}, true},
		{"bound pod", podsGR, fields.Set{"spec.nodeName": "a"}, false},
		{"pod whose fields lack the node", podsGR, fields.Set{"metadata.name": "p"}, false},
		{"claim", pvcsGR, fields.Set{"spec.nodeName": ""}, false},
	} {
		if got := a.Ignores(c.gr, c.fields); got != c.want {
			t.Errorf("%s: Ignores = %v, want %v", c.name, got, c.want)
		}
	}
}
