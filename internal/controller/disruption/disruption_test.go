package disruption

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"mizzen/internal/controller/util"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func ptr[T any](v T) *T { return &v }

var (
	web = &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-web"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr(int32(3))}}
	webRS = &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web-abc", Namespace: "default", UID: "uid-web-abc",
		OwnerReferences: []metav1.OwnerReference{*util.NewControllerRef(web, appsv1.SchemeGroupVersion.WithKind("Deployment"))}},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr(int32(3))}}
	db = &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "default", UID: "uid-db"},
		Spec: appsv1.StatefulSetSpec{Replicas: ptr(int32(5))}}
)

func pod(name string, owner metav1.Object, kind string, ready bool) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name),
		Labels: map[string]string{"app": "x"}}}
	if owner != nil {
		gv := appsv1.SchemeGroupVersion
		p.OwnerReferences = []metav1.OwnerReference{*util.NewControllerRef(owner, gv.WithKind(kind))}
	}
	if ready {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	}
	return p
}

func webPods(ready int) []runtime.Object {
	var out []runtime.Object
	for i := range 3 {
		out = append(out, pod(fmt.Sprintf("web-%d", i), webRS, "ReplicaSet", i < ready))
	}
	return out
}

func budget(minAvailable, maxUnavailable *intstr.IntOrString) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "budget", Namespace: "default", Generation: 4},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: minAvailable, MaxUnavailable: maxUnavailable,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}}},
	}
}

func run(t *testing.T, pdb *policyv1.PodDisruptionBudget, objs ...runtime.Object) policyv1.PodDisruptionBudgetStatus {
	t.Helper()
	all := append([]runtime.Object{pdb, web, webRS, db}, objs...)
	client := fake.NewClientset(all...)
	f := informers.NewSharedInformerFactory(client, 0)
	c := New(client, f, clocktesting.NewFakeClock(t0))
	for _, o := range all {
		switch o.(type) {
		case *corev1.Pod:
			f.Core().V1().Pods().Informer().GetIndexer().Add(o)
		case *appsv1.Deployment:
			f.Apps().V1().Deployments().Informer().GetIndexer().Add(o)
		case *appsv1.ReplicaSet:
			f.Apps().V1().ReplicaSets().Informer().GetIndexer().Add(o)
		case *appsv1.StatefulSet:
			f.Apps().V1().StatefulSets().Informer().GetIndexer().Add(o)
		case *policyv1.PodDisruptionBudget:
			f.Policy().V1().PodDisruptionBudgets().Informer().GetIndexer().Add(o)
		}
	}
	if err := c.Sync(context.Background(), "default/budget"); err != nil {
		t.Fatal(err)
	}
	got, err := client.PolicyV1().PodDisruptionBudgets("default").Get(context.Background(), "budget", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return got.Status
}

func TestBudgetStatus(t *testing.T) {
	two, one, half := intstr.FromInt32(2), intstr.FromInt32(1), intstr.FromString("50%")
	for _, tt := range []struct {
		name                                string
		pdb                                 *policyv1.PodDisruptionBudget
		objs                                []runtime.Object
		healthy, desired, expected, allowed int32
		reason                              string
	}{
		{"minAvailable 2 of 3 ready", budget(&two, nil), webPods(3), 3, 2, 3, 1, ReasonSufficientPods},
		{"minAvailable 2 of 2 ready", budget(&two, nil), webPods(2), 2, 2, 3, 0, ReasonInsufficientPods},
		{"maxUnavailable 1 uses the deployment's scale", budget(nil, &one), webPods(3), 3, 2, 3, 1, ReasonSufficientPods},
		{"minAvailable 50% rounds up", budget(&half, nil), webPods(2), 2, 2, 3, 0, ReasonInsufficientPods},
		{"statefulset scale counts missing pods", budget(nil, &one),
			[]runtime.Object{pod("db-0", db, "StatefulSet", true), pod("db-1", db, "StatefulSet", true), pod("db-2", db, "StatefulSet", true)},
			3, 4, 5, 0, ReasonInsufficientPods},
		{"bare pods with minAvailable count as they are", budget(&one, nil),
			[]runtime.Object{pod("a", nil, "", true), pod("b", nil, "", true)}, 2, 1, 2, 1, ReasonSufficientPods},
		{"bare pods with maxUnavailable fail safe", budget(nil, &one),
			[]runtime.Object{pod("a", nil, "", true)}, 0, 0, 0, 0, ReasonSyncFailed},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st := run(t, tt.pdb, tt.objs...)
			if st.CurrentHealthy != tt.healthy || st.DesiredHealthy != tt.desired || st.ExpectedPods != tt.expected ||
				st.DisruptionsAllowed != tt.allowed || st.ObservedGeneration != 4 {
				t.Errorf("status healthy=%d desired=%d expected=%d allowed=%d gen=%d; want %d %d %d %d 4",
					st.CurrentHealthy, st.DesiredHealthy, st.ExpectedPods, st.DisruptionsAllowed, st.ObservedGeneration,
					tt.healthy, tt.desired, tt.expected, tt.allowed)
			}
			c := meta.FindStatusCondition(st.Conditions, policyv1.DisruptionAllowedCondition)
			if c == nil || c.Reason != tt.reason || (c.Status == metav1.ConditionTrue) != (tt.allowed > 0) {
				t.Errorf("DisruptionAllowed = %+v, want reason %s", c, tt.reason)
			}
		})
	}
}

func TestRecentlyEvictedPodsAreNotHealthy(t *testing.T) {
	one := intstr.FromInt32(1)
	pdb := budget(&one, nil)
	pdb.Status.DisruptedPods = map[string]metav1.Time{
		"web-0": metav1.NewTime(t0.Add(-30 * time.Second)), // eviction in flight
		"web-1": metav1.NewTime(t0.Add(-3 * time.Minute)),  // delete never came: healthy again
	}
	st := run(t, pdb, webPods(3)...)
	if st.CurrentHealthy != 2 || st.DisruptionsAllowed != 1 {
		t.Errorf("healthy=%d allowed=%d, want 2 and 1", st.CurrentHealthy, st.DisruptionsAllowed)
	}
	if _, ok := st.DisruptedPods["web-0"]; !ok || len(st.DisruptedPods) != 1 {
		t.Errorf("disruptedPods %v, want only web-0", st.DisruptedPods)
	}
}
