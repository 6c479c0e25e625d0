package events

import (
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var eventTime = metav1.NewMicroTime(time.Date(2026, 11, 30, 1, 2, 3, 456000, time.UTC))

func fullV1Event() *eventsv1.Event {
	return &eventsv1.Event{
		TypeMeta:                 metav1.TypeMeta{APIVersion: "events.k8s.io/v1", Kind: "Event"},
		ObjectMeta:               metav1.ObjectMeta{Name: "web.1", Namespace: "default", Labels: map[string]string{"a": "b"}},
		EventTime:                eventTime,
		Series:                   &eventsv1.EventSeries{Count: 3, LastObservedTime: eventTime},
		ReportingController:      "example.com/controller",
		ReportingInstance:        "controller-1",
		Action:                   "Scheduling",
		Reason:                   "FailedScheduling",
		Regarding:                corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web", UID: "u1", APIVersion: "v1", FieldPath: "spec"},
		Related:                  &corev1.ObjectReference{Kind: "Node", Name: "node-1"},
		Note:                     "0/3 nodes are available",
		Type:                     "Warning",
		DeprecatedSource:         corev1.EventSource{Component: "scheduler", Host: "h1"},
		DeprecatedFirstTimestamp: metav1.NewTime(eventTime.Time.Truncate(time.Second)),
		DeprecatedLastTimestamp:  metav1.NewTime(eventTime.Time.Truncate(time.Second)),
		DeprecatedCount:          7,
	}
}

func TestConversionMapsFields(t *testing.T) {
	core := ToCore(fullV1Event())
	checks := map[string][2]interface{}{
		"message":             {core.Message, "0/3 nodes are available"},
		"involvedObject.name": {core.InvolvedObject.Name, "web"},
		"related.name":        {core.Related.Name, "node-1"},
		"reportingComponent":  {core.ReportingController, "example.com/controller"},
		"reportingInstance":   {core.ReportingInstance, "controller-1"},
		"source.component":    {core.Source.Component, "scheduler"},
		"count":               {core.Count, int32(7)},
		"series.count":        {core.Series.Count, int32(3)},
		"eventTime":           {core.EventTime, eventTime},
		"apiVersion":          {core.APIVersion, "v1"},
	}
	for name, c := range checks {
		if !reflect.DeepEqual(c[0], c[1]) {
			t.Errorf("core %s = %v, want %v", name, c[0], c[1])
		}
	}
}

func TestConversionRoundTrips(t *testing.T) {
	v1 := fullV1Event()
	if back := FromCore(ToCore(v1)); !apiequality.Semantic.DeepEqual(back, v1) {
		t.Errorf("v1 -> core -> v1 changed the event:\n got %+v\nwant %+v", back, v1)
	}
	core := &corev1.Event{
		TypeMeta:       metav1.TypeMeta{APIVersion: "v1", Kind: "Event"},
		ObjectMeta:     metav1.ObjectMeta{Name: "old.1", Namespace: "kube-system"},
		InvolvedObject: corev1.ObjectReference{Kind: "Node", Name: "node-1"},
		Reason:         "Starting", Message: "Starting kubelet.", Type: "Normal", Count: 2,
		Source:         corev1.EventSource{Component: "kubelet", Host: "node-1"},
		FirstTimestamp: metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
		LastTimestamp:  metav1.NewTime(time.Date(2026, 1, 1, 0, 1, 0, 0, time.UTC)),
	}
	if back := ToCore(FromCore(core)); !apiequality.Semantic.DeepEqual(back, core) {
		t.Errorf("core -> v1 -> core changed the event:\n got %+v\nwant %+v", back, core)
	}
	// The conversion must not share pointers with its input.
	out := ToCore(v1)
	out.Related.Name = "changed"
	out.Labels["a"] = "changed"
	if v1.Related.Name != "node-1" || v1.Labels["a"] != "b" {
		t.Errorf("ToCore aliases its input")
	}
}

func TestStorageHooks(t *testing.T) {
	r := Resources()[0]
	if r.StorageResource == nil || *r.StorageResource != (schema.GroupResource{Group: "", Resource: "events"}) {
		t.Fatalf("StorageResource = %v", r.StorageResource)
	}
	stored, err := r.ToStorage(fullV1Event())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := stored.(*corev1.Event); !ok {
		t.Fatalf("ToStorage returned %T", stored)
	}
	served, err := r.FromStorage(stored)
	if err != nil {
		t.Fatal(err)
	}
	if !apiequality.Semantic.DeepEqual(served, fullV1Event()) {
		t.Errorf("FromStorage(ToStorage(e)) != e")
	}
	if _, err := r.ToStorage(&corev1.Event{}); err == nil {
		t.Errorf("ToStorage accepted a core event")
	}
}

func validNewEvent() *eventsv1.Event {
	return &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: "web.1", Namespace: "default"},
		EventTime:           eventTime,
		ReportingController: "example.com/controller",
		ReportingInstance:   "controller-1",
		Action:              "Scheduling",
		Reason:              "FailedScheduling",
		Regarding:           corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web"},
		Type:                "Normal",
	}
}

func TestEventValidateCreate(t *testing.T) {
	r := Resources()[0]
	tests := []struct {
		name   string
		mutate func(*eventsv1.Event)
		want   []fieldErr
	}{
		{"valid", func(*eventsv1.Event) {}, nil},
		{"no eventTime", func(e *eventsv1.Event) { e.EventTime = metav1.MicroTime{} },
			[]fieldErr{{field.ErrorTypeRequired, "eventTime"}}},
		{"bad type", func(e *eventsv1.Event) { e.Type = "Info" }, []fieldErr{{field.ErrorTypeInvalid, "type"}}},
		{"no reporting controller", func(e *eventsv1.Event) { e.ReportingController = "" },
			// as upstream: required, and the empty name is also not a qualified name (twice)
			[]fieldErr{{field.ErrorTypeRequired, "reportingController"}, {field.ErrorTypeInvalid, "reportingController"}, {field.ErrorTypeInvalid, "reportingController"}}},
		{"no action or reason", func(e *eventsv1.Event) { e.Action, e.Reason = "", "" },
			[]fieldErr{{field.ErrorTypeRequired, "action"}, {field.ErrorTypeRequired, "reason"}}},
		{"note too long", func(e *eventsv1.Event) { e.Note = strings.Repeat("x", 1025) },
			[]fieldErr{{field.ErrorTypeInvalid, "message"}}},
		{"deprecated fields set", func(e *eventsv1.Event) {
			e.DeprecatedCount = 1
			e.DeprecatedSource.Component = "kubelet"
		}, []fieldErr{{field.ErrorTypeInvalid, "count"}, {field.ErrorTypeInvalid, "source"}}},
		{"series of one", func(e *eventsv1.Event) { e.Series = &eventsv1.EventSeries{Count: 1, LastObservedTime: eventTime} },
			[]fieldErr{{field.ErrorTypeInvalid, "series.count"}}},
		{"regarding in another namespace", func(e *eventsv1.Event) {
			e.Namespace = "team-a"
			e.Regarding.Namespace = ""
		}, []fieldErr{{field.ErrorTypeInvalid, "involvedObject.namespace"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := validNewEvent()
			tt.mutate(e)
			r.Strategy.Default(e)
			assertErrs(t, r.Strategy.Validate(ctx, e), tt.want)
		})
	}
}

func TestEventValidateUpdate(t *testing.T) {
	r := Resources()[0]
	old := validNewEvent()
	series := old.DeepCopy()
	series.Series = &eventsv1.EventSeries{Count: 2, LastObservedTime: eventTime}
	assertErrs(t, r.Strategy.ValidateUpdate(ctx, series, old), nil)

	changed := old.DeepCopy()
	changed.Note = "different"
	changed.Regarding.Name = "other"
	changed.EventTime = metav1.NewMicroTime(eventTime.Add(time.Second))
	assertErrs(t, r.Strategy.ValidateUpdate(ctx, changed, old), []fieldErr{
		{field.ErrorTypeInvalid, "involvedObject"}, {field.ErrorTypeInvalid, "message"}, {field.ErrorTypeInvalid, "eventTime"},
	})

	// A stored series is not re-checked when the update leaves it alone.
	storedBad := old.DeepCopy()
	storedBad.Series = &eventsv1.EventSeries{Count: 1, LastObservedTime: eventTime}
	untouched := storedBad.DeepCopy()
	untouched.Labels = map[string]string{"seen": "yes"}
	assertErrs(t, r.Strategy.ValidateUpdate(ctx, untouched, storedBad), nil)
	untouched.Series.Count = 0
	assertErrs(t, r.Strategy.ValidateUpdate(ctx, untouched, storedBad), []fieldErr{{field.ErrorTypeInvalid, "series.count"}})

	nanos := old.DeepCopy()
	nanos.EventTime = metav1.NewMicroTime(eventTime.Add(300 * time.Nanosecond))
	assertErrs(t, r.Strategy.ValidateUpdate(ctx, nanos, old), nil)
}

func TestEventFields(t *testing.T) {
	r := Resources()[0]
	set := r.Fields(fullV1Event())
	for _, tt := range []struct {
		selector string
		match    bool
	}{
		{"regarding.kind=Pod,regarding.name=web", true},
		{"reason=FailedScheduling,type=Warning", true},
		{"reportingController=example.com/controller", true},
		{"regarding.name=db", false},
	} {
		sel, err := fields.ParseSelector(tt.selector)
		if err != nil {
			t.Fatal(err)
		}
		if got := sel.Matches(set); got != tt.match {
			t.Errorf("%q matches = %v, want %v", tt.selector, got, tt.match)
		}
	}
	// A stored core event gives the same fields.
	if !reflect.DeepEqual(r.Fields(ToCore(fullV1Event())), set) {
		t.Errorf("fields of the stored shape differ")
	}
}

func TestEventPrint(t *testing.T) {
	r := Resources()[0]
	var names []string
	for _, c := range r.Printer.Columns {
		if c.Priority == 0 {
			names = append(names, c.Name)
		}
	}
	if want := []string{"Last Seen", "Type", "Reason", "Object", "Message"}; !reflect.DeepEqual(names, want) {
		t.Errorf("default columns = %v, want %v", names, want)
	}
	hourAgo := metav1.NewMicroTime(time.Now().Add(-72 * time.Hour))
	tests := []struct {
		name string
		ev   *eventsv1.Event
		want []interface{}
	}{
		{"singleton new-style event", &eventsv1.Event{
			ObjectMeta: metav1.ObjectMeta{Name: "web.1"}, EventTime: hourAgo, Type: "Normal", Reason: "Scheduled",
			Regarding: corev1.ObjectReference{Kind: "Pod", Name: "web"}, Note: " Assigned default/web to node-1\n",
			ReportingController: "default-scheduler", ReportingInstance: "sched-1",
		}, []interface{}{"3d", "Normal", "Scheduled", "pod/web", "", "default-scheduler, sched-1",
			"Assigned default/web to node-1", "3d", int64(1), "web.1"}},
		{"old-style event with count", &eventsv1.Event{
			ObjectMeta: metav1.ObjectMeta{Name: "n.1"}, Type: "Warning", Reason: "Rebooted",
			Regarding: corev1.ObjectReference{Kind: "Node"}, Note: "rebooted",
			DeprecatedSource:         corev1.EventSource{Component: "kubelet"},
			DeprecatedFirstTimestamp: threeDaysAgo, DeprecatedLastTimestamp: threeDaysAgo, DeprecatedCount: 4,
		}, []interface{}{"3d", "Warning", "Rebooted", "node", "", "kubelet", "rebooted", "3d", int64(4), "n.1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := r.Printer.Row(tt.ev); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("row = %#v, want %#v", got, tt.want)
			}
		})
	}
}
