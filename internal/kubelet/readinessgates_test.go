package kubelet

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A pod with readiness gates is Ready only once its containers are and every gate's
// condition, written by someone else through pods/status, is True; the kubelet keeps
// those conditions and says which gate holds the pod back (upstream's e2e "should
// support pod readiness gates").
func TestReadinessGates(t *testing.T) {
	h := newHarness(t)
	h.start()
	pod := newPod("p", "app")
	pod.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: "example.com/one"}, {ConditionType: "example.com/two"}}
	h.createPod(pod)
	notReadyFor := func(gateMessage string) func(*v1.Pod) bool {
		return func(p *v1.Pod) bool {
			c := condition(p, v1.PodReady)
			return conditionTrue(p, v1.ContainersReady) && c != nil && c.Status == v1.ConditionFalse &&
				c.Reason == "ReadinessGatesNotReady" && c.Message == gateMessage
		}
	}
	h.waitPod("p", "not Ready, both gates missing", notReadyFor(
		`corresponding condition of pod readiness gate "example.com/one" does not exist., `+
			`corresponding condition of pod readiness gate "example.com/two" does not exist.`))

	setGate := func(gate v1.PodConditionType, status v1.ConditionStatus) {
		t.Helper()
		for {
			p, err := h.getPod("p")
			if err != nil {
				t.Fatal(err)
			}
			if c := condition(p, gate); c != nil {
				c.Status = status
			} else {
				p.Status.Conditions = append(p.Status.Conditions, v1.PodCondition{Type: gate, Status: status})
			}
			_, err = h.client.CoreV1().Pods("default").UpdateStatus(context.Background(), p, metav1.UpdateOptions{})
			if !apierrors.IsConflict(err) {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
		}
	}
	setGate("example.com/one", v1.ConditionTrue)
	h.waitPod("p", "not Ready, the second gate missing", notReadyFor(
		`corresponding condition of pod readiness gate "example.com/two" does not exist.`))
	setGate("example.com/two", v1.ConditionTrue)
	p := h.waitPod("p", "Ready", func(p *v1.Pod) bool { return conditionTrue(p, v1.PodReady) })
	if c := condition(p, "example.com/one"); c == nil || c.Status != v1.ConditionTrue {
		t.Errorf("the gate's condition was not kept: %+v", c)
	}
	setGate("example.com/one", v1.ConditionFalse)
	h.waitPod("p", "not Ready, the first gate False", notReadyFor(
		`the status of pod readiness gate "example.com/one" is not "True", but False`))
}
