// Package events describes the events.k8s.io/v1 events resource. Its objects are
// stored as core/v1 events, so that one event is visible through both APIs; this
// package converts between the two shapes field by field, as upstream does, and
// validates, selects and prints events as upstream's events.k8s.io/v1 does.
package events

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"mizzen/internal/registry"
)

// Upstream's limits on an event's strings.
const (
	maxReportingInstanceLength = 128
	maxActionLength            = 128
	maxReasonLength            = 128
	maxNoteLength              = 1024
)

// Resources returns the events.k8s.io/v1 resources.
func Resources() []*registry.Resource {
	doc := corev1.Event{}.SwaggerDoc()
	return []*registry.Resource{{
		GroupVersion:    eventsv1.SchemeGroupVersion,
		Resource:        "events",
		Kind:            "Event",
		SingularName:    "event",
		Namespaced:      true,
		ShortNames:      []string{"ev"},
		New:             func() runtime.Object { return &eventsv1.Event{} },
		NewList:         func() runtime.Object { return &eventsv1.EventList{} },
		Strategy:        eventStrategy{},
		Fields:          selectableFields,
		StorageResource: &schema.GroupResource{Group: "", Resource: "events"},
		ToStorage: func(obj runtime.Object) (runtime.Object, error) {
			ev, ok := obj.(*eventsv1.Event)
			if !ok {
				return nil, fmt.Errorf("events: cannot store %T as a core/v1 event", obj)
			}
			return ToCore(ev), nil
		},
		FromStorage: func(obj runtime.Object) (runtime.Object, error) {
			ev, ok := obj.(*corev1.Event)
			if !ok {
				return nil, fmt.Errorf("events: cannot serve %T as an events.k8s.io/v1 event", obj)
			}
			return FromCore(ev), nil
		},
		// The same table as core/v1 events, as upstream serves both from one store.
		Printer: &registry.Printer{
			Columns: []metav1.TableColumnDefinition{
				{Name: "Last Seen", Type: "string", Description: doc["lastTimestamp"]},
				{Name: "Type", Type: "string", Description: doc["type"]},
				{Name: "Reason", Type: "string", Description: doc["reason"]},
				{Name: "Object", Type: "string", Description: doc["involvedObject"]},
				{Name: "Subobject", Type: "string", Priority: 1, Description: corev1.ObjectReference{}.SwaggerDoc()["fieldPath"]},
				{Name: "Source", Type: "string", Priority: 1, Description: doc["source"]},
				{Name: "Message", Type: "string", Description: doc["message"]},
				{Name: "First Seen", Type: "string", Priority: 1, Description: doc["firstTimestamp"]},
				{Name: "Count", Type: "string", Priority: 1, Description: doc["count"]},
				{Name: "Name", Type: "string", Priority: 1, Format: "name", Description: registry.NameColumn.Description},
			},
			Row: func(obj runtime.Object) []interface{} { return printEvent(asCore(obj)) },
		},
	}}
}

// ToCore converts an events.k8s.io/v1 event to the core/v1 shape it is stored in.
func ToCore(in *eventsv1.Event) *corev1.Event {
	out := &corev1.Event{
		TypeMeta:            metav1.TypeMeta{APIVersion: "v1", Kind: "Event"},
		ObjectMeta:          *in.ObjectMeta.DeepCopy(),
		InvolvedObject:      in.Regarding,
		Reason:              in.Reason,
		Message:             in.Note,
		Source:              in.DeprecatedSource,
		FirstTimestamp:      in.DeprecatedFirstTimestamp,
		LastTimestamp:       in.DeprecatedLastTimestamp,
		Count:               in.DeprecatedCount,
		Type:                in.Type,
		EventTime:           in.EventTime,
		Action:              in.Action,
		ReportingController: in.ReportingController,
		ReportingInstance:   in.ReportingInstance,
	}
	if in.Series != nil {
		out.Series = &corev1.EventSeries{Count: in.Series.Count, LastObservedTime: in.Series.LastObservedTime}
	}
	if in.Related != nil {
		related := *in.Related
		out.Related = &related
	}
	return out
}

// FromCore converts a stored core/v1 event to its events.k8s.io/v1 shape.
func FromCore(in *corev1.Event) *eventsv1.Event {
	out := &eventsv1.Event{
		TypeMeta:                 metav1.TypeMeta{APIVersion: eventsv1.SchemeGroupVersion.String(), Kind: "Event"},
		ObjectMeta:               *in.ObjectMeta.DeepCopy(),
		EventTime:                in.EventTime,
		ReportingController:      in.ReportingController,
		ReportingInstance:        in.ReportingInstance,
		Action:                   in.Action,
		Reason:                   in.Reason,
		Regarding:                in.InvolvedObject,
		Note:                     in.Message,
		Type:                     in.Type,
		DeprecatedSource:         in.Source,
		DeprecatedFirstTimestamp: in.FirstTimestamp,
		DeprecatedLastTimestamp:  in.LastTimestamp,
		DeprecatedCount:          in.Count,
	}
	if in.Series != nil {
		out.Series = &eventsv1.EventSeries{Count: in.Series.Count, LastObservedTime: in.Series.LastObservedTime}
	}
	if in.Related != nil {
		related := *in.Related
		out.Related = &related
	}
	return out
}

// asCore accepts an event of either shape, so that callers holding a stored object
// need not convert it first.
func asCore(obj runtime.Object) *corev1.Event {
	switch ev := obj.(type) {
	case *eventsv1.Event:
		return ToCore(ev)
	case *corev1.Event:
		return ev
	}
	panic(fmt.Sprintf("events: not an event: %T", obj))
}

// selectableFields are the field-selector labels events.k8s.io/v1 accepts; they
// name the v1 fields, and match what upstream translates them to.
func selectableFields(obj runtime.Object) fields.Set {
	ev := asCore(obj)
	ref := ev.InvolvedObject
	return fields.Set{
		"regarding.kind":            ref.Kind,
		"regarding.namespace":       ref.Namespace,
		"regarding.name":            ref.Name,
		"regarding.uid":             string(ref.UID),
		"regarding.apiVersion":      ref.APIVersion,
		"regarding.resourceVersion": ref.ResourceVersion,
		"regarding.fieldPath":       ref.FieldPath,
		"reason":                    ev.Reason,
		"reportingController":       ev.ReportingController,
		"type":                      ev.Type,
	}
}

// eventStrategy validates events.k8s.io/v1 writes as upstream does. Upstream
// validates the stored (core) shape, so its error paths name core fields
// ("message", "count", "involvedObject"), and so do these.
type eventStrategy struct{ registry.BaseStrategy }

func (eventStrategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	ev := asCore(obj)
	allErrs := validateEvent(ev)
	allErrs = append(allErrs, validateSeries(ev)...)
	if ev.EventTime.IsZero() {
		allErrs = append(allErrs, field.Required(field.NewPath("eventTime"), ""))
	}
	if ev.Type != corev1.EventTypeNormal && ev.Type != corev1.EventTypeWarning {
		allErrs = append(allErrs, field.Invalid(field.NewPath("type"), "", fmt.Sprintf("has invalid value: %v", ev.Type)))
	}
	if !ev.FirstTimestamp.IsZero() {
		allErrs = append(allErrs, field.Invalid(field.NewPath("firstTimestamp"), "", "needs to be unset"))
	}
	if !ev.LastTimestamp.IsZero() {
		allErrs = append(allErrs, field.Invalid(field.NewPath("lastTimestamp"), "", "needs to be unset"))
	}
	if ev.Count != 0 {
		allErrs = append(allErrs, field.Invalid(field.NewPath("count"), "", "needs to be unset"))
	}
	if ev.Source.Component != "" || ev.Source.Host != "" {
		allErrs = append(allErrs, field.Invalid(field.NewPath("source"), "", "needs to be unset"))
	}
	return allErrs
}

func (eventStrategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	ev, oldEv := asCore(obj), asCore(old)
	allErrs := validateEvent(ev)
	// A series is checked only when the update changes it.
	if !reflect.DeepEqual(ev.Series, oldEv.Series) {
		allErrs = append(allErrs, validateSeries(ev)...)
	}
	immutable := func(newVal, oldVal interface{}, name string) {
		allErrs = append(allErrs, apimachineryvalidation.ValidateImmutableField(newVal, oldVal, field.NewPath(name))...)
	}
	immutable(ev.InvolvedObject, oldEv.InvolvedObject, "involvedObject")
	immutable(ev.Reason, oldEv.Reason, "reason")
	immutable(ev.Message, oldEv.Message, "message")
	immutable(ev.Source, oldEv.Source, "source")
	immutable(ev.FirstTimestamp, oldEv.FirstTimestamp, "firstTimestamp")
	immutable(ev.LastTimestamp, oldEv.LastTimestamp, "lastTimestamp")
	immutable(ev.Count, oldEv.Count, "count")
	immutable(ev.Type, oldEv.Type, "type")
	// Sub-microsecond differences are tolerated: clients serialize microseconds.
	if !ev.EventTime.Truncate(time.Microsecond).UTC().Equal(oldEv.EventTime.Truncate(time.Microsecond).UTC()) {
		allErrs = append(allErrs, field.Invalid(field.NewPath("eventTime"), &ev.EventTime, "field is immutable"))
	}
	immutable(ev.Action, oldEv.Action, "action")
	immutable(ev.Related, oldEv.Related, "related")
	immutable(ev.ReportingController, oldEv.ReportingController, "reportingController")
	immutable(ev.ReportingInstance, oldEv.ReportingInstance, "reportingInstance")
	return allErrs
}

// validateEvent holds the checks every event passes, whichever API wrote it.
func validateEvent(ev *corev1.Event) field.ErrorList {
	var allErrs field.ErrorList
	namespacePath := field.NewPath("involvedObject", "namespace")
	if ev.EventTime.IsZero() {
		// An old-style event: its namespace must agree with the object's.
		if ev.InvolvedObject.Namespace == "" {
			if ev.Namespace != metav1.NamespaceNone && ev.Namespace != metav1.NamespaceDefault {
				allErrs = append(allErrs, field.Invalid(namespacePath, ev.InvolvedObject.Namespace, "does not match event.namespace"))
			}
		} else if ev.Namespace != ev.InvolvedObject.Namespace {
			allErrs = append(allErrs, field.Invalid(namespacePath, ev.InvolvedObject.Namespace, "does not match event.namespace"))
		}
		return allErrs
	}
	if ev.InvolvedObject.Namespace == "" && ev.Namespace != metav1.NamespaceDefault && ev.Namespace != metav1.NamespaceSystem {
		allErrs = append(allErrs, field.Invalid(namespacePath, ev.InvolvedObject.Namespace, "does not match event.namespace"))
	}
	controllerPath := field.NewPath("reportingController")
	if ev.ReportingController == "" {
		allErrs = append(allErrs, field.Required(controllerPath, ""))
	}
	for _, msg := range validation.IsQualifiedName(ev.ReportingController) {
		allErrs = append(allErrs, field.Invalid(controllerPath, ev.ReportingController, msg))
	}
	allErrs = append(allErrs, requiredAndShort(ev.ReportingInstance, "reportingInstance", maxReportingInstanceLength)...)
	allErrs = append(allErrs, requiredAndShort(ev.Action, "action", maxActionLength)...)
	allErrs = append(allErrs, requiredAndShort(ev.Reason, "reason", maxReasonLength)...)
	if len(ev.Message) > maxNoteLength {
		allErrs = append(allErrs, field.Invalid(field.NewPath("message"), "", fmt.Sprintf("can have at most %v characters", maxNoteLength)))
	}
	return allErrs
}

func requiredAndShort(value, name string, max int) field.ErrorList {
	var allErrs field.ErrorList
	if value == "" {
		allErrs = append(allErrs, field.Required(field.NewPath(name), ""))
	}
	if len(value) > max {
		allErrs = append(allErrs, field.Invalid(field.NewPath(name), "", fmt.Sprintf("can have at most %v characters", max)))
	}
	return allErrs
}

func validateSeries(ev *corev1.Event) field.ErrorList {
	var allErrs field.ErrorList
	if ev.Series != nil {
		if ev.Series.Count < 2 {
			allErrs = append(allErrs, field.Invalid(field.NewPath("series.count"), "", "should be at least 2"))
		}
		if ev.Series.LastObservedTime.IsZero() {
			allErrs = append(allErrs, field.Required(field.NewPath("series.lastObservedTime"), ""))
		}
	}
	return allErrs
}

// printEvent renders the cells of upstream's event table.
func printEvent(ev *corev1.Event) []interface{} {
	firstSeen := registry.Age(ev.FirstTimestamp)
	if ev.FirstTimestamp.IsZero() {
		firstSeen = microAge(ev.EventTime)
	}
	lastSeen := registry.Age(ev.LastTimestamp)
	if ev.LastTimestamp.IsZero() {
		lastSeen = firstSeen
	}
	count := ev.Count
	if ev.Series != nil {
		lastSeen = microAge(ev.Series.LastObservedTime)
		count = ev.Series.Count
	} else if count == 0 {
		// Singleton events written through events.k8s.io have no count.
		count = 1
	}
	target := strings.ToLower(ev.InvolvedObject.Kind)
	if ev.InvolvedObject.Name != "" {
		target += "/" + ev.InvolvedObject.Name
	}
	return []interface{}{lastSeen, ev.Type, ev.Reason, target, ev.InvolvedObject.FieldPath,
		eventSource(ev), strings.TrimSpace(ev.Message), firstSeen, int64(count), ev.Name}
}

func microAge(t metav1.MicroTime) string {
	return registry.Age(metav1.Time{Time: t.Time})
}

// eventSource is "component, host", taking the reporting controller and instance
// when the deprecated source is empty.
func eventSource(ev *corev1.Event) string {
	component, host := ev.Source.Component, ev.Source.Host
	if component == "" {
		component = ev.ReportingController
	}
	if host == "" {
		host = ev.ReportingInstance
	}
	if host == "" {
		return component
	}
	return component + ", " + host
}
