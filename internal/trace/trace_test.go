package trace

import (
	"bytes"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func at(d time.Duration) metav1.Time { return metav1.NewTime(t0.Add(d)) }

func kubeletEvent(reason, container string, d time.Duration) corev1.Event {
	return corev1.Event{
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "web-1", UID: "u1", FieldPath: "spec.containers{" + container + "}"},
		Reason:         reason, Source: corev1.EventSource{Component: "kubelet", Host: "n1"}, FirstTimestamp: at(d), Message: reason + " " + container,
	}
}

func startedPod() (*corev1.Pod, []corev1.Event) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-1", UID: "u1", CreationTimestamp: at(0)},
		Spec:       corev1.PodSpec{NodeName: "n1", SchedulerName: "default-scheduler", Containers: []corev1.Container{{Name: "main"}}},
		Status: corev1.PodStatus{
			StartTime: &metav1.Time{Time: t0},
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: at(0)},
				{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionTrue, LastTransitionTime: at(time.Second)},
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: at(2 * time.Second)},
			},
		},
	}
	events := []corev1.Event{
		kubeletEvent("Started", "main", 2*time.Second),
		kubeletEvent("Pulled", "main", time.Second),
		kubeletEvent("Created", "main", time.Second),
		{InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "web-1", UID: "u1"}, Reason: "Scheduled", ReportingController: "default-scheduler",
			EventTime: metav1.NewMicroTime(t0.Add(300 * time.Millisecond)), Message: "Successfully assigned default/web-1 to n1"},
		// Another pod of the same name, earlier: not this one's.
		{InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "web-1", UID: "old"}, Reason: "Scheduled", EventTime: metav1.NewMicroTime(t0.Add(-time.Hour))},
	}
	return pod, events
}

func TestPodJourneyOrderAndSources(t *testing.T) {
	pod, events := startedPod()
	j := PodJourney(pod, events)
	var labels, components []string
	for _, s := range j.Steps {
		labels = append(labels, s.Label())
		components = append(components, s.Component)
	}
	want := "created,scheduled,accepted by kubelet,sandbox ready,image ready (main),container created (main),container started (main),ready"
	if got := strings.Join(labels, ","); got != want {
		t.Errorf("steps\n got %s\nwant %s", got, want)
	}
	if got := strings.Join(components, ","); got != "kube-apiserver,default-scheduler,kubelet/n1,kubelet/n1,kubelet/n1,kubelet/n1,kubelet/n1,kubelet/n1" {
		t.Errorf("components %s", got)
	}
	if len(j.Pending) != 0 {
		t.Errorf("pending %v", j.Pending)
	}
	if !j.Steps[1].Precise || j.Took(1) != 300*time.Millisecond {
		t.Errorf("scheduled: precise %v took %v, want 300ms from the event's eventTime", j.Steps[1].Precise, j.Took(1))
	}
	// startTime is truncated to the second: it reads as before the bind, so it took 0.
	if j.Took(2) != 0 || j.SinceCreated(7) != 2*time.Second {
		t.Errorf("took %v, ready after %v", j.Took(2), j.SinceCreated(7))
	}
	var out bytes.Buffer
	if err := PrintPod(&out, j); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "12:00:00.300") || !strings.Contains(out.String(), "event Scheduled: Successfully assigned default/web-1 to n1") {
		t.Errorf("printed:\n%s", out.String())
	}
}

func TestPodJourneyPending(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "p", UID: "u", CreationTimestamp: at(0)},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main"}}}}
	j := PodJourney(pod, nil)
	if len(j.Steps) != 1 || j.Steps[0].Name != StepCreated {
		t.Errorf("steps %+v", j.Steps)
	}
	want := "scheduled, accepted by kubelet, sandbox ready, image ready (main), container created (main), container started (main), ready"
	if got := strings.Join(j.Pending, ", "); got != want {
		t.Errorf("pending\n got %s\nwant %s", got, want)
	}
}

func TestSummarizeAndPercentile(t *testing.T) {
	pod, events := startedPod()
	a := PodJourney(pod, events)
	pod.UID = "u2"
	pod.Status.Conditions[2].LastTransitionTime = at(6 * time.Second)
	for i := range events {
		events[i].InvolvedObject.UID = "u2"
	}
	b := PodJourney(pod, events)
	stats := Summarize([]Journey{a, b})
	last := stats[len(stats)-1]
	if last.Label != "ready" || last.Component != "kubelet" || len(last.Since) != 2 {
		t.Fatalf("last step %+v", last)
	}
	if p50, max := Percentile(last.Since, 50), Percentile(last.Since, 100); p50 != 2*time.Second || max != 6*time.Second {
		t.Errorf("ready since created p50 %v max %v", p50, max)
	}
	var out bytes.Buffer
	if err := PrintDeployment(&out, "default", "web", []Journey{a, b}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "2 pods, 2 ready") {
		t.Errorf("printed:\n%s", out.String())
	}
}

// TestFirstSchedulingAttempt: a pod that waited for a node shows the scheduler's
// first failed attempt before it was bound.
func TestFirstSchedulingAttempt(t *testing.T) {
	pod, events := startedPod()
	pod.CreationTimestamp = at(-10 * time.Second)
	events = append(events,
		corev1.Event{InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "web-1", UID: "u1"}, Reason: "FailedScheduling", ReportingController: "default-scheduler",
			EventTime: metav1.NewMicroTime(t0.Add(-9 * time.Second)), Message: "0/1 nodes are available: 1 node(s) had untolerated taint."})
	j := PodJourney(pod, events)
	if len(j.Steps) < 3 || j.Steps[1].Name != StepFirstAttempt || j.Steps[2].Name != StepScheduled || j.Took(2) != 9300*time.Millisecond {
		t.Errorf("steps %+v", j.Steps[:3])
	}
}
