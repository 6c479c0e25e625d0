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
