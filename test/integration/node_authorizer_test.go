package integration

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"mizzen/internal/testing/apiserver"
)

// TestNodeReadsTheSecretOfAPodOnceBoundToIt follows a pod as the scheduler's pods go:
// created without a node, then bound. A node may read the pod's Secret only while the
// pod is bound to it: the Node authorizer's graph, fed from the watch cache, leaves
// out a pod without a node (the feed does not even decode it) and takes it in with
// its binding.
func TestNodeReadsTheSecretOfAPodOnceBoundToIt(t *testing.T) {
	cp := apiserver.StartServer(t)
	ctx := context.Background()
	admin := kubernetes.NewForConfigOrDie(cp.AdminConfig)
	asNode := func(name string) *kubernetes.Clientset {
		cfg := rest.CopyConfig(cp.AdminConfig)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:node:" + name, Groups: []string{"system:nodes", "system:authenticated"}}
		return kubernetes.NewForConfigOrDie(cfg)
	}
	nodeA, nodeB := asNode("node-a"), asNode("node-b")
	if _, err := admin.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	podUsing := func(name, secret, node string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "busybox"}},
				Volumes: []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secret}}}}}}
	}
	for _, name := range []string{"unbound-secret", "marker-secret"} {
		if _, err := admin.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	readSecret := func(c *kubernetes.Clientset, name string) func() error {
		return func() error {
			_, err := c.CoreV1().Secrets("default").Get(ctx, name, metav1.GetOptions{})
			return err
		}
	}
	forbidden := func(c *kubernetes.Clientset, name string) func() error {
		return func() error {
			if err := readSecret(c, name)(); !apierrors.IsForbidden(err) {
				return fmt.Errorf("reading secret %s: %v, want 403 Forbidden", name, err)
			}
			return nil
		}
	}

	// The pod without a node, then one made on node-a: once node-a reads the second
	// pod's Secret, its graph has every change before, the first pod's creation too.
	if _, err := admin.CoreV1().Pods("default").Create(ctx, podUsing("pending", "unbound-secret", ""), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CoreV1().Pods("default").Create(ctx, podUsing("marker", "marker-secret", "node-a"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "node-a reading the Secret of its pod", readSecret(nodeA, "marker-secret"))
	if err := forbidden(nodeA, "unbound-secret")(); err != nil {
		t.Errorf("before the binding: %v", err)
	}

	// Bound to node-a: node-a may read its Secret, node-b still may not.
	binding := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "pending"}, Target: corev1.ObjectReference{Kind: "Node", Name: "node-a"}}
	if err := admin.CoreV1().Pods("default").Bind(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "node-a reading the Secret of the pod bound to it", readSecret(nodeA, "unbound-secret"))
	if err := forbidden(nodeB, "unbound-secret")(); err != nil {
		t.Errorf("node-b: %v", err)
	}

	// Deleted: node-a no longer may.
	if err := admin.CoreV1().Pods("default").Delete(ctx, "pending", metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "node-a refused the Secret of the deleted pod", forbidden(nodeA, "unbound-secret"))
}
