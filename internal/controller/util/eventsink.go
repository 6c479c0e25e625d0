package util

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
)

// eventSink is client-go's EventSinkImpl, except that a create reads only the
// created Event's name and resourceVersion from the answer: all the recorder keeps of
// it (to patch the Event when it repeats) besides what it sent. A controller-manager
// creating 10,000 pods records as many Events, and client-go decoded each answer
// whole.
type eventSink struct {
	typedcorev1.EventSinkImpl
	rc *rest.RESTClient
}

// newEventSink is the sink for client's Events; a client without a REST client
// behind it (client-go's fakes) gets client-go's own.
func newEventSink(client kubernetes.Interface) record.EventSink {
	impl := typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")}
	rc, _ := client.CoreV1().RESTClient().(*rest.RESTClient)
	if rc == nil {
		return &impl
	}
	return &eventSink{EventSinkImpl: impl, rc: rc}
}

// Create creates event and returns it as the apiserver stored it: what was sent, with
// the name and resourceVersion of the answer.
func (s *eventSink) Create(event *corev1.Event) (*corev1.Event, error) {
	meta, err := postForMeta(context.TODO(), s.rc.Post().
		NamespaceIfScoped(event.Namespace, event.Namespace != "").
		Resource("events").
		Body(event))
	if err != nil {
		return nil, err
	}
	created := event.DeepCopy()
	created.Name, created.ResourceVersion = meta.name, meta.resourceVersion
	return created, nil
}
