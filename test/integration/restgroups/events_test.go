package restgroups

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"mizzen/internal/testing/apiserver"
)

// One event is visible through both events APIs, each in its own shape.
func TestEventsThroughBothAPIs(t *testing.T) {
	c := kubernetes.NewForConfigOrDie(apiserver.Start(t))
	if _, err := c.Discovery().ServerResourcesForGroupVersion("events.k8s.io/v1"); err != nil {
		t.Skipf("events.k8s.io/v1 is not served (the catalog needs core/v1 events first): %v", err)
	}
	now := metav1.NewMicroTime(time.Now())
	created, err := c.EventsV1().Events("default").Create(ctx, &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: "web.1"},
		EventTime:           now,
		ReportingController: "example.com/scheduler",
		ReportingInstance:   "scheduler-1",
		Action:              "Binding",
		Reason:              "Scheduled",
		Regarding:           corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web"},
		Note:                "Successfully assigned default/web to node-1",
		Type:                "Normal",
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if created.Regarding.Name != "web" || created.Note == "" {
		t.Errorf("created = %+v", created)
	}

	core, err := c.CoreV1().Events("default").Get(ctx, "web.1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if core.InvolvedObject.Name != "web" || core.Message != created.Note || core.ReportingController != "example.com/scheduler" {
		t.Errorf("core view = %+v", core)
	}

	_, err = c.EventsV1().Events("default").Create(ctx, &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: "bad"}, Regarding: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web"},
		Reason: "X", Type: "Normal",
	}, metav1.CreateOptions{})
	wantInvalid(t, err, cause{metav1.CauseTypeFieldValueRequired, "eventTime"})
}

// events.k8s.io/v1 selects by its own field names (regarding.*, reportingController),
// as upstream does.
func TestEventsFieldSelectorsUseV1Names(t *testing.T) {
	c := kubernetes.NewForConfigOrDie(apiserver.Start(t))
	if _, err := c.Discovery().ServerResourcesForGroupVersion("events.k8s.io/v1"); err != nil {
		t.Skipf("events.k8s.io/v1 is not served (the catalog needs core/v1 events first): %v", err)
	}
	if _, err := c.CoreV1().Events("default").Create(ctx, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "web.2"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web"},
		Reason:         "Pulled", Message: "pulled", Type: "Normal", Source: corev1.EventSource{Component: "kubelet"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	list, err := c.EventsV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "regarding.name=web,reason=Pulled"})
	if err != nil {
		t.Fatalf("events.k8s.io field selector: %v", err)
	}
	if len(list.Items) != 1 {
		t.Errorf("regarding.name=web matched %d events, want 1", len(list.Items))
	}
}
