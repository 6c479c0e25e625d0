// Package resourcequota keeps every ResourceQuota's status current: status.hard mirrors
// spec.hard and status.used is recounted from what exists in the namespace (object
// counts, and the compute requests and limits of pods that still run), honouring the
// quota's scopes for pods.
package resourcequota

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"mizzen/internal/controller/util"
	quotautil "mizzen/internal/quota"
)

// Name names the controller in its logs (its --controllers names,
// upstream's, are given in internal/controllermanager).
const Name = "resourcequota"

// resyncPeriod recounts every quota even without events, as upstream does, which
// covers counts of resource types the controller does not watch.
const resyncPeriod = 5 * time.Minute

// Informers are the typed informers whose objects the controller counts and watches.
type Informers struct {
	Quotas     coreinformers.ResourceQuotaInformer
	Pods       coreinformers.PodInformer
	Services   coreinformers.ServiceInformer
	ConfigMaps coreinformers.ConfigMapInformer
	Secrets    coreinformers.SecretInformer
	PVCs       coreinformers.PersistentVolumeClaimInformer
	// Replenish are informers of other resources quotas count (count/replicasets.apps,
	// replicationcontrollers, ...) through the metadata client: a change to one of their
	// objects recounts the quotas of its namespace at once rather than at the next resync.
	Replenish []cache.SharedIndexInformer
}

// Controller recalculates quota status; its queue holds quota keys.
type Controller struct {
	client     kubernetes.Interface
	metadata   metadata.Interface
	discovery  discovery.DiscoveryInterface
	quotas     corelisters.ResourceQuotaLister
	pods       corelisters.PodLister
	services   corelisters.ServiceLister
	configMaps corelisters.ConfigMapLister
	secrets    corelisters.SecretLister
	pvcs       corelisters.PersistentVolumeClaimLister
	synced     []cache.InformerSynced
	queue      workqueue.TypedRateLimitingInterface[string]
	now        func() time.Time

	// discovered caches the served resources for counting count/<resource>.<group>.
	mu           sync.Mutex
	discovered   []util.DiscoveredResource
	discoveredAt time.Time
}

// discoveryTTL is how long the list of served resources is reused.
const discoveryTTL = 30 * time.Second

// New registers the controller's handlers. The metadata and discovery clients count
// resources that have no typed informer here (count/<resource>.<group>).
func New(client kubernetes.Interface, metadataClient metadata.Interface, disc discovery.DiscoveryInterface, inf Informers) *Controller {
	c := &Controller{
		client: client, metadata: metadataClient, discovery: disc,
		quotas: inf.Quotas.Lister(), pods: inf.Pods.Lister(), services: inf.Services.Lister(),
		configMaps: inf.ConfigMaps.Lister(), secrets: inf.Secrets.Lister(), pvcs: inf.PVCs.Lister(),
		queue: util.NewQueue("resourcequota_primary"),
		now:   time.Now,
	}
	counted := append([]cache.SharedIndexInformer{inf.Pods.Informer(), inf.Services.Informer(),
		inf.ConfigMaps.Informer(), inf.Secrets.Informer(), inf.PVCs.Informer()}, inf.Replenish...)
	c.synced = append(c.synced, inf.Quotas.Informer().HasSynced)
	for _, i := range counted {
		c.synced = append(c.synced, i.HasSynced)
	}
	// A quota created or deleted changes the resourcequotas count of its neighbours; a
	// quota's new spec needs a new status. Its status changes are not looked at: admission
	// charges each write there, and a recount from informers that have not yet seen the
	// charged objects would write a lower usage over it and let the next write through
	// (upstream's controller ignores them for that reason too).
	inf.Quotas.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: c.enqueueNamespaceOf,
		UpdateFunc: func(old, cur any) {
			o, oldOK := old.(*corev1.ResourceQuota)
			n, curOK := cur.(*corev1.ResourceQuota)
			if !oldOK || !curOK || !apiequality.Semantic.DeepEqual(o.Spec, n.Spec) {
				util.Enqueue(c.queue, cur)
			}
		},
		DeleteFunc: c.enqueueNamespaceOf,
	})
	// What releases usage replenishes the quotas of its namespace, as upstream's quota
	// monitor: a deletion, a pod that stops counting (terminal), changes scope (an active
	// deadline given or taken) or is resized in place, a service changing type, any other
	// update. A creation does not: admission charged it already.
	replenish := cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(old, cur any) {
			if releasesUsage(old, cur, c.now()) {
				c.enqueueNamespaceOf(cur)
			}
		},
		DeleteFunc: c.enqueueNamespaceOf,
	}
	for _, i := range counted {
		i.AddEventHandler(replenish)
	}
	return c
}

// releasesUsage: an update that may lower what the object counts for.
func releasesUsage(old, cur any, now time.Time) bool {
	switch o := old.(type) {
	case *corev1.Pod:
		n, ok := cur.(*corev1.Pod)
		return !ok || quotautil.PodCounts(o, now) && !quotautil.PodCounts(n, now) ||
			quotautil.IsTerminating(o) != quotautil.IsTerminating(n) ||
			resizedInPlace(o, n)
	case *corev1.Service:
		n, ok := cur.(*corev1.Service)
		return !ok || o.Spec.Type != n.Spec.Type
	}
	return true
}

// resizedInPlace: a container's resources, as the kubelet reports them, changed (an
// in-place resize), so the pod's usage may have fallen.
func resizedInPlace(old, cur *corev1.Pod) bool {
	resources := func(p *corev1.Pod) map[string]*corev1.ResourceRequirements {
		m := map[string]*corev1.ResourceRequirements{}
		for _, s := range append(append([]corev1.ContainerStatus(nil), p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
			m[s.Name] = s.Resources
		}
		return m
	}
	before, after := resources(old), resources(cur)
	for name, r := range before {
		if a, ok := after[name]; ok && !apiequality.Semantic.DeepEqual(r, a) {
			return true
		}
	}
	return false
}

func (c *Controller) enqueueNamespaceOf(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	m, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	quotas, err := c.quotas.ResourceQuotas(m.GetNamespace()).List(labels.Everything())
	if err != nil {
		return
	}
	for _, q := range quotas {
		c.queue.Add(q.Namespace + "/" + q.Name)
	}
}

// Run processes quotas until ctx ends, recounting all of them every resyncPeriod.
func (c *Controller) Run(ctx context.Context, workers int) {
	go wait.UntilWithContext(ctx, func(context.Context) {
		quotas, _ := c.quotas.List(labels.Everything())
		for _, q := range quotas {
			c.queue.Add(q.Namespace + "/" + q.Name)
		}
	}, resyncPeriod)
	util.RunKeyWorkers(ctx, Name, c.queue, workers, c.sync, c.synced...)
}

// sync recounts one quota and writes its status if it changed.
func (c *Controller) sync(ctx context.Context, key string) error {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	quota, err := c.quotas.ResourceQuotas(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	used, err := c.usage(ctx, quota)
	if err != nil {
		return err
	}
	hard := quota.Spec.Hard.DeepCopy()
	if apiequality.Semantic.DeepEqual(quota.Status.Hard, hard) && apiequality.Semantic.DeepEqual(quota.Status.Used, used) {
		return nil
	}
	updated := quota.DeepCopy()
	updated.Status.Hard, updated.Status.Used = hard, used
	_, err = c.client.CoreV1().ResourceQuotas(namespace).UpdateStatus(ctx, updated, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// usage counts every resource named in spec.hard.
func (c *Controller) usage(ctx context.Context, q *corev1.ResourceQuota) (corev1.ResourceList, error) {
	used := corev1.ResourceList{}
	var pods []*corev1.Pod
	podsListed := false
	for name := range q.Spec.Hard {
		if res, limits, ok := quotautil.ComputeResource(name); ok || countsPods(name) {
			if !podsListed {
				all, err := c.pods.Pods(q.Namespace).List(labels.Everything())
				if err != nil {
					return nil, err
				}
				now := c.now()
				for _, p := range all {
					if quotautil.PodCounts(p, now) && quotautil.PodInScope(p, q) {
						pods = append(pods, p)
					}
				}
				podsListed = true
			}
			if !ok {
				used[name] = *resource.NewQuantity(int64(len(pods)), resource.DecimalSI)
				continue
			}
			sum := resource.Quantity{}
			for _, p := range pods {
				sum.Add(quotautil.PodAmount(p, res, limits))
			}
			used[name] = sum
			continue
		}
		n, err := c.count(ctx, q.Namespace, name)
		if err != nil {
			return nil, err
		}
		used[name] = n
	}
	return used, nil
}

func countsPods(name corev1.ResourceName) bool {
	return name == corev1.ResourcePods || name == "count/pods"
}

// count handles object counts and storage: the core types from informers, anything
// else of the form count/<resource>[.<group>] through the metadata client.
func (c *Controller) count(ctx context.Context, namespace string, name corev1.ResourceName) (resource.Quantity, error) {
	n := func(i int, err error) (resource.Quantity, error) {
		return *resource.NewQuantity(int64(i), resource.DecimalSI), err
	}
	everything := labels.Everything()
	switch name {
	case corev1.ResourceServices, "count/services":
		l, err := c.services.Services(namespace).List(everything)
		return n(len(l), err)
	case corev1.ResourceServicesLoadBalancers, corev1.ResourceServicesNodePorts:
		l, err := c.services.Services(namespace).List(everything)
		total := 0
		for _, s := range l {
			switch {
			case name == corev1.ResourceServicesLoadBalancers && s.Spec.Type == corev1.ServiceTypeLoadBalancer:
				total++
			case name == corev1.ResourceServicesNodePorts && (s.Spec.Type == corev1.ServiceTypeNodePort || s.Spec.Type == corev1.ServiceTypeLoadBalancer):
				for _, p := range s.Spec.Ports {
					if p.NodePort != 0 {
						total++
					}
				}
			}
		}
		return n(total, err)
	case corev1.ResourceConfigMaps, "count/configmaps":
		l, err := c.configMaps.ConfigMaps(namespace).List(everything)
		return n(len(l), err)
	case corev1.ResourceSecrets, "count/secrets":
		l, err := c.secrets.Secrets(namespace).List(everything)
		return n(len(l), err)
	case corev1.ResourcePersistentVolumeClaims, "count/persistentvolumeclaims":
		l, err := c.pvcs.PersistentVolumeClaims(namespace).List(everything)
		return n(len(l), err)
	case corev1.ResourceRequestsStorage:
		l, err := c.pvcs.PersistentVolumeClaims(namespace).List(everything)
		total := resource.Quantity{}
		for _, pvc := range l {
			total.Add(pvc.Spec.Resources.Requests[corev1.ResourceStorage])
		}
		return *resource.NewQuantity(total.Value(), resource.BinarySI), err
	case corev1.ResourceQuotas:
		return c.countOf(ctx, namespace, schema.GroupResource{Resource: "resourcequotas"})
	case corev1.ResourceReplicationControllers:
		return c.countOf(ctx, namespace, schema.GroupResource{Resource: "replicationcontrollers"})
	}
	if rest, ok := strings.CutPrefix(string(name), "count/"); ok {
		return c.countOf(ctx, namespace, schema.ParseGroupResource(rest))
	}
	// Not something this controller knows how to count (e.g. hugepages, storage
	// classes): report zero as upstream does for resources no evaluator claims.
	return resource.Quantity{Format: resource.DecimalSI}, nil
}

// servedResources returns the listable resources, rediscovered at most every discoveryTTL.
func (c *Controller) servedResources() ([]util.DiscoveredResource, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.discovered != nil && c.now().Sub(c.discoveredAt) < discoveryTTL {
		return c.discovered, nil
	}
	resources, err := util.DiscoverResources(c.discovery, "list")
	if err != nil && len(resources) == 0 {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	c.discovered, c.discoveredAt = resources, c.now()
	return resources, nil
}

// countOf lists any resource through the metadata client at its discovered version.
func (c *Controller) countOf(ctx context.Context, namespace string, gr schema.GroupResource) (resource.Quantity, error) {
	zero := *resource.NewQuantity(0, resource.DecimalSI)
	if c.metadata == nil || c.discovery == nil {
		return zero, nil
	}
	resources, err := c.servedResources()
	if err != nil {
		return zero, err
	}
	for _, r := range resources {
		if r.GVR.GroupResource() != gr || !r.Namespaced {
			continue
		}
		list, err := c.metadata.Resource(r.GVR).Namespace(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return zero, fmt.Errorf("count %s: %w", gr, err)
		}
		return *resource.NewQuantity(int64(len(list.Items)), resource.DecimalSI), nil
	}
	slog.DebugContext(ctx, "quota counts a resource the apiserver does not serve", "resource", gr.String())
	return zero, nil
}
