// Package endpoints keeps, for every service with a selector, an Endpoints object of the
// same name listing the ready and not-ready addresses of the pods it selects. Services
// without a selector are left to whoever manages their Endpoints.
package endpoints

import (
	"context"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"mizzen/internal/controller/util"
)

// Name names the controller in its logs (its --controllers names,
// upstream's, are given in internal/controllermanager).
const Name = "endpoints"

const (
	triggerTimeAnnotation  = "endpoints.kubernetes.io/last-change-trigger-time"
	overCapacityAnnotation = "endpoints.kubernetes.io/over-capacity"
	headlessLabel          = "service.kubernetes.io/headless"
	// maxAddresses is where upstream truncates an Endpoints object.
	maxAddresses = 1000
)

// Controller maintains Endpoints; its queue holds service keys.
type Controller struct {
	client    kubernetes.Interface
	services  corelisters.ServiceLister
	pods      corelisters.PodLister
	endpoints corelisters.EndpointsLister
	synced    []cache.InformerSynced
	queue     workqueue.TypedRateLimitingInterface[string]
	events    *util.Events
	recorder  record.EventRecorder
}

// New registers the controller's handlers on the informers.
func New(client kubernetes.Interface, services coreinformers.ServiceInformer, pods coreinformers.PodInformer, endpoints coreinformers.EndpointsInformer) *Controller {
	c := &Controller{
		client:    client,
		services:  services.Lister(),
		pods:      pods.Lister(),
		endpoints: endpoints.Lister(),
		synced:    []cache.InformerSynced{services.Informer().HasSynced, pods.Informer().HasSynced, endpoints.Informer().HasSynced},
		queue:     util.NewQueue("endpoint"),
		events:    util.NewEvents(client, "endpoint-controller"),
	}
	c.recorder = c.events
	services.Informer().AddEventHandler(util.EnqueueKeyHandler(c.queue))
	endpoints.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj any) { util.Enqueue(c.queue, obj) }, // recreate if deleted by hand
	})
	pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { c.enqueueServicesOf(obj) },
		UpdateFunc: func(old, cur any) {
			c.enqueueServicesOf(old)
			c.enqueueServicesOf(cur)
		},
		DeleteFunc: func(obj any) { c.enqueueServicesOf(obj) },
	})
	return c
}

func (c *Controller) enqueueServicesOf(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if pod, ok := obj.(*corev1.Pod); ok {
		for _, key := range util.ServicesSelectingPod(c.services, pod.Namespace, pod.Labels) {
			c.queue.Add(key)
		}
	}
}

// Run processes services until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	c.events.Start(ctx)
	util.RunKeyWorkers(ctx, Name, c.queue, workers, c.sync, c.synced...)
}

// sync makes the service's Endpoints match the pods it selects now.
func (c *Controller) sync(ctx context.Context, key string) error {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	svc, err := c.services.Services(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		err := c.client.CoreV1().Endpoints(namespace).Delete(ctx, name, metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	if err != nil {
		return err
	}
	if svc.Spec.Selector == nil {
		return nil // endpoints of a selector-less service are the user's
	}
	pods, err := c.pods.Pods(namespace).List(labels.SelectorFromSet(svc.Spec.Selector))
	if err != nil {
		return err
	}
	subsets, truncated := desiredSubsets(svc, pods)

	current, err := c.endpoints.Endpoints(namespace).Get(name)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	exists := err == nil
	wantLabels := endpointsLabels(svc)
	if exists && apiequality.Semantic.DeepEqual(normalize(current.Subsets), subsets) &&
		maps.Equal(current.Labels, wantLabels) && (current.Annotations[overCapacityAnnotation] == "truncated") == truncated {
		return nil
	}

	ep := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}}
	if exists {
		ep = current.DeepCopy()
	}
	ep.Subsets = subsets
	ep.Labels = wantLabels
	if ep.Annotations == nil {
		ep.Annotations = map[string]string{}
	}
	ep.Annotations[triggerTimeAnnotation] = util.LastChangeTime(svc, pods).UTC().Format(time.RFC3339Nano)
	if truncated {
		ep.Annotations[overCapacityAnnotation] = "truncated"
	} else {
		delete(ep.Annotations, overCapacityAnnotation)
	}
	if exists {
		_, err = c.client.CoreV1().Endpoints(namespace).Update(ctx, ep, metav1.UpdateOptions{})
	} else {
		_, err = c.client.CoreV1().Endpoints(namespace).Create(ctx, ep, metav1.CreateOptions{})
		if apierrors.IsForbidden(err) && apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
			return nil // the namespace is going away, and its endpoints with it
		}
	}
	if err != nil {
		if exists {
			c.recorder.Eventf(ep, corev1.EventTypeWarning, "FailedToUpdateEndpoint", "Failed to update endpoint %s/%s: %v", namespace, name, err)
		} else {
			c.recorder.Eventf(ep, corev1.EventTypeWarning, "FailedToCreateEndpoint", "Failed to create endpoint for service %s/%s: %v", namespace, name, err)
		}
		return fmt.Errorf("write endpoints %s: %w", key, err)
	}
	return nil
}

// endpointsLabels copies the service's labels and marks headless services, as upstream.
func endpointsLabels(svc *corev1.Service) map[string]string {
	out := maps.Clone(svc.Labels)
	if out == nil {
		out = map[string]string{}
	}
	delete(out, headlessLabel)
	if svc.Spec.ClusterIP == corev1.ClusterIPNone {
		out[headlessLabel] = ""
	}
	return out
}

// desiredSubsets lists every selected pod's address under its resolved ports, ready or
// not, packed into one subset per distinct port set and capped at maxAddresses.
func desiredSubsets(svc *corev1.Service, pods []*corev1.Pod) (subsets []corev1.EndpointSubset, truncated bool) {
	publishNotReady := svc.Spec.PublishNotReadyAddresses
	var b subsetBuilder
	for _, pod := range pods {
		if !util.PodServesEndpoints(pod) {
			continue
		}
		if pod.DeletionTimestamp != nil && !publishNotReady {
			continue
		}
		addr := corev1.EndpointAddress{
			IP:        pod.Status.PodIP,
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
		}
		if pod.Spec.NodeName != "" {
			node := pod.Spec.NodeName
			addr.NodeName = &node
		}
		if pod.Spec.Hostname != "" && pod.Spec.Subdomain == svc.Name {
			addr.Hostname = pod.Spec.Hostname
		}
		ready := publishNotReady || util.IsPodReady(pod)
		if len(svc.Spec.Ports) == 0 {
			if svc.Spec.ClusterIP == corev1.ClusterIPNone {
				b.add(nil, addr, ready)
			}
			continue
		}
		for _, sp := range svc.Spec.Ports {
			port, ok := util.TargetPortOf(pod, sp)
			if !ok {
				continue
			}
			b.add([]corev1.EndpointPort{{Name: sp.Name, Port: port, Protocol: sp.Protocol, AppProtocol: sp.AppProtocol}}, addr, ready)
		}
	}
	return b.build(maxAddresses)
}
