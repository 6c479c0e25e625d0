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
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

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

// TestServiceNodePorts: a NodePort service takes a node port per port, a load balancer
// too unless it allocates none, as upstream's service evaluator counts them.
func TestServiceNodePorts(t *testing.T) {
	service := func(typ corev1.ServiceType, allocate *bool) *admission.Attributes {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns"}, Spec: corev1.ServiceSpec{
			Type: typ, Ports: []corev1.ServicePort{{Port: 80}}, AllocateLoadBalancerNodePorts: allocate}}
		return &admission.Attributes{Operation: admission.Create, Resource: corev1.SchemeGroupVersion.WithResource("services"), Namespace: "ns", Name: "s", Object: svc}
	}
	yes, no := true, false
	for _, tt := range []struct {
		name    string
		attrs   *admission.Attributes
		allowed bool
	}{
		{"cluster IP", service(corev1.ServiceTypeClusterIP, nil), true},
		{"load balancer without node ports", service(corev1.ServiceTypeLoadBalancer, &no), true},
		{"load balancer with node ports", service(corev1.ServiceTypeLoadBalancer, &yes), false},
		{"node port", service(corev1.ServiceTypeNodePort, nil), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			q := newQuota("q", corev1.ResourceList{corev1.ResourceServicesNodePorts: resource.MustParse("1")})
			q.Status.Used[corev1.ResourceServicesNodePorts] = resource.MustParse("1")
			store := admissiontest.New(q)
			err := New(store, store).Validate(context.Background(), tt.attrs)
			if tt.allowed && err != nil || !tt.allowed && !apierrors.IsForbidden(err) {
				t.Errorf("err = %v, want allowed=%v", err, tt.allowed)
			}
		})
	}
}

// staleReader lists a quota as a lagging cache would: created, its status not yet
// computed by the controller.
type staleReader struct{ admission.Reader }

func (r staleReader) List(ctx context.Context, gvr schema.GroupVersionResource, namespace string) ([]runtime.Object, error) {
	objs, err := r.Reader.List(ctx, gvr, namespace)
	for i, o := range objs {
		q := o.(*corev1.ResourceQuota).DeepCopy()
		q.Status = corev1.ResourceQuotaStatus{}
		objs[i] = q
	}
	return objs, err
}

// A quota whose status the controller has just computed limits the next writes even
// when the cached copy admission lists has no status yet.
func TestStaleCachedQuotaStillLimits(t *testing.T) {
	store := admissiontest.New(newQuota("q", corev1.ResourceList{corev1.ResourcePods: resource.MustParse("2")}))
	p := New(staleReader{store}, store)
	for i := range 3 {
		err := p.Validate(context.Background(), podAttrs(fmt.Sprint("p", i), ""))
		if i < 2 && err != nil {
			t.Fatalf("pod %d: %v", i, err)
		}
		if i == 2 && !apierrors.IsForbidden(err) {
			t.Fatalf("third pod over a quota of 2: %v, want forbidden", err)
		}
	}
}

// A pod given an active deadline leaves NotTerminating quotas for Terminating ones: the
// Terminating quota is charged the whole pod, the NotTerminating one nothing more, and
// the next terminating pod no longer fits (conformance-adjacent spec "terminating scopes
// through scope selectors").
func TestUpdateIntoAScopeIsCharged(t *testing.T) {
	terminating := newQuota("terminating", corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1")})
	terminating.Spec.Scopes = []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeTerminating}
	notTerminating := newQuota("not-terminating", corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1")})
	notTerminating.Spec.Scopes = []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeNotTerminating}
	store := admissiontest.New(terminating, notTerminating)
	p := New(store, store)
	ctx := context.Background()
	used := func(name string) int64 {
		q, _ := store.Get(ctx, quotasGVR, "ns", name)
		u := q.(*corev1.ResourceQuota).Status.Used[corev1.ResourcePods]
		return u.Value()
	}

	create := podAttrs("long-running", "")
	if err := p.Validate(ctx, create); err != nil {
		t.Fatal(err)
	}
	if used("not-terminating") != 1 || used("terminating") != 0 {
		t.Fatalf("after create: not-terminating %d, terminating %d; want 1, 0", used("not-terminating"), used("terminating"))
	}

	old := create.Object.(*corev1.Pod)
	old.ResourceVersion = "1"
	cur := old.DeepCopy()
	deadline := int64(3600)
	cur.Spec.ActiveDeadlineSeconds = &deadline
	update := &admission.Attributes{Operation: admission.Update, Resource: create.Resource, Namespace: "ns", Name: old.Name, Object: cur, OldObject: old}
	if err := p.Validate(ctx, update); err != nil {
		t.Fatal(err)
	}
	if used("terminating") != 1 || used("not-terminating") != 1 {
		t.Fatalf("after update: terminating %d, not-terminating %d; want 1, 1 (the controller releases the old scope's count)", used("terminating"), used("not-terminating"))
	}

	second := podAttrs("terminating-pod", "")
	second.Object.(*corev1.Pod).Spec.ActiveDeadlineSeconds = &deadline
	if err := p.Validate(ctx, second); !apierrors.IsForbidden(err) {
		t.Errorf("a second terminating pod over the Terminating quota: %v, want forbidden", err)
	}

	// An update that keeps the pod's scope is not charged again.
	again := cur.DeepCopy()
	again.Labels = map[string]string{"a": "b"}
	if err := p.Validate(ctx, &admission.Attributes{Operation: admission.Update, Resource: create.Resource, Namespace: "ns", Name: old.Name, Object: again, OldObject: cur}); err != nil {
		t.Fatal(err)
	}
	if used("terminating") != 1 {
		t.Errorf("an update within the scope charged again: terminating %d, want 1", used("terminating"))
	}
}

// A pod's extended resources and huge pages are charged as its cpu is, at create, as
// upstream's pod evaluator charges them: conformance's "capture the life of a pod"
// waits for requests.example.com/dongle, which the controller does not recount on a
// create.
func TestExtendedResourcesAndHugePagesAreCharged(t *testing.T) {
	hard := corev1.ResourceList{
		"requests.example.com/dongle": resource.MustParse("3"),
		"hugepages-2Mi":               resource.MustParse("8Mi"),
		"requests.hugepages-2Mi":      resource.MustParse("8Mi"),
	}
	store := admissiontest.New(newQuota("q", hard))
	p := New(store, store)
	pod := func(name, dongles string) *admission.Attributes {
		a := podAttrs(name, "")
		req := corev1.ResourceList{"example.com/dongle": resource.MustParse(dongles), "hugepages-2Mi": resource.MustParse("4Mi")}
		a.Object.(*corev1.Pod).Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: req, Limits: req}
		return a
	}
	if err := p.Validate(context.Background(), pod("a", "2")); err != nil {
		t.Fatal(err)
	}
	q, _ := store.Get(context.Background(), quotasGVR, "ns", "q")
	used := q.(*corev1.ResourceQuota).Status.Used
	for name, want := range map[corev1.ResourceName]string{"requests.example.com/dongle": "2", "hugepages-2Mi": "4Mi", "requests.hugepages-2Mi": "4Mi"} {
		if got := used[name]; got.String() != want {
			t.Errorf("used %s = %s, want %s", name, got.String(), want)
		}
	}
	err := p.Validate(context.Background(), pod("b", "2"))
	want := `pods "b" is forbidden: exceeded quota: q, requested: requests.example.com/dongle=2, used: requests.example.com/dongle=2, limited: requests.example.com/dongle=3`
	if err == nil || err.Error() != want {
		t.Errorf("over quota: %v, want %s", err, want)
	}
}
