package resourcequota

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"mizzen/internal/apiserver/admission"
	"mizzen/internal/apiserver/admission/admissiontest"
)

func newQuota(name string, hard corev1.ResourceList) *corev1.ResourceQuota {
	used := corev1.ResourceList{}
	for n := range hard {
		used[n] = resource.MustParse("0")
	}
	return &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
		Spec: corev1.ResourceQuotaSpec{Hard: hard}, Status: corev1.ResourceQuotaStatus{Hard: hard, Used: used}}
}

func podAttrs(name, cpu string) *admission.Attributes {
	c := corev1.Container{Name: "c", Image: "i"}
	if cpu != "" {
		c.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Spec: corev1.PodSpec{Containers: []corev1.Container{c}}}
	return &admission.Attributes{Operation: admission.Create, Resource: corev1.SchemeGroupVersion.WithResource("pods"), Namespace: "ns", Name: name, Object: pod}
}

func TestConcurrentCharges(t *testing.T) {
	store := admissiontest.New(newQuota("q", corev1.ResourceList{corev1.ResourcePods: resource.MustParse("10")}))
	p := New(store, store)
	var wg sync.WaitGroup
	var mu sync.Mutex
	admitted := 0
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if err := p.Validate(context.Background(), podAttrs(fmt.Sprint("p", i), "")); err == nil {
				mu.Lock()
				admitted++
				mu.Unlock()
			} else if !apierrors.IsForbidden(err) {
				t.Error(err)
			}
		}(i)
	}
	wg.Wait()
	q, _ := store.Get(context.Background(), quotasGVR, "ns", "q")
	if used := q.(*corev1.ResourceQuota).Status.Used[corev1.ResourcePods]; admitted != 10 || used.Value() != 10 {
		t.Errorf("admitted %d, used %s; want 10, 10", admitted, used.String())
	}
}

func TestMessages(t *testing.T) {
	store := admissiontest.New(newQuota("compute", corev1.ResourceList{corev1.ResourceRequestsCPU: resource.MustParse("1")}))
	p := New(store, store)
	err := p.Validate(context.Background(), podAttrs("none", ""))
	if !apierrors.IsForbidden(err) || !strings.HasSuffix(err.Error(), "failed quota: compute: must specify requests.cpu for: c") {
		t.Errorf("no request: %v", err)
	}
	if err := p.Validate(context.Background(), podAttrs("a", "600m")); err != nil {
		t.Fatal(err)
	}
	err = p.Validate(context.Background(), podAttrs("b", "600m"))
	want := `pods "b" is forbidden: exceeded quota: compute, requested: requests.cpu=600m, used: requests.cpu=600m, limited: requests.cpu=1`
	if err == nil || err.Error() != want {
		t.Errorf("over quota: %v, want %s", err, want)
	}
	// A dry run checks but charges nothing.
	a := podAttrs("c", "300m")
	a.DryRun = true
	if err := p.Validate(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	q, _ := store.Get(context.Background(), quotasGVR, "ns", "compute")
	if used := q.(*corev1.ResourceQuota).Status.Used[corev1.ResourceRequestsCPU]; used.String() != "600m" {
		t.Errorf("used %s after a dry run, want 600m", used.String())
	}
}
