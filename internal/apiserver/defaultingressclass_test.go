package apiserver_test

import (
	"context"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"mizzen/internal/testing/apiserver"
)

// TestDefaultIngressClass: an Ingress created without a class gets the default
// IngressClass, the newest when several are default; one with a class, or the legacy
// annotation, keeps what it has; without a default class nothing is set.
func TestDefaultIngressClass(t *testing.T) {
	client := kubernetes.NewForConfigOrDie(apiserver.Start(t))
	ctx := context.Background()
	create := func(name string, class *string, annotations map[string]string) *string {
		t.Helper()
		ing, err := client.NetworkingV1().Ingresses("default").Create(ctx, &networkingv1.Ingress{
			ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations},
			Spec: networkingv1.IngressSpec{IngressClassName: class, DefaultBackend: &networkingv1.IngressBackend{
				Service: &networkingv1.IngressServiceBackend{Name: "s", Port: networkingv1.ServiceBackendPort{Number: 80}}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return ing.Spec.IngressClassName
	}
	classFor := func(name string, isDefault bool) {
		t.Helper()
		c := &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: networkingv1.IngressClassSpec{Controller: "example.com/" + name}}
		if isDefault {
			c.Annotations = map[string]string{"ingressclass.kubernetes.io/is-default-class": "true"}
		}
		if _, err := client.NetworkingV1().IngressClasses().Create(ctx, c, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if got := create("before", nil, nil); got != nil {
		t.Errorf("without a default class: ingressClassName %q", *got)
	}
	classFor("plain", false)
	classFor("first", true)
	eventuallyClass := func(name, want string) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			got := create(name, nil, nil)
			if got != nil && *got == want {
				return
			}
			_ = client.NetworkingV1().Ingresses("default").Delete(ctx, name, metav1.DeleteOptions{})
			if time.Now().After(deadline) {
				t.Fatalf("ingress %s: ingressClassName %v, want %s", name, got, want)
			}
		}
	}
	eventuallyClass("one-default", "first")
	time.Sleep(1100 * time.Millisecond) // creation timestamps have a resolution of a second
	classFor("second", true)
	eventuallyClass("two-defaults", "second")
	if got := create("explicit", ptr.To("plain"), nil); got == nil || *got != "plain" {
		t.Errorf("an explicit class became %v", got)
	}
	if got := create("legacy", nil, map[string]string{"kubernetes.io/ingress.class": "nginx"}); got != nil {
		t.Errorf("an Ingress with the legacy annotation got class %q", *got)
	}
}
