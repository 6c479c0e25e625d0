package util

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
)

// Events records the Events a controller reports about its objects (what `kubectl
// describe` shows: "Created pod: web-x2k9", "Scaled up replica set ..."). Events are
// sent to the apiserver only once Start is called, so unit tests that call a
// controller's Sync directly write none unless they swap in a record.FakeRecorder.
type Events struct {
	record.EventRecorder
	broadcaster record.EventBroadcaster
	client      kubernetes.Interface
}

// NewEvents returns the recorder of component (e.g. "deployment-controller").
func NewEvents(client kubernetes.Interface, component string) *Events {
	b := record.NewBroadcaster()
	return &Events{
		EventRecorder: b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: component}),
		broadcaster:   b,
		client:        client,
	}
}

// Start sends recorded Events to the apiserver until ctx ends.
func (e *Events) Start(ctx context.Context) {
	e.broadcaster.StartRecordingToSink(newEventSink(e.client))
	go func() {
		<-ctx.Done()
		e.broadcaster.Shutdown()
	}()
}
