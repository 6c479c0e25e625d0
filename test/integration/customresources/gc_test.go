package customresources

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	"mizzen/internal/controller/garbagecollector"
)

// TestGarbageCollection runs the garbage collector against custom resources as owners
// and as dependents, with background and foreground deletion.
func TestGarbageCollection(t *testing.T) {
	dyn, cfg, _ := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := kubernetes.NewForConfigOrDie(cfg)
	gc := garbagecollector.New(client, metadata.NewForConfigOrDie(cfg), discovery.NewDiscoveryClientForConfigOrDie(cfg), nil)
	go gc.Run(ctx, 2)

	certs := dyn.Resource(certGVR).Namespace("default")
	owner, err := certs.Create(ctx, cert("owner", validSpec()), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ref := metav1.OwnerReference{APIVersion: "certs.example.com/v1", Kind: "Certificate", Name: owner.GetName(), UID: owner.GetUID()}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owned", OwnerReferences: []metav1.OwnerReference{ref}}}
	if _, err := client.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A custom resource owned by a ConfigMap.
	parent, err := client.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "parent"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	child := cert("child", validSpec())
	child.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "parent", UID: parent.UID}})
	if _, err := certs.Create(ctx, child, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	if err := certs.Delete(ctx, "owner", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the ConfigMap owned by a deleted Certificate is collected", func() string {
		if _, err := client.CoreV1().ConfigMaps("default").Get(ctx, "owned", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return "still there"
		}
		return ""
	})
	if err := client.CoreV1().ConfigMaps("default").Delete(ctx, "parent", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the Certificate owned by a deleted ConfigMap is collected", func() string {
		if _, err := certs.Get(ctx, "child", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return "still there"
		}
		return ""
	})

	// Foreground: the owner waits, with its finalizer, until its dependents are gone.
	fg, err := certs.Create(ctx, cert("fg", validSpec()), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dep := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "fg-dep", OwnerReferences: []metav1.OwnerReference{{
		APIVersion: "certs.example.com/v1", Kind: "Certificate", Name: "fg", UID: fg.GetUID(), BlockOwnerDeletion: ptr(true)}}}}
	if _, err := client.CoreV1().ConfigMaps("default").Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	fgPolicy := metav1.DeletePropagationForeground
	if err := certs.Delete(ctx, "fg", metav1.DeleteOptions{PropagationPolicy: &fgPolicy}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "foreground deletion", func() string {
		if _, err := certs.Get(ctx, "fg", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return "owner still there"
		}
		if _, err := client.CoreV1().ConfigMaps("default").Get(ctx, "fg-dep", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return "dependent still there"
		}
		return ""
	})
}

func ptr[T any](v T) *T { return &v }
