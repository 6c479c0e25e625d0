package kubelet

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func requests(cpu, mem string) v1.ResourceRequirements {
	return v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse(mem)}}
}

// A resize of a running container's cpu goes to the runtime without a restart and shows
// in the container's status; one asking for more than the node has is Infeasible.
func TestInPlaceResize(t *testing.T) {
	h := newHarness(t)
	h.start()
	pod := newPod("resizable", "app")
	pod.Spec.Containers[0].Resources = requests("100m", "20Mi")
	h.createPod(pod)
	p := h.waitPod("resizable", "Running with its resources in status", func(p *v1.Pod) bool {
		cs := containerStatus(p, "app")
		return p.Status.Phase == v1.PodRunning && cs != nil && cs.Resources != nil
	})
	if got := containerStatus(p, "app").AllocatedResources.Cpu().String(); got != "100m" {
		t.Fatalf("allocatedResources cpu = %s", got)
	}

	ctx := context.Background()
	resize := func(r v1.ResourceRequirements) {
		t.Helper()
		cur, err := h.getPod("resizable")
		if err != nil {
			t.Fatal(err)
		}
		cur.Spec.Containers[0].Resources = r
		cur.Generation++
		if _, err := h.client.CoreV1().Pods("default").Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	resize(requests("200m", "20Mi"))
	p = h.waitPod("resizable", "resized cpu in status", func(p *v1.Pod) bool {
		cs := containerStatus(p, "app")
		return cs.Resources != nil && cs.Resources.Requests.Cpu().String() == "200m"
	})
	cs := containerStatus(p, "app")
	if cs.AllocatedResources.Cpu().String() != "200m" || cs.RestartCount != 0 || condition(p, v1.PodResizePending) != nil {
		t.Errorf("after resize: allocated %v restarts %d conditions %+v", cs.AllocatedResources, cs.RestartCount, p.Status.Conditions)
	}
	if n := h.rt.Calls("UpdateContainerResources"); n != 1 {
		t.Errorf("UpdateContainerResources called %d times, want 1", n)
	}

	resize(requests("1000", "20Mi")) // more cpu than the node's 4 cores
	p = h.waitPod("resizable", "PodResizePending", func(p *v1.Pod) bool { return condition(p, v1.PodResizePending) != nil })
	if c := condition(p, v1.PodResizePending); c.Reason != v1.PodReasonInfeasible {
		t.Errorf("PodResizePending = %+v, want reason Infeasible", c)
	}
	if got := containerStatus(p, "app").Resources.Requests.Cpu().String(); got != "200m" {
		t.Errorf("status cpu after an infeasible resize = %s, want 200m still", got)
	}
}

// A resource whose resize policy is RestartContainer restarts the container with the
// new resources.
func TestInPlaceResizeRestartPolicy(t *testing.T) {
	h := newHarness(t)
	h.start()
	pod := newPod("restarting", "app")
	pod.Spec.Containers[0].Resources = requests("100m", "20Mi")
	pod.Spec.Containers[0].ResizePolicy = []v1.ContainerResizePolicy{{ResourceName: v1.ResourceMemory, RestartPolicy: v1.RestartContainer}}
	h.createPod(pod)
	h.waitPod("restarting", "Running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	cur, err := h.getPod("restarting")
	if err != nil {
		t.Fatal(err)
	}
	cur.Spec.Containers[0].Resources = requests("100m", "40Mi")
	if _, err := h.client.CoreV1().Pods("default").Update(context.Background(), cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := h.waitPod("restarting", "restarted with the new memory", func(p *v1.Pod) bool {
		cs := containerStatus(p, "app")
		return cs.RestartCount == 1 && cs.State.Running != nil && cs.Resources != nil && cs.Resources.Requests.Memory().String() == "40Mi"
	})
	if n := h.rt.Calls("UpdateContainerResources"); n != 0 {
		t.Errorf("UpdateContainerResources called %d times, want 0 (restart instead)", n)
	}
	_ = p
}

// actualResources decodes an instance's resources annotation once and hands out
// copies; another instance, or another annotation, is decoded afresh.
func TestActualResourcesDecodesOnce(t *testing.T) {
	st := newPodState()
	inst := func(id, raw string) *runtimeapi.ContainerStatus {
		return &runtimeapi.ContainerStatus{Id: id, Metadata: &runtimeapi.ContainerMetadata{Name: "app"},
			Annotations: map[string]string{annoResources: raw}}
	}
	first := inst("c1", encodeResources(requests("100m", "20Mi")))
	got, ok := st.actualResources(first)
	if !ok || got.Requests.Cpu().String() != "100m" {
		t.Fatalf("actualResources = %v, %v", got, ok)
	}
	got.Requests[v1.ResourceCPU] = resource.MustParse("7") // a caller's change stays its own
	if again, _ := st.actualResources(first); again.Requests.Cpu().String() != "100m" {
		t.Errorf("second read: cpu %s, want 100m", again.Requests.Cpu())
	}
	if n := testing.AllocsPerRun(10, func() { st.actualResources(first) }); n > 20 {
		t.Errorf("a decoded instance costs %v allocations", n)
	}
	if r, _ := st.actualResources(inst("c2", encodeResources(requests("200m", "20Mi")))); r.Requests.Cpu().String() != "200m" {
		t.Errorf("new instance: cpu %s, want 200m", r.Requests.Cpu())
	}
	if r, _ := st.actualResources(inst("c2", encodeResources(requests("300m", "20Mi")))); r.Requests.Cpu().String() != "300m" {
		t.Errorf("new annotation: cpu %s, want 300m", r.Requests.Cpu())
	}
	if _, ok := st.actualResources(inst("c3", "not json")); ok {
		t.Error("an undecodable annotation is known")
	}
	if _, ok := st.actualResources(&runtimeapi.ContainerStatus{Id: "c4"}); ok {
		t.Error("an instance without the annotation is known")
	}
}
