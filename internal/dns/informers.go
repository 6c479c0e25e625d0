package dns

import (
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// newInformers feeds idx from Namespaces, Services and EndpointSlices. The caller starts
// the returned factory; hasSynced reports when all three lists have been delivered.
func newInformers(client kubernetes.Interface, idx *index) (factory informers.SharedInformerFactory, hasSynced func() bool, err error) {
	factory = informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(slimObject))

	nsInformer := factory.Core().V1().Namespaces().Informer()
	nsReg, err := nsInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { setIf(obj, func(ns *v1.Namespace) { idx.setNamespace(ns.Name) }) },
		UpdateFunc: func(_, obj any) { setIf(obj, func(ns *v1.Namespace) { idx.setNamespace(ns.Name) }) },
		DeleteFunc: func(obj any) { deleted(obj, func(ns *v1.Namespace) { idx.deleteNamespace(ns.Name) }) },
	})
	if err != nil {
		return nil, nil, err
	}

	svcInformer := factory.Core().V1().Services().Informer()
	svcReg, err := svcInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { setIf(obj, idx.setService) },
		UpdateFunc: func(_, obj any) { setIf(obj, idx.setService) },
		DeleteFunc: func(obj any) {
			deleted(obj, func(svc *v1.Service) { idx.deleteService(svc.Namespace, svc.Name) })
		},
	})
	if err != nil {
		return nil, nil, err
	}

	sliceInformer := factory.Discovery().V1().EndpointSlices().Informer()
	sliceReg, err := sliceInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { setIf(obj, idx.setSlice) },
		UpdateFunc: func(_, obj any) { setIf(obj, idx.setSlice) },
		DeleteFunc: func(obj any) {
			deleted(obj, func(s *discoveryv1.EndpointSlice) { idx.deleteSlice(s.Namespace, s.Name) })
		},
	})
	if err != nil {
		return nil, nil, err
	}

	hasSynced = func() bool { return nsReg.HasSynced() && svcReg.HasSynced() && sliceReg.HasSynced() }
	return factory, hasSynced, nil
}

func setIf[T any](obj any, set func(T)) {
	if o, ok := obj.(T); ok {
		set(o)
	}
}

// deleted unwraps the tombstone a missed delete arrives as.
func deleted[T any](obj any, del func(T)) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if o, ok := obj.(T); ok {
		del(o)
	}
}

// slimObject drops from cached objects everything DNS does not read, so the informers'
// caches stay small in clusters with many or large objects.
func slimObject(obj any) (any, error) {
	switch o := obj.(type) {
	case *v1.Namespace:
		return &v1.Namespace{ObjectMeta: slimMeta(o.ObjectMeta, nil)}, nil
	case *v1.Service:
		return &v1.Service{
			ObjectMeta: slimMeta(o.ObjectMeta, nil),
			Spec: v1.ServiceSpec{
				Type:                     o.Spec.Type,
				ClusterIP:                o.Spec.ClusterIP,
				ClusterIPs:               o.Spec.ClusterIPs,
				ExternalName:             o.Spec.ExternalName,
				Ports:                    o.Spec.Ports,
				PublishNotReadyAddresses: o.Spec.PublishNotReadyAddresses,
			},
		}, nil
	case *discoveryv1.EndpointSlice:
		var labels map[string]string
		if name, ok := o.Labels[discoveryv1.LabelServiceName]; ok {
			labels = map[string]string{discoveryv1.LabelServiceName: name}
		}
		endpoints := make([]discoveryv1.Endpoint, len(o.Endpoints))
		for i, ep := range o.Endpoints {
			endpoints[i] = discoveryv1.Endpoint{
				Addresses:  ep.Addresses,
				Conditions: discoveryv1.EndpointConditions{Ready: ep.Conditions.Ready},
				Hostname:   ep.Hostname,
			}
		}
		return &discoveryv1.EndpointSlice{
			ObjectMeta:  slimMeta(o.ObjectMeta, labels),
			AddressType: o.AddressType,
			Endpoints:   endpoints,
			Ports:       o.Ports,
		}, nil
	}
	return obj, nil
}

func slimMeta(m metav1.ObjectMeta, labels map[string]string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:            m.Name,
		Namespace:       m.Namespace,
		UID:             m.UID,
		ResourceVersion: m.ResourceVersion,
		Labels:          labels,
	}
}
