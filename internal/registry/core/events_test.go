package core

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
)

func TestEventValidate(t *testing.T) {
	tests := []struct {
		name string
		ev   corev1.Event
		want []string
	}{
		{"old style in object's namespace", corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "app"},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "app", Name: "web"}}, nil},
		{"old style for a node in default", corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default"},
			InvolvedObject: corev1.ObjectReference{Kind: "Node", Name: "n1"}}, nil},
		{"old style namespace mismatch", corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "other"},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "app", Name: "web"}},
			[]string{`involvedObject.namespace: Invalid value: "app": does not match event.namespace`}},
		{"new style needs reporting fields", corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "app"}, EventTime: metav1.NowMicro(),
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "app", Name: "web"}, ReportingController: "kubelet", Reason: "Started"},
			[]string{"reportingInstance: Required value", "action: Required value"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.ev.Name = "web.1"
			assertErrors(t, eventsResource().Strategy.Validate(context.Background(), &tc.ev), tc.want)
		})
	}
}

func TestEventFields(t *testing.T) {
	ev := &corev1.Event{InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "app", Name: "web", UID: "u1", APIVersion: "v1",
		ResourceVersion: "7", FieldPath: "spec.containers{app}"}, Reason: "Pulled", Type: "Normal", ReportingController: "kubelet"}
	want := fields.Set{
		"involvedObject.kind": "Pod", "involvedObject.namespace": "app", "involvedObject.name": "web",
		"involvedObject.uid": "u1", "involvedObject.apiVersion": "v1", "involvedObject.resourceVersion": "7",
		"involvedObject.fieldPath": "spec.containers{app}", "reason": "Pulled", "reportingComponent": "kubelet",
		"source": "kubelet", "type": "Normal",
	}
	if got := eventsResource().Fields(ev); !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("fields = %v, want %v", got, want)
	}
}

func TestEventPrinter(t *testing.T) {
	ago := func(d time.Duration) metav1.Time { return metav1.NewTime(time.Now().Add(-d)) }
	tests := []struct {
		name string
		ev   corev1.Event
		// LAST SEEN, TYPE, REASON, OBJECT, SUBOBJECT, SOURCE, MESSAGE, FIRST SEEN, COUNT, NAME
		want []interface{}
	}{{
		name: "old style with count",
		ev: corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "web.1"}, Type: "Warning", Reason: "BackOff", Message: "Back-off restarting failed container\n",
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "web", FieldPath: "spec.containers{app}"},
			Source:         corev1.EventSource{Component: "kubelet", Host: "node-1"}, FirstTimestamp: ago(50 * time.Minute), LastTimestamp: ago(30 * time.Minute), Count: 7},
		want: []interface{}{"30m", "Warning", "BackOff", "pod/web", "spec.containers{app}", "kubelet, node-1", "Back-off restarting failed container", "50m", int64(7), "web.1"},
	}, {
		name: "new style singleton",
		ev: corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "web.2"}, Type: "Normal", Reason: "Scheduled", Message: "assigned",
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "web"}, ReportingController: "default-scheduler",
			EventTime: metav1.NewMicroTime(time.Now().Add(-25 * time.Minute))},
		want: []interface{}{"25m", "Normal", "Scheduled", "pod/web", "", "default-scheduler", "assigned", "25m", int64(1), "web.2"},
	}, {
		name: "series",
		ev: corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "n.1"}, Type: "Normal", Reason: "Starting", InvolvedObject: corev1.ObjectReference{Kind: "Node"},
			EventTime: metav1.NewMicroTime(time.Now().Add(-time.Hour)),
			Series:    &corev1.EventSeries{Count: 4, LastObservedTime: metav1.NewMicroTime(time.Now().Add(-45 * time.Minute))}},
		want: []interface{}{"45m", "Normal", "Starting", "node", "", "", "", "60m", int64(4), "n.1"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assertRow(t, eventsResource().Printer.Row(&tc.ev), tc.want)
		})
	}
}
