package util

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
)

func TestExpectations(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	e := NewExpectations(func() time.Time { return now })
	if !e.Satisfied("ns/a") {
		t.Fatal("nothing expected yet, yet not satisfied")
	}
	e.Expect("ns/a", 2, []types.UID{"x"})
	steps := []struct {
		do   func()
		want bool
	}{
		{func() { e.CreationObserved("ns/a") }, false},
		{func() { e.CreationObserved("ns/a") }, false},
		{func() { e.DeletionObserved("ns/a", "y") }, false}, // not the pod we deleted
		{func() { e.DeletionObserved("ns/a", "x") }, true},
		{func() { e.DeletionObserved("ns/a", "x") }, true}, // seen twice counts once
	}
	for i, s := range steps {
		s.do()
		if got := e.Satisfied("ns/a"); got != s.want {
			t.Errorf("step %d: satisfied=%v, want %v", i, got, s.want)
		}
	}
	e.Expect("ns/b", 1, nil)
	now = now.Add(ExpectationsTimeout + time.Second)
	if !e.Satisfied("ns/b") {
		t.Error("expectations older than the timeout still block")
	}
}

func TestRunWorkersRetriesFailedKeys(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	q := NewQueue("test")
	var calls atomic.Int32
	RunWorkers(ctx, "test", q, 2, func(_ context.Context, key string) error {
		if calls.Add(1) < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	q.Add("ns/a")
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return calls.Load() >= 3 && q.Len() == 0 && q.NumRequeues("ns/a") == 0, nil
	})
	if err != nil {
		t.Fatalf("key was synced %d times and has %d requeues; want success on the third try and forgotten", calls.Load(), q.NumRequeues("ns/a"))
	}
}

func TestPodAvailability(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ready := func(since time.Duration) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady,
			Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-since))}}}}
	}
	for _, tt := range []struct {
		pod      *corev1.Pod
		minReady int32
		want     bool
	}{
		{ready(time.Second), 0, true},
		{ready(5 * time.Second), 10, false},
		{ready(11 * time.Second), 10, true},
		{&corev1.Pod{}, 0, false},
	} {
		if got := IsPodAvailable(tt.pod, tt.minReady, now); got != tt.want {
			t.Errorf("available(minReady=%d) = %v, want %v", tt.minReady, got, tt.want)
		}
	}
}

func TestComputeHashIsStableAndSensitive(t *testing.T) {
	a := &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx:1"}}}}
	b := a.DeepCopy()
	b.Spec.Containers[0].Image = "nginx:2"
	one := int32(1)
	if ComputeHash(a, nil) != ComputeHash(a.DeepCopy(), nil) {
		t.Error("equal templates hash differently")
	}
	if ComputeHash(a, nil) == ComputeHash(b, nil) || ComputeHash(a, nil) == ComputeHash(a, &one) {
		t.Error("different templates or collision counts hash equally")
	}
}

func TestControlledOrOrphans(t *testing.T) {
	inf := cache.NewSharedIndexInformer(&cache.ListWatch{}, &corev1.Pod{}, 0, cache.Indexers{})
	IndexByController(inf)
	IndexByController(inf) // a second controller sharing the informer
	owner := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "owner", Namespace: "a", UID: "u1"}}
	gvk := corev1.SchemeGroupVersion.WithKind("Pod")
	mk := func(ns, name string, ownerUID types.UID) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
		if ownerUID != "" {
			o := owner.DeepCopy()
			o.UID = ownerUID
			p.OwnerReferences = []metav1.OwnerReference{*NewControllerRef(o, gvk)}
		}
		return p
	}
	for _, p := range []*corev1.Pod{mk("a", "mine", "u1"), mk("a", "orphan", ""), mk("a", "theirs", "u2"), mk("b", "elsewhere", "u1"), mk("b", "orphan-b", "")} {
		if err := inf.GetIndexer().Add(p); err != nil {
			t.Fatal(err)
		}
	}
	got, err := ControlledOrOrphans[*corev1.Pod](inf, "a", "u1")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range got {
		names = append(names, p.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"mine", "orphan"}) {
		t.Errorf("got %v, want mine and orphan", names)
	}
}
