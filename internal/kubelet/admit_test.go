package kubelet

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// A pod for another OS, by its spec.os or its kubernetes.io/os label, is rejected at
// admission with upstream's reasons; one for Linux runs.
func TestAdmissionRejectsAnotherOS(t *testing.T) {
	h := newHarness(t)
	h.start()
	windows := newPod("windows", "app")
	windows.Spec.OS = &v1.PodOS{Name: v1.Windows}
	labelled := newPod("labelled", "app")
	labelled.Labels = map[string]string{v1.LabelOSStable: "windows"}
	linux := newPod("linux", "app")
	linux.Spec.OS = &v1.PodOS{Name: v1.Linux}
	linux.Labels = map[string]string{v1.LabelOSStable: "linux"}
	for _, p := range []*v1.Pod{windows, labelled, linux} {
		h.createPod(p)
	}
	h.waitPod("linux", "Running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	for name, want := range map[string][2]string{
		"windows":  {"PodOSNotSupported", "Failed to admit pod as the OS field doesn't match node OS"},
		"labelled": {"PodOSSelectorNodeLabelDoesNotMatch", "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label"},
	} {
		p := h.waitPod(name, "Failed", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
		if p.Status.Reason != want[0] || p.Status.Message != want[1] {
			t.Errorf("%s: reason %q message %q, want %q %q", name, p.Status.Reason, p.Status.Message, want[0], want[1])
		}
	}
}

// A pod asking for Strict supplemental groups is rejected where the runtime cannot
// honour it (the fake, as containerd 1.6, says nothing of it), and the node says so in
// status.features; Merge runs.
func TestAdmissionRejectsStrictSupplementalGroups(t *testing.T) {
	h := newHarness(t)
	h.start()
	strict := newPod("strict", "app")
	strict.Spec.SecurityContext = &v1.PodSecurityContext{SupplementalGroupsPolicy: ptr.To(v1.SupplementalGroupsPolicyStrict)}
	merge := newPod("merge", "app")
	merge.Spec.SecurityContext = &v1.PodSecurityContext{SupplementalGroupsPolicy: ptr.To(v1.SupplementalGroupsPolicyMerge)}
	h.createPod(strict)
	h.createPod(merge)
	h.waitPod("merge", "Running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	p := h.waitPod("strict", "Failed", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	if p.Status.Reason != "SupplementalGroupsPolicyNotSupported" || p.Status.Message != "SupplementalGroupsPolicy=Strict is not supported in this node" {
		t.Errorf("reason %q message %q", p.Status.Reason, p.Status.Message)
	}
	h.eventually("the node reporting supplementalGroupsPolicy false", func() bool {
		node, err := h.client.CoreV1().Nodes().Get(context.Background(), testNode, metav1.GetOptions{})
		f := node.Status.Features
		return err == nil && f != nil && f.SupplementalGroupsPolicy != nil && !*f.SupplementalGroupsPolicy
	})
}
