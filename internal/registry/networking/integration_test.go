package networking_test

import (
	"context"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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
