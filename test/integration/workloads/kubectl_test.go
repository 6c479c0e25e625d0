package workloads

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
	"k8s.io/kubectl/pkg/polymorphichelpers"
)

// rolloutStatus asks kubectl's own `rollout status` logic about obj.
func rolloutStatus(t *testing.T, kind string, obj runtime.Object) (string, bool) {
	t.Helper()
	viewer, err := polymorphichelpers.StatusViewerFor(schema.GroupKind{Group: "apps", Kind: kind})
	if err != nil {
		t.Fatal(err)
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	msg, done, err := viewer.Status(&unstructured.Unstructured{Object: m}, 0)
	if err != nil {
		t.Fatalf("rollout status: %v", err)
	}
	return msg, done
}

// undo runs kubectl's own `rollout undo` logic on obj.
func undo(t *testing.T, client kubernetes.Interface, kind string, obj runtime.Object) {
	t.Helper()
	rb, err := polymorphichelpers.RollbackerFor(schema.GroupKind{Group: "apps", Kind: kind}, client)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := rb.Rollback(obj, nil, 0, cmdutil.DryRunNone)
	if err != nil {
		t.Fatalf("rollout undo: %v", err)
	}
	if !strings.Contains(msg, "rolled back") {
		t.Fatalf("rollout undo said %q", msg)
	}
}

func TestKubectlRolloutStatusAndUndoOnADeployment(t *testing.T) {
	ctx, client := cluster(t)
	kubelet(ctx, t, client)
	labels := map[string]string{"app": "shop"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "shop"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr(int32(2)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "shop", Image: "shop:1"}}}},
		},
	}
	if _, err := client.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	get := func() *appsv1.Deployment {
		got, err := client.AppsV1().Deployments("default").Get(ctx, "shop", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	waitRolledOut := func(what string) {
		eventually(t, what, func() (bool, error) {
			_, done := rolloutStatus(t, "Deployment", get())
			return done, nil
		})
	}
	waitRolledOut("rollout of shop:1")
	if msg, _ := rolloutStatus(t, "Deployment", get()); msg != "deployment \"shop\" successfully rolled out\n" {
		t.Errorf("rollout status said %q", msg)
	}
	first, err := client.AppsV1().ReplicaSets("default").List(ctx, metav1.ListOptions{})
	if err != nil || len(first.Items) != 1 {
		t.Fatalf("replica sets %v, %v", first, err)
	}
	v2 := get()
	v2.Spec.Template.Spec.Containers[0].Image = "shop:2"
	if _, err := client.AppsV1().Deployments("default").Update(ctx, v2, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRolledOut("rollout of shop:2")

	undo(t, client, "Deployment", get())
	eventually(t, "rollback to shop:1", func() (bool, error) {
		d := get()
		_, done := rolloutStatus(t, "Deployment", d)
		return done && d.Spec.Template.Spec.Containers[0].Image == "shop:1" && d.Annotations["deployment.kubernetes.io/revision"] == "3", nil
	})
	rss, err := client.AppsV1().ReplicaSets("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rss.Items) != 2 {
		t.Fatalf("%d replica sets after the rollback, want the first one reused", len(rss.Items))
	}
	for _, rs := range rss.Items {
		if rs.Name == first.Items[0].Name && (rs.Annotations["deployment.kubernetes.io/revision"] != "3" || *rs.Spec.Replicas != 2) {
			t.Errorf("reused replica set %s: annotations %v replicas %d", rs.Name, rs.Annotations, *rs.Spec.Replicas)
		}
	}
}

func TestKubectlRolloutUndoOnADaemonSet(t *testing.T) {
	ctx, client := cluster(t)
	kubelet(ctx, t, client)
	if _, err := client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"app": "logs"}
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "logs"},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "logs", Image: "logs:1"}}}},
		},
	}
	if _, err := client.AppsV1().DaemonSets("default").Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	get := func() *appsv1.DaemonSet {
		got, err := client.AppsV1().DaemonSets("default").Get(ctx, "logs", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	runs := func(image string) func() (bool, error) {
		return func() (bool, error) {
			d := get()
			if _, done := rolloutStatus(t, "DaemonSet", d); !done {
				return false, nil
			}
			pods, err := client.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			n := 0
			for _, p := range pods.Items {
				if p.DeletionTimestamp == nil {
					if p.Spec.Containers[0].Image != image {
						return false, nil
					}
					n++
				}
			}
			return n == 1, nil
		}
	}
	eventually(t, "logs:1 on n1", runs("logs:1"))
	v2 := get()
	v2.Spec.Template.Spec.Containers[0].Image = "logs:2"
	if _, err := client.AppsV1().DaemonSets("default").Update(ctx, v2, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "logs:2 on n1", runs("logs:2"))
	undo(t, client, "DaemonSet", get())
	eventually(t, "logs:1 back on n1", runs("logs:1"))
}

func TestKubectlRolloutUndoOnAStatefulSet(t *testing.T) {
	ctx, client := cluster(t)
	kubelet(ctx, t, client)
	labels := map[string]string{"app": "kv"}
	set := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "kv"},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    ptr(int32(2)),
			ServiceName: "kv",
			Selector:    &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "kv", Image: "kv:1"}}}},
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType},
		},
	}
	if _, err := client.AppsV1().StatefulSets("default").Create(ctx, set, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	get := func() *appsv1.StatefulSet {
		got, err := client.AppsV1().StatefulSets("default").Get(ctx, "kv", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	runs := func(image string) func() (bool, error) {
		return func() (bool, error) {
			s := get()
			if _, done := rolloutStatus(t, "StatefulSet", s); !done {
				return false, nil
			}
			for _, name := range []string{"kv-0", "kv-1"} {
				p, err := client.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
				if err != nil || p.Spec.Containers[0].Image != image || p.DeletionTimestamp != nil {
					return false, nil
				}
			}
			return true, nil
		}
	}
	eventually(t, "kv:1 rolled out", runs("kv:1"))
	v2 := get()
	v2.Spec.Template.Spec.Containers[0].Image = "kv:2"
	if _, err := client.AppsV1().StatefulSets("default").Update(ctx, v2, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "kv:2 rolled out", runs("kv:2"))
	undo(t, client, "StatefulSet", get())
	eventually(t, "kv:1 back", runs("kv:1"))
}
