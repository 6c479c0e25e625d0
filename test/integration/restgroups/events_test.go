package restgroups

import (
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"mizzen/internal/testing/apiserver"
)

// One event is visible through both events APIs, each in its own shape.
func TestEventsThroughBothAPIs(t *testing.T) {
	c := kubernetes.NewForConfigOrDie(apiserver.Start(t))
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

	// kubectl get events.events.k8s.io
	lines := render(t, table(t, c.CoreV1().RESTClient(), "/apis/events.k8s.io/v1/namespaces/default/events"), false)
	if len(lines) != 2 || !reflect.DeepEqual(strings.Fields(lines[0]), []string{"LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"}) {
		t.Fatalf("output:\n%s", strings.Join(lines, "\n"))
	}
	if got := strings.Fields(lines[1])[1:]; !reflect.DeepEqual(got, strings.Fields("Normal Scheduled pod/web Successfully assigned default/web to node-1")) {
		t.Errorf("row after LAST SEEN = %q", got)
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
	// The apiserver checks and matches field selectors against the fields of the
	// stored resource (core/v1 events: involvedObject.*), not the served one, so
	// GET /apis/events.k8s.io/v1/namespaces/default/events?fieldSelector=regarding.name%3Dweb
	// answers 400 "field label not supported: regarding.name". Reported to the lead;
	// remove this skip with the fix.
	c := kubernetes.NewForConfigOrDie(apiserver.Start(t))
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

// A watch on events.k8s.io/v1 sees events written through core/v1, in the v1 shape.
func TestEventsWatchAcrossAPIs(t *testing.T) {
	c := kubernetes.NewForConfigOrDie(apiserver.Start(t))
	w, err := c.EventsV1().Events("default").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if _, err := c.CoreV1().Events("default").Create(ctx, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "node.1"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web"},
		Reason:         "Started", Message: "Started container web", Type: "Normal", Count: 3,
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-w.ResultChan():
		got, ok := ev.Object.(*eventsv1.Event)
		if !ok {
			t.Fatalf("watch delivered %T", ev.Object)
		}
		if got.Regarding.Name != "web" || got.Note != "Started container web" || got.DeprecatedCount != 3 {
			t.Errorf("watched event = %+v", got)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no watch event within 30s")
	}
}

// client-go's events recorder (events.k8s.io/v1) counts repeats by patching a series.
func TestEventsSeriesPatch(t *testing.T) {
	c := kubernetes.NewForConfigOrDie(apiserver.Start(t))
	events := c.EventsV1().Events("default")
	if _, err := events.Create(ctx, &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: "web.3"}, EventTime: metav1.NewMicroTime(time.Now()),
		ReportingController: "example.com/scheduler", ReportingInstance: "s1", Action: "Scheduling", Reason: "FailedScheduling",
		Regarding: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web"}, Note: "0/1 nodes", Type: "Warning",
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	patch := []byte(`{"series":{"count":2,"lastObservedTime":"` + time.Now().UTC().Format("2006-01-02T15:04:05.000000Z07:00") + `"}}`)
	got, err := events.Patch(ctx, "web.3", types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Series == nil || got.Series.Count != 2 {
		t.Errorf("series = %+v", got.Series)
	}
	_, err = events.Patch(ctx, "web.3", types.MergePatchType, []byte(`{"note":"changed"}`), metav1.PatchOptions{})
	wantInvalid(t, err, cause{metav1.CauseTypeFieldValueInvalid, "message"})
}
