package util

import (
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// SliceServiceHandler enqueues the namespace/name of the service an EndpointSlice
// belongs to (its kubernetes.io/service-name label), for the slices managedBy manages.
func SliceServiceHandler(q workqueue.TypedInterface[string], managedBy string) cache.ResourceEventHandler {
	onSlice := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		s, ok := obj.(*discovery.EndpointSlice)
		if ok && s.Labels[discovery.LabelManagedBy] == managedBy && s.Labels[discovery.LabelServiceName] != "" {
			q.Add(s.Namespace + "/" + s.Labels[discovery.LabelServiceName])
		}
	}
	return cache.ResourceEventHandlerFuncs{AddFunc: onSlice, UpdateFunc: func(_, cur any) { onSlice(cur) }, DeleteFunc: onSlice}
}
