// Package endpointslicemirroring mirrors custom Endpoints into EndpointSlices: for a
// service without a selector, whose Endpoints someone else writes, it keeps slices that
// list the same addresses, one per address type and port set, labelled with the
// service name and this controller as their manager and owned by the Endpoints. Endpoints
// labelled endpointslice.kubernetes.io/skip-mirror=true (the apiserver's own
// default/kubernetes among them) and services with a selector (whose slices the
// endpointslice controller writes) are left alone.
package endpointslicemirroring

import (
	"context"
	"fmt"
	"net/netip"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	coreinformers "k8s.io/client-go/informers/core/v1"
	discoveryinformers "k8s.io/client-go/informers/discovery/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"

	"mizzen/internal/controller/util"
	"mizzen/internal/controller/writeexpect"
)

// Name names the controller in its logs.
const Name = "endpointslice-mirroring"

// ManagedBy is the value of discovery.LabelManagedBy on the slices this controller owns.
const ManagedBy = "endpointslicemirroring-controller.k8s.io"

// lastAppliedAnnotation and the trigger time are not mirrored, as upstream's.
const (
	lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"
	triggerTimeAnnotation = "endpoints.kubernetes.io/last-change-trigger-time"
	// staleAfter bounds how long a slice we created may stay invisible in the informer
	// before a sync stops waiting for it.
	staleAfter = time.Minute
)

// Controller mirrors Endpoints; its queue holds namespace/name keys of Endpoints (the
// same as their services').
type Controller struct {
	client    kubernetes.Interface
	services  corelisters.ServiceLister
	endpoints corelisters.EndpointsLister
	slices    discoverylisters.EndpointSliceLister
	synced    []cache.InformerSynced
	queue     workqueue.TypedRateLimitingInterface[string]

	// written records, per key, slices we created or deleted that the informer has
	// not shown yet: a sync on that stale view would create them again.
	written *writeexpect.Tracker
}

// New registers the controller's handlers on the informers.
func New(client kubernetes.Interface, services coreinformers.ServiceInformer, endpoints coreinformers.EndpointsInformer,
	slices discoveryinformers.EndpointSliceInformer) *Controller {
	c := &Controller{
		client:    client,
		services:  services.Lister(),
		endpoints: endpoints.Lister(),
		slices:    slices.Lister(),
		synced:    []cache.InformerSynced{services.Informer().HasSynced, endpoints.Informer().HasSynced, slices.Informer().HasSynced},
		queue:     util.NewQueue("endpoint_slice_mirroring"),
		written:   writeexpect.New(staleAfter),
	}
	services.Informer().AddEventHandler(util.EnqueueKeyHandler(c.queue))
	endpoints.Informer().AddEventHandler(util.EnqueueKeyHandler(c.queue))
	slices.Informer().AddEventHandler(util.SliceServiceHandler(c.queue, ManagedBy))
	return c
}

// Run processes keys until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	util.RunKeyWorkers(ctx, Name, c.queue, workers, c.sync, c.synced...)
}

// sync makes the mirrored slices of one Endpoints list exactly its addresses.
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
	var desired []*discovery.EndpointSlice
	svc, err := c.services.Services(namespace).Get(name)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	ep, err := c.endpoints.Endpoints(namespace).Get(name)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if svc != nil && svc.Spec.Selector == nil && ep != nil && ep.Labels[discovery.LabelSkipMirror] != "true" {
		desired = mirror(ep)
	}
	return c.apply(ctx, key, desired, existing)
}

// mirror is the slices an Endpoints object stands for: its subsets grouped by address
// type and port set, ready addresses ready and the others not.
func mirror(ep *corev1.Endpoints) []*discovery.EndpointSlice {
	groups := map[string]*discovery.EndpointSlice{}
	var order []string
	for _, subset := range ep.Subsets {
		ports := make([]discovery.EndpointPort, 0, len(subset.Ports))
		for _, p := range subset.Ports {
			ports = append(ports, discovery.EndpointPort{Name: ptr.To(p.Name), Port: ptr.To(p.Port), Protocol: ptr.To(p.Protocol), AppProtocol: p.AppProtocol})
		}
		sort.Slice(ports, func(i, j int) bool { return *ports[i].Name < *ports[j].Name })
		add := func(a corev1.EndpointAddress, ready bool) {
			ip, err := netip.ParseAddr(a.IP)
			if err != nil {
				return // not an address a slice may hold; upstream skips it too
			}
			addressType := discovery.AddressTypeIPv4
			if ip.Is6() && !ip.Is4In6() {
				addressType = discovery.AddressTypeIPv6
			}
			k := fmt.Sprintf("%s/%v", addressType, portsKey(ports))
			s := groups[k]
			if s == nil {
				s = newSlice(ep, addressType, ports)
				groups[k] = s
				order = append(order, k)
			}
			s.Endpoints = append(s.Endpoints, discovery.Endpoint{
				Addresses:  []string{a.IP},
				Conditions: discovery.EndpointConditions{Ready: ptr.To(ready)},
				Hostname:   nonEmpty(a.Hostname),
				NodeName:   a.NodeName,
				TargetRef:  a.TargetRef,
			})
		}
		for _, a := range subset.Addresses {
			add(a, true)
		}
		for _, a := range subset.NotReadyAddresses {
			add(a, false)
		}
	}
	out := make([]*discovery.EndpointSlice, 0, len(order))
	for _, k := range order {
		out = append(out, groups[k])
	}
	return out
}

func portsKey(ports []discovery.EndpointPort) string {
	key := ""
	for _, p := range ports {
		app := ""
		if p.AppProtocol != nil {
			app = *p.AppProtocol
		}
		key += fmt.Sprintf("%s:%d/%s/%s,", *p.Name, *p.Port, *p.Protocol, app)
	}
	return key
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// newSlice is an empty mirrored slice of ep: its labels and annotations (less kubectl's
// and the trigger time), the service name and manager labels, ep as its controller owner.
func newSlice(ep *corev1.Endpoints, addressType discovery.AddressType, ports []discovery.EndpointPort) *discovery.EndpointSlice {
	s := &discovery.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName:    ep.Name + "-",
			Namespace:       ep.Namespace,
			Labels:          map[string]string{},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ep, corev1.SchemeGroupVersion.WithKind("Endpoints"))},
		},
		AddressType: addressType,
		Ports:       ports,
	}
	for k, v := range ep.Labels {
		s.Labels[k] = v
	}
	s.Labels[discovery.LabelServiceName] = ep.Name
	s.Labels[discovery.LabelManagedBy] = ManagedBy
	for k, v := range ep.Annotations {
		if k == lastAppliedAnnotation || k == triggerTimeAnnotation {
			continue
		}
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		s.Annotations[k] = v
	}
	return s
}

// apply turns existing into desired: a slice of the same address type and ports is
// updated in place (when it differs), the rest created or deleted.
func (c *Controller) apply(ctx context.Context, key string, desired, existing []*discovery.EndpointSlice) error {
	used := map[string]bool{}
	var created, deleted []string
	defer func() { c.written.Expect(key, created, deleted) }()
	for _, want := range desired {
		var match *discovery.EndpointSlice
		for _, have := range existing {
			if !used[have.Name] && have.AddressType == want.AddressType && portsKey(have.Ports) == portsKey(want.Ports) {
				match = have
				break
			}
		}
		if match == nil {
			out, err := c.client.DiscoveryV1().EndpointSlices(want.Namespace).Create(ctx, want, metav1.CreateOptions{})
			if apierrors.IsForbidden(err) && apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("create mirrored endpoint slice for %s: %w", key, err)
			}
			created = append(created, out.Name)
			continue
		}
		used[match.Name] = true
		if apiequality.Semantic.DeepEqual(match.Endpoints, want.Endpoints) && apiequality.Semantic.DeepEqual(match.Labels, want.Labels) &&
			apiequality.Semantic.DeepEqual(match.Annotations, want.Annotations) {
			continue
		}
		update := match.DeepCopy()
		update.Endpoints, update.Labels, update.Annotations = want.Endpoints, want.Labels, want.Annotations
		if _, err := c.client.DiscoveryV1().EndpointSlices(update.Namespace).Update(ctx, update, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("update mirrored endpoint slice %s: %w", update.Name, err)
		}
	}
	for _, have := range existing {
		if used[have.Name] {
			continue
		}
		err := c.client.DiscoveryV1().EndpointSlices(have.Namespace).Delete(ctx, have.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete mirrored endpoint slice %s: %w", have.Name, err)
		}
		deleted = append(deleted, have.Name)
	}
	return nil
}

// checkFresh fails (so the key is retried) while a slice we created or deleted
// is not shown so by the informer yet.
func (c *Controller) checkFresh(key, namespace string) error {
	if c.written.Observed(key, func(name string) bool {
		_, err := c.slices.EndpointSlices(namespace).Get(name)
		return err == nil
	}) {
		return nil
	}
	return fmt.Errorf("mirrored endpoint slices of %s not yet observed after our writes; waiting", key)
}
