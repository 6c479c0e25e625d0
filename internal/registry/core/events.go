package core

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"mizzen/internal/registry"
	"mizzen/internal/registry/validname"
)

// Length limits upstream puts on events that carry an eventTime (the newer style).
const (
	eventReportingInstanceMax = 128
	eventActionMax            = 128
	eventReasonMax            = 128
	eventNoteMax              = 1024
)

func eventsResource() *registry.Resource {
	doc := corev1.Event{}.SwaggerDoc()
	return &registry.Resource{
		GroupVersion: corev1.SchemeGroupVersion,
		Resource:     "events",
		Kind:         "Event",
		SingularName: "event",
		Namespaced:   true,
		ShortNames:   []string{"ev"},
		New:          func() runtime.Object { return &corev1.Event{} },
		NewList:      func() runtime.Object { return &corev1.EventList{} },
		Strategy:     strategy[*corev1.Event]{validate: validateEvent},
		Fields:       eventFields,
		Printer: printerFor([]metav1.TableColumnDefinition{
			column("Last Seen", "string", doc["lastTimestamp"]),
			column("Type", "string", doc["type"]),
			column("Reason", "string", doc["reason"]),
			column("Object", "string", doc["involvedObject"]),
			wideColumn("Subobject", "string", corev1.ObjectReference{}.SwaggerDoc()["fieldPath"]),
			wideColumn("Source", "string", doc["source"]),
			column("Message", "string", doc["message"]),
			wideColumn("First Seen", "string", doc["firstTimestamp"]),
			wideColumn("Count", "string", doc["count"]),
			{Name: "Name", Type: "string", Format: "name", Priority: 1, Description: registry.NameColumn.Description},
		}, eventRow),
	}
}

func validateEvent(_ context.Context, ev *corev1.Event) field.ErrorList {
	var errs field.ErrorList
	nsPath := field.NewPath("involvedObject", "namespace")
	mismatch := field.Invalid(nsPath, ev.InvolvedObject.Namespace, "does not match event.namespace")
	if ev.EventTime.IsZero() {
		// Old-style events: the event lives in its object's namespace ("default" for
		// cluster-scoped objects, for old clients).
		if ev.InvolvedObject.Namespace == "" {
			if ev.Namespace != metav1.NamespaceNone && ev.Namespace != metav1.NamespaceDefault {
				errs = append(errs, mismatch)
			}
		} else if ev.Namespace != ev.InvolvedObject.Namespace {
			errs = append(errs, mismatch)
		}
		return errs
	}
	if ev.InvolvedObject.Namespace == "" && ev.Namespace != metav1.NamespaceDefault && ev.Namespace != metav1.NamespaceSystem {
		errs = append(errs, mismatch)
	}
	controllerPath := field.NewPath("reportingComponent")
	if ev.ReportingController == "" {
		errs = append(errs, field.Required(controllerPath, ""))
	}
	errs = append(errs, validname.ValidateLabelName(ev.ReportingController, controllerPath)...)
	requireShort := func(name, value string, max int) {
		p := field.NewPath(name)
		if value == "" && name != "message" {
			errs = append(errs, field.Required(p, ""))
		}
		if len(value) > max {
			errs = append(errs, field.Invalid(p, "", fmt.Sprintf("can have at most %v characters", max)))
		}
	}
	requireShort("reportingInstance", ev.ReportingInstance, eventReportingInstanceMax)
	requireShort("action", ev.Action, eventActionMax)
	requireShort("reason", ev.Reason, eventReasonMax)
	requireShort("message", ev.Message, eventNoteMax)
	return errs
}

func eventFields(obj runtime.Object) fields.Set {
	ev, ok := obj.(*corev1.Event)
	if !ok {
		return nil
	}
	source := ev.Source.Component
	if source == "" {
		source = ev.ReportingController
	}
	ref := ev.InvolvedObject
	return fields.Set{
		"involvedObject.kind":            ref.Kind,
		"involvedObject.namespace":       ref.Namespace,
		"involvedObject.name":            ref.Name,
		"involvedObject.uid":             string(ref.UID),
		"involvedObject.apiVersion":      ref.APIVersion,
		"involvedObject.resourceVersion": ref.ResourceVersion,
		"involvedObject.fieldPath":       ref.FieldPath,
		"reason":                         ev.Reason,
		"reportingComponent":             ev.ReportingController,
		"source":                         source,
		"type":                           ev.Type,
	}
}

func microAge(t metav1.MicroTime) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(time.Since(t.Time))
}

// eventRow prints first and last seen from whichever timestamps the event's style
// sets, and the count from its series for new-style events.
func eventRow(ev *corev1.Event) []interface{} {
	first := registry.Age(ev.FirstTimestamp)
	if ev.FirstTimestamp.IsZero() {
		first = microAge(ev.EventTime)
	}
	last := registry.Age(ev.LastTimestamp)
	if ev.LastTimestamp.IsZero() {
		last = first
	}
	count := ev.Count
	if ev.Series != nil {
		last = microAge(ev.Series.LastObservedTime)
		count = ev.Series.Count
	} else if count == 0 {
		count = 1
	}
	target := strings.ToLower(ev.InvolvedObject.Kind)
	if ev.InvolvedObject.Name != "" {
		target += "/" + ev.InvolvedObject.Name
	}
	component := ev.Source.Component
	if component == "" {
		component = ev.ReportingController
	}
	host := ev.Source.Host
	if host == "" {
		host = ev.ReportingInstance
	}
	source := component
	if host != "" {
		source += ", " + host
	}
	return []interface{}{last, ev.Type, ev.Reason, target, ev.InvolvedObject.FieldPath, source,
		strings.TrimSpace(ev.Message), first, int64(count), ev.Name}
}
