// Package endpointslice keeps, for every service with a selector, EndpointSlices that
// list the pods it selects: one slice family per address type and port set, at most
// 100 endpoints a slice, labelled with the service name and this controller as their
// manager. Slices managed by anyone else, and services without selectors, are left alone.
package endpointslice

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	coreinformers "k8s.io/client-go/informers/core/v1"
	discoveryinformers "k8s.io/client-go/informers/discovery/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"mizzen/internal/controller/util"
	"mizzen/internal/controller/writeexpect"
)

// Name names the controller in its logs (its --controllers names,
// upstream's, are given in internal/controllermanager).
const Name = "endpointslice"

const (
	// ManagedBy is the value of discovery.LabelManagedBy on slices this controller owns.
	ManagedBy             = "endpointslice-controller.k8s.io"
	triggerTimeAnnotation = "endpoints.kubernetes.io/last-change-trigger-time"
	headlessLabel         = "service.kubernetes.io/headless"
	// maxEndpointsPerSlice is upstream's default --max-endpoints-per-slice.
	maxEndpointsPerSlice = 100
	// expectationTimeout bounds how long a write of ours may stay invisible in the
	// informer before we stop waiting for it.
	expectationTimeout = time.Minute
)

// Controller maintains EndpointSlices; its queue holds service keys.
type Controller struct {
	client   kubernetes.Interface
	services corelisters.ServiceLister
	pods     corelisters.PodLister
	nodes    corelisters.NodeLister
	slices   discoverylisters.EndpointSliceLister
	synced   []cache.InformerSynced
	queue    workqueue.TypedRateLimitingInterface[string]
	maxPer   int
	events   *util.Events
	recorder record.EventRecorder

	// written records, per service, slices we created or deleted that the informer
	// has not shown yet; syncing on such a stale view would duplicate slices.
	written *writeexpect.Tracker
}

// New registers the controller's handlers on the informers.
func New(client kubernetes.Interface, services coreinformers.ServiceInformer, pods coreinformers.PodInformer,
	nodes coreinformers.NodeInformer, slices discoveryinformers.EndpointSliceInformer) *Controller {
	c := &Controller{
		client:   client,
		services: services.Lister(),
		pods:     pods.Lister(),
		nodes:    nodes.Lister(),
		slices:   slices.Lister(),
		synced: []cache.InformerSynced{services.Informer().HasSynced, pods.Informer().HasSynced,
			nodes.Informer().HasSynced, slices.Informer().HasSynced},
		queue:   util.NewQueue("endpoint_slice"),
		maxPer:  maxEndpointsPerSlice,
		written: writeexpect.New(expectationTimeout),
		events:  util.NewEvents(client, "endpoint-slice-controller"),
	}
	c.recorder = c.events
	services.Informer().AddEventHandler(util.EnqueueKeyHandler(c.queue))
	pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueueServicesOf,
		UpdateFunc: func(old, cur any) { c.enqueueServicesOf(old); c.enqueueServicesOf(cur) },
		DeleteFunc: c.enqueueServicesOf,
	})
	slices.Informer().AddEventHandler(util.SliceServiceHandler(c.queue, ManagedBy))
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

// sync makes the service's managed slices list exactly the pods it selects now.
func (c *Controller) sync(ctx context.Context, key string) error {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	if err := c.checkFresh(key, namespace); err != nil {
		return err
	}
	existing, err := c.slices.EndpointSlices(namespace).List(labels.SelectorFromSet(labels.Set{
		discovery.LabelServiceName: name, discovery.LabelManagedBy: ManagedBy}))
	if err != nil {
		return err
	}
	svc, err := c.services.Services(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		// The owner references let the garbage collector do this too; doing it here
		// keeps stale endpoints from being served meanwhile.
		p := &plan{}
		p.deletes = existing
		return c.apply(ctx, key, p)
	}
	if err != nil {
		return err
	}
	if svc.Spec.Selector == nil {
		return nil
	}
	pods, err := c.pods.Pods(namespace).List(labels.SelectorFromSet(svc.Spec.Selector))
	if err != nil {
		return err
	}
	desired := c.desiredEndpoints(svc, pods)
	p := reconcile(svc, desired, existing, c.maxPer)
	p.triggerTime = util.LastChangeTime(svc, pods)
	if err := c.apply(ctx, key, p); err != nil {
		c.recorder.Eventf(svc, corev1.EventTypeWarning, "FailedToUpdateEndpointSlices",
			"Error updating Endpoint Slices for Service %s/%s: %v", svc.Namespace, svc.Name, err)
		return err
	}
	return nil
}

// checkFresh fails while the informer has not yet shown our own recent writes.
func (c *Controller) checkFresh(key, namespace string) error {
	if c.written.Observed(key, func(name string) bool {
		_, err := c.slices.EndpointSlices(namespace).Get(name)
		return err == nil
	}) {
		return nil
	}
	return fmt.Errorf("endpoint slices of %s not yet observed after our writes; waiting", key)
}

// apply writes the plan: creates first so a service never goes without endpoints,
// then updates, then deletes.
func (c *Controller) apply(ctx context.Context, key string, p *plan) error {
	var created, deleted []string
	defer func() { c.written.Expect(key, created, deleted) }()
	stamp := func(s *discovery.EndpointSlice) {
		if p.triggerTime.IsZero() {
			return
		}
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		s.Annotations[triggerTimeAnnotation] = p.triggerTime.UTC().Format(time.RFC3339Nano)
	}
	for _, s := range p.creates {
		stamp(s)
		out, err := c.client.DiscoveryV1().EndpointSlices(s.Namespace).Create(ctx, s, metav1.CreateOptions{})
		if apierrors.IsForbidden(err) && apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("create endpoint slice for %s: %w", key, err)
		}
		created = append(created, out.Name)
	}
	for _, s := range p.updates {
		stamp(s)
		if _, err := c.client.DiscoveryV1().EndpointSlices(s.Namespace).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("update endpoint slice %s: %w", s.Name, err)
		}
	}
	for _, s := range p.deletes {
		err := c.client.DiscoveryV1().EndpointSlices(s.Namespace).Delete(ctx, s.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete endpoint slice %s: %w", s.Name, err)
		}
		deleted = append(deleted, s.Name)
	}
	return nil
}
