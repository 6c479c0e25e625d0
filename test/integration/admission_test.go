package integration

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"mizzen/internal/controlplane/core"
	"mizzen/internal/testing/apiserver"
)

func admissionPod(name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "img"}}}}
}

func mustNamespace(t *testing.T, c kubernetes.Interface, name string) {
	t.Helper()
	if _, err := c.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestResourceQuotaRace: fifty creates racing a quota of ten pods make exactly ten.
func TestResourceQuotaRace(t *testing.T) {
	c := kubernetes.NewForConfigOrDie(apiserver.Start(t))
	ctx := context.Background()
	mustNamespace(t, c, "quota")
	q, err := c.CoreV1().ResourceQuotas("quota").Create(ctx, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "pods"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("10")}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// What the resourcequota controller does first (no controller-manager runs here).
	q.Status.Hard = q.Spec.Hard
	q.Status.Used = corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}
	if _, err := c.CoreV1().ResourceQuotas("quota").UpdateStatus(ctx, q, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	created, refused := 0, 0
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			_, err := c.CoreV1().Pods("quota").Create(ctx, admissionPod(fmt.Sprintf("p%d", i)), metav1.CreateOptions{})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				created++
			case apierrors.IsForbidden(err) && strings.Contains(err.Error(), "exceeded quota: pods, requested: pods=1, used: pods=10, limited: pods=10"):
				refused++
			default:
				t.Errorf("pod %d: %v", i, err)
			}
		}(i)
	}
	wg.Wait()
	pods, err := c.CoreV1().Pods("quota").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if created != 10 || refused != 40 || len(pods.Items) != 10 {
		t.Fatalf("created %d, refused %d, pods %d; want 10, 40, 10", created, refused, len(pods.Items))
	}
	q, _ = c.CoreV1().ResourceQuotas("quota").Get(ctx, "pods", metav1.GetOptions{})
	if used := q.Status.Used[corev1.ResourcePods]; used.Value() != 10 {
		t.Fatalf("status.used.pods = %s, want 10", used.String())
	}
}

func TestBuiltinAdmissionPlugins(t *testing.T) {
	cfg := apiserver.StartWithOptions(t, func(o *core.Options) { o.DisableAdmissionPlugins = []string{"ServiceAccount"} }).AdminConfig
	c := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()

	// NamespaceLifecycle.
	_, err := c.CoreV1().ConfigMaps("missing").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
	if !apierrors.IsNotFound(err) || err.Error() != `namespaces "missing" not found` {
		t.Errorf("create in a missing namespace: %v", err)
	}
	err = c.CoreV1().Namespaces().Delete(ctx, "kube-system", metav1.DeleteOptions{})
	if !apierrors.IsForbidden(err) || err.Error() != `namespaces "kube-system" is forbidden: this namespace may not be deleted` {
		t.Errorf("delete kube-system: %v", err)
	}
	mustNamespace(t, c, "adm")

	// Priority and DefaultTolerationSeconds.
	pod, err := c.CoreV1().Pods("adm").Create(ctx, admissionPod("plain"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Spec.Priority == nil || *pod.Spec.Priority != 0 {
		t.Errorf("priority %v, want 0", pod.Spec.Priority)
	}
	if len(pod.Spec.Tolerations) != 2 || *pod.Spec.Tolerations[0].TolerationSeconds != 300 {
		t.Errorf("tolerations %+v", pod.Spec.Tolerations)
	}
	crit := admissionPod("critical")
	crit.Spec.PriorityClassName = "system-node-critical"
	if pod, err = c.CoreV1().Pods("adm").Create(ctx, crit, metav1.CreateOptions{}); err != nil || *pod.Spec.Priority != 2000001000 {
		t.Errorf("system-node-critical pod: %v", err)
	}
	bad := admissionPod("bad")
	bad.Spec.PriorityClassName = "nope"
	_, err = c.CoreV1().Pods("adm").Create(ctx, bad, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || !strings.HasSuffix(err.Error(), "no PriorityClass with name nope was found") {
		t.Errorf("unknown class: %v", err)
	}
	for _, name := range []string{"d1", "d2"} {
		_, err = c.SchedulingV1().PriorityClasses().Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: 7, GlobalDefault: true}, metav1.CreateOptions{})
		if name == "d1" && err != nil {
			t.Fatal(err)
		}
	}
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "PriorityClass d1 is already marked as default. Only one default can exist") {
		t.Errorf("second default class: %v", err)
	}
	if pod, err = c.CoreV1().Pods("adm").Create(ctx, admissionPod("defaulted"), metav1.CreateOptions{}); err != nil || *pod.Spec.Priority != 7 || pod.Spec.PriorityClassName != "d1" {
		t.Errorf("pod under a default class: %v %+v", err, pod.Spec)
	}

	// LimitRanger: defaults, then max.
	_, err = c.CoreV1().LimitRanges("adm").Create(ctx, &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "lr"}, Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{
		Type:           corev1.LimitTypeContainer,
		Default:        corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")},
		DefaultRequest: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
		Max:            corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
	}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod, err = c.CoreV1().Pods("adm").Create(ctx, admissionPod("limited"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res := pod.Spec.Containers[0].Resources
	if res.Requests.Cpu().String() != "100m" || res.Limits.Cpu().String() != "500m" ||
		pod.Annotations["kubernetes.io/limit-ranger"] != "LimitRanger plugin set: cpu request for container c; cpu limit for container c" {
		t.Errorf("defaults: %+v %v", res, pod.Annotations)
	}
	big := admissionPod("big")
	big.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
	_, err = c.CoreV1().Pods("adm").Create(ctx, big, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || err.Error() != `pods "big" is forbidden: maximum cpu usage per Container is 1, but limit is 2` {
		t.Errorf("over max: %v", err)
	}

	// TaintNodesByCondition.
	node, err := c.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, metav1.CreateOptions{})
	if err != nil || len(node.Spec.Taints) != 1 || node.Spec.Taints[0].Key != "node.kubernetes.io/not-ready" {
		t.Errorf("new node: %v %+v", err, node.Spec.Taints)
	}

	// StorageObjectInUseProtection.
	pvc, err := c.CoreV1().PersistentVolumeClaims("adm").Create(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "claim"},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}, metav1.CreateOptions{})
	if err != nil || len(pvc.Finalizers) != 1 || pvc.Finalizers[0] != "kubernetes.io/pvc-protection" {
		t.Errorf("claim: %v %v", err, pvc.Finalizers)
	}

	// PodSecurity: enforce refuses, a new enforce label warns about running pods.
	var seen warnings
	wcfg := rest.CopyConfig(cfg)
	wcfg.WarningHandler = &seen
	wc := kubernetes.NewForConfigOrDie(wcfg)
	ns, err := wc.CoreV1().Namespaces().Get(ctx, "adm", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ns.Labels["pod-security.kubernetes.io/enforce"] = "baseline"
	if _, err := wc.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 0 {
		t.Errorf("baseline over plain pods warned: %q", seen)
	}
	host := admissionPod("host")
	host.Spec.HostNetwork = true
	_, err = c.CoreV1().Pods("adm").Create(ctx, host, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || err.Error() != `pods "host" is forbidden: violates PodSecurity "baseline:latest": host namespaces (hostNetwork=true)` {
		t.Errorf("hostNetwork pod under baseline: %v", err)
	}
	ns, _ = wc.CoreV1().Namespaces().Get(ctx, "adm", metav1.GetOptions{})
	ns.Labels["pod-security.kubernetes.io/enforce"] = "restricted"
	if _, err := wc.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if len(seen) < 2 || seen[0] != `existing pods in namespace "adm" violate the new PodSecurity enforce level "restricted:latest"` {
		t.Errorf("warnings on labelling restricted: %q", seen)
	}
}
