package networking_test

import (
	"context"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"mizzen/internal/testing/apiserver"
)

// TestIntegrationIPAddress runs IPAddresses, IPv4 and IPv6, through what a client does
// with them (as upstream's conformance spec does) behind a real mizzen apiserver.
func TestIntegrationIPAddress(t *testing.T) {
	c := kubernetes.NewForConfigOrDie(apiserver.Start(t)).NetworkingV1().IPAddresses()
	ctx := context.Background()
	parent := &networkingv1.ParentReference{Group: "mygroup", Resource: "myresources", Namespace: "foo", Name: "bar"}
	for name, kind := range map[string]string{"255.255.255.255": "broadcast", "fe80::42:1dff:fe84:f9e2": "link-local"} {
		ip := &networkingv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"type": kind}},
			Spec: networkingv1.IPAddressSpec{ParentRef: parent}}
		if _, err := c.Create(ctx, ip, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
	}
	for _, name := range []string{"2001:DB8::1", "not-an-ip"} {
		ip := &networkingv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: networkingv1.IPAddressSpec{ParentRef: parent}}
		if _, err := c.Create(ctx, ip, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
			t.Errorf("create %s: err = %v, want 422 Invalid", name, err)
		}
	}
	patched, err := c.Patch(ctx, "fe80::42:1dff:fe84:f9e2", types.MergePatchType, []byte(`{"metadata":{"annotations":{"patched":"true"}}}`), metav1.PatchOptions{})
	if err != nil || patched.Annotations["patched"] != "true" {
		t.Fatalf("patch = %v, %v", patched, err)
	}
	patched.Spec.ParentRef = &networkingv1.ParentReference{Resource: "services", Namespace: "default", Name: "web"}
	if _, err := c.Update(ctx, patched, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("changing parentRef: err = %v, want 422 Invalid", err)
	}
	list, err := c.List(ctx, metav1.ListOptions{LabelSelector: "type=broadcast"})
	if err != nil || len(list.Items) != 1 || list.Items[0].Name != "255.255.255.255" {
		t.Fatalf("list = %v, %v", list, err)
	}
	if err := c.Delete(ctx, "255.255.255.255", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if err := c.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "type=link-local"}); err != nil {
		t.Fatalf("deletecollection: %v", err)
	}
	if list, err := c.List(ctx, metav1.ListOptions{}); err != nil || len(list.Items) != 0 {
		t.Errorf("left after deleting = %v, %v", list, err)
	}
}

// TestIntegrationServiceCIDR: the apiserver shows its --service-cluster-ip-range as the
// Ready default ServiceCIDR, its status subresource included, as upstream's conformance
// spec reads it; a client's ServiceCIDR keeps its CIDRs.
func TestIntegrationServiceCIDR(t *testing.T) {
	cfg := apiserver.Start(t)
	c := kubernetes.NewForConfigOrDie(cfg).NetworkingV1().ServiceCIDRs()
	ctx := context.Background()
	def, err := c.Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the default ServiceCIDR: %v", err)
	}
	if len(def.Spec.CIDRs) != 1 || def.Spec.CIDRs[0] != "10.96.0.0/12" {
		t.Errorf("default cidrs = %v, want the apiserver's range 10.96.0.0/12", def.Spec.CIDRs)
	}
	gvr := networkingv1.SchemeGroupVersion.WithResource("servicecidrs")
	st, err := dynamic.NewForConfigOrDie(cfg).Resource(gvr).Get(ctx, "kubernetes", metav1.GetOptions{}, "status")
	if err != nil || st.GetUID() != def.UID || st.GetKind() != "ServiceCIDR" {
		t.Fatalf("status subresource = %v, %v", st, err)
	}
	conds, _, _ := unstructured.NestedSlice(st.Object, "status", "conditions")
	if len(conds) != 1 || conds[0].(map[string]interface{})["type"] != "Ready" || conds[0].(map[string]interface{})["status"] != "True" {
		t.Errorf("default conditions = %v, want Ready True", conds)
	}
	extra := &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: "extra"}, Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{"10.200.0.0/24"}}}
	created, err := c.Create(ctx, extra, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	created.Spec.CIDRs = []string{"10.201.0.0/24"}
	if _, err := c.Update(ctx, created, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("changing cidrs: err = %v, want 422 Invalid", err)
	}
	if list, err := c.List(ctx, metav1.ListOptions{}); err != nil || len(list.Items) != 2 {
		t.Errorf("list = %v, %v", list, err)
	}
}
