package kubelet

import (
	"context"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"
)

// A pod's RuntimeClass reaches the runtime as the sandbox's handler; a pod naming a
// class that does not exist gets no sandbox and a FailedCreatePodSandBox event.
func TestRuntimeClassHandlerReachesTheRuntime(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	if _, err := h.client.NodeV1().RuntimeClasses().Create(ctx, &nodev1.RuntimeClass{
		ObjectMeta: metav1.ObjectMeta{Name: "sandboxed"}, Handler: "runsc"}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.start()
	pod := newPod("gvisor", "app")
	pod.Spec.RuntimeClassName = ptr.To("sandboxed")
	h.createPod(pod)
	h.waitPod("gvisor", "Running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })

	missing := newPod("nowhere", "app")
	missing.Spec.RuntimeClassName = ptr.To("no-such-class")
	h.createPod(missing)
	if msg := h.waitEvent("nowhere", "FailedCreatePodSandBox"); !strings.Contains(msg, `RuntimeClass "no-such-class" not found`) {
		t.Errorf("event %q", msg)
	}

	sandboxes, err := h.rt.Client().ListPodSandbox(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	handlers := map[string]string{}
	for _, sb := range sandboxes {
		if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			handlers[sb.Metadata.Name] = sb.RuntimeHandler
		}
	}
	if len(handlers) != 1 || handlers["gvisor"] != "runsc" {
		t.Errorf("ready sandboxes and their handlers: %v, want only gvisor with runsc", handlers)
	}
}

// A pod asking for a user namespace of its own (hostUsers: false) gets no sandbox and a
// FailedCreatePodSandBox event saying why, rather than running as the host's users; a
// pod saying hostUsers: true runs.
func TestHostUsersFalseIsRefused(t *testing.T) {
	h := newHarness(t)
	h.start()
	own := newPod("userns", "app")
	own.Spec.HostUsers = ptr.To(false)
	h.createPod(own)
	if msg := h.waitEvent("userns", "FailedCreatePodSandBox"); msg != "Failed to create pod sandbox: can't set `spec.hostUsers: false`, runtime does not support user namespaces" {
		t.Errorf("event %q", msg)
	}
	host := newPod("host", "app")
	host.Spec.HostUsers = ptr.To(true)
	h.createPod(host)
	h.waitPod("host", "Running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	if p, err := h.getPod("userns"); err != nil {
		t.Fatal(err)
	} else if p.Status.Phase != v1.PodPending {
		t.Errorf("the pod with hostUsers false is %v, want Pending", p.Status.Phase)
	}
	sandboxes, err := h.rt.Client().ListPodSandbox(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, sb := range sandboxes {
		if sb.Metadata.Name == "userns" {
			t.Errorf("a sandbox was made for the pod with hostUsers false: %v", sb.Id)
		}
	}
}
