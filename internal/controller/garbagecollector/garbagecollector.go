// Package garbagecollector deletes objects whose owners are gone and carries out the
// foreground and orphan deletion modes. It watches the metadata of every deletable
// resource the apiserver serves (rediscovered periodically, so new resource types are
// covered) and follows metadata.ownerReferences:
//
//   - an object all of whose owners are gone is deleted, after a live GET by UID has
//     confirmed each owner really is gone;
//   - an owner being deleted with the foregroundDeletion finalizer has its dependents
//     deleted first, and loses the finalizer once no dependent with
//     blockOwnerDeletion remains;
//   - an owner being deleted with the orphan finalizer has its ownerReference removed
//     from every dependent, then loses the finalizer.
//
// An ownerReference that cannot hold (a cluster-scoped object owned by a namespaced
// kind, or an owner that lives in another namespace than its dependent) is reported
// with an OwnerRefInvalidNamespace Event on the dependent, as upstream.
package garbagecollector

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"mizzen/internal/controller/util"
)

// Name names the controller in its logs (its --controllers names,
// upstream's, are given in internal/controllermanager).
const Name = "garbage-collector"

// rediscoverPeriod is how often new resource types are looked for, as upstream.
const rediscoverPeriod = 30 * time.Second

// cacheSyncTimeout bounds the wait for every resource's first list at start.
const cacheSyncTimeout = time.Minute

// Controller collects garbage; its queue holds object keys (resource, namespace, name).
type Controller struct {
	metadata  metadata.Interface
	discovery discovery.DiscoveryInterface
	monitors  *monitors
	queue     workqueue.TypedRateLimitingInterface[string]
	events    *util.Events
	recorder  record.EventRecorder
	absent    *absentOwners
}

// New builds the collector; client carries its Events. Built-in resources are watched
// through typed, when set (the shared factory, so that objects other controllers
// watch are not cached twice), the others through metadata-only informers. Nothing
// is watched until Run discovers the resources.
func New(client kubernetes.Interface, metadataClient metadata.Interface, disc discovery.DiscoveryInterface, typed informers.SharedInformerFactory) *Controller {
	events := util.NewEvents(client, "garbage-collector-controller")
	return &Controller{
		events:    events,
		recorder:  events,
		metadata:  metadataClient,
		absent:    newAbsentOwners(),
		discovery: disc,
		monitors: &monitors{
			factory: metadatainformer.NewSharedInformerFactoryWithOptions(metadataClient, 0, metadatainformer.WithTransform(util.TrimManagedFields)),
			typed:   typed,
			byGVR:   map[schema.GroupVersionResource]*monitor{},
			byKind:  map[schema.GroupKind]*monitor{},
		},
		queue: util.NewQueue("garbage_collector_attempt_to_delete"),
	}
}

// Run watches every deletable resource and collects until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	c.events.Start(ctx)
	if err := c.discover(ctx); err != nil {
		slog.WarnContext(ctx, "garbage collector: partial discovery", "err", err)
	}
	go wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := c.discover(ctx); err != nil {
			slog.WarnContext(ctx, "garbage collector: partial discovery", "err", err)
		}
	}, rediscoverPeriod)
	// Acting before the caches are full could remove a foreground finalizer while
	// dependents of a not-yet-listed type remain; but a resource that cannot be listed
	// must not stop collection for good, so the wait is bounded, as upstream.
	syncCtx, cancel := context.WithTimeout(ctx, cacheSyncTimeout)
	if !cache.WaitForCacheSync(syncCtx.Done(), c.monitors.allSynced) && ctx.Err() == nil {
		slog.WarnContext(ctx, "garbage collector: not every resource could be listed; collecting anyway", "waited", cacheSyncTimeout)
	}
	cancel()
	util.RunKeyWorkers(ctx, Name, c.queue, workers, c.sync)
}

// discover starts monitors for resource types not yet watched.
func (c *Controller) discover(ctx context.Context) error {
	found, err := util.DiscoverResources(c.discovery, "list", "watch", "delete")
	added := c.monitors.sync(found, c.addHandlers)
	if len(added) > 0 {
		c.monitors.start(ctx)
	}
	return err
}

func (c *Controller) addHandlers(mon *monitor) {
	toMeta := mon.meta
	mon.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if m := toMeta(obj); m != nil {
				c.queue.Add(objectKey(mon.gvr, m.Namespace, m.Name))
			}
		},
		UpdateFunc: func(old, cur any) {
			o, m := toMeta(old), toMeta(cur)
			if m == nil {
				return
			}
			c.queue.Add(objectKey(mon.gvr, m.Namespace, m.Name))
			if o != nil && !slices.EqualFunc(o.OwnerReferences, m.OwnerReferences, func(a, b metav1.OwnerReference) bool {
				return a.UID == b.UID && ptrEq(a.BlockOwnerDeletion, b.BlockOwnerDeletion)
			}) {
				c.enqueueOwners(o) // a foreground owner may be waiting on this object no more
			}
		},
		DeleteFunc: func(obj any) {
			m := toMeta(obj)
			if m == nil {
				return
			}
			c.enqueueOwners(m)
			for _, d := range c.monitors.dependentsOf(m.UID) {
				c.queue.Add(objectKey(d.mon.gvr, d.obj.Namespace, d.obj.Name))
			}
		},
	})
}

func ptrEq(a, b *bool) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

func (c *Controller) enqueueOwners(m *metav1.PartialObjectMetadata) {
	for _, ref := range m.OwnerReferences {
		if mon := c.monitors.forOwner(ref); mon != nil {
			ns := ""
			if mon.namespaced {
				ns = m.Namespace
			}
			c.queue.Add(objectKey(mon.gvr, ns, ref.Name))
		}
	}
}

// sync handles one object: if it is being deleted in foreground or orphan mode, it
// processes its dependents; otherwise it checks whether its owners still exist.
func (c *Controller) sync(ctx context.Context, key string) error {
	gvr, namespace, name, err := parseKey(key)
	if err != nil {
		return nil
	}
	mon := c.monitors.get(gvr)
	if mon == nil {
		return nil
	}
	cacheKey := name
	if namespace != "" {
		cacheKey = namespace + "/" + name
	}
	obj, exists, err := mon.informer.GetIndexer().GetByKey(cacheKey)
	if err != nil || !exists {
		return err
	}
	item := mon.meta(obj)
	if item == nil {
		return nil
	}
	if item.DeletionTimestamp != nil {
		switch {
		case slices.Contains(item.Finalizers, metav1.FinalizerOrphanDependents):
			return c.orphanDependents(ctx, mon, item)
		case slices.Contains(item.Finalizers, metav1.FinalizerDeleteDependents):
			return c.deleteDependentsFirst(ctx, mon, item)
		}
		return nil
	}
	if len(item.OwnerReferences) == 0 {
		return nil
	}
	return c.collectIfOrphaned(ctx, mon, item)
}

// ownerState is what a live check found about one owner.
type ownerState int

const (
	ownerPresent  ownerState = iota // exists and is not being deleted in foreground
	ownerGone                       // absent, or the name now belongs to another UID
	ownerDeleting                   // exists with the foregroundDeletion finalizer
	ownerUnknown                    // its kind is not served: leave the dependent alone
)

// ownerState looks an owner up in the cache and, when the cache does not show it,
// confirms with a live GET by UID: a lagging cache must never cause a deletion.
func (c *Controller) ownerState(ctx context.Context, dependentMon *monitor, dependent *metav1.PartialObjectMetadata, ref metav1.OwnerReference) (ownerState, error) {
	mon := c.monitors.forOwner(ref)
	if mon == nil {
		return ownerUnknown, nil
	}
	ns := ""
	if mon.namespaced {
		if dependent.Namespace == "" {
			// A cluster-scoped object cannot be owned by a namespaced one; whether that
			// owner exists cannot be told, so the object is left alone, as upstream.
			c.reportInvalidNamespace(dependentMon, dependent, ref)
			return ownerUnknown, nil
		}
		ns = dependent.Namespace
	}
	classify := func(o *metav1.PartialObjectMetadata) ownerState {
		if o.UID != ref.UID {
			return ownerGone
		}
		if o.DeletionTimestamp != nil && slices.Contains(o.Finalizers, metav1.FinalizerDeleteDependents) {
			return ownerDeleting
		}
		return ownerPresent
	}
	key := ref.Name
	if ns != "" {
		key = ns + "/" + ref.Name
	}
	if obj, ok, _ := mon.informer.GetIndexer().GetByKey(key); ok {
		if o := mon.meta(obj); o != nil && o.UID == ref.UID {
			return classify(o), nil
		}
	}
	if c.absent.has(ns, ref.UID) {
		return ownerGone, nil
	}
	live, err := c.metadata.Resource(mon.gvr).Namespace(ns).Get(ctx, ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		if mon.holdsUID(ref.UID) {
			// Not remembered: each dependent is to be told its owner is in
			// another namespace.
			c.reportInvalidNamespace(dependentMon, dependent, ref)
		} else {
			c.absent.add(ns, ref.UID)
		}
		return ownerGone, nil
	}
	if err != nil {
		return ownerUnknown, err
	}
	state := classify(live)
	if state == ownerGone && !mon.holdsUID(ref.UID) {
		c.absent.add(ns, ref.UID)
	}
	return state, nil
}

// reportInvalidNamespace tells the dependent's users that its owner cannot be in its
// namespace, worded as upstream.
func (c *Controller) reportInvalidNamespace(mon *monitor, dependent *metav1.PartialObjectMetadata, ref metav1.OwnerReference) {
	owner := fmt.Sprintf("[%s/%s, namespace: %s, name: %s, uid: %s]", ref.APIVersion, ref.Kind, dependent.Namespace, ref.Name, ref.UID)
	c.recorder.Eventf(&corev1.ObjectReference{APIVersion: mon.gvr.GroupVersion().String(), Kind: mon.kind,
		Namespace: dependent.Namespace, Name: dependent.Name, UID: dependent.UID},
		corev1.EventTypeWarning, "OwnerRefInvalidNamespace", "ownerRef %s does not exist in namespace %q", owner, dependent.Namespace)
}

// collectIfOrphaned deletes an object all of whose owners are gone, and drops
// references to gone or foreground-deleting owners when a live owner remains.
func (c *Controller) collectIfOrphaned(ctx context.Context, mon *monitor, item *metav1.PartialObjectMetadata) error {
	var present, gone, deleting []metav1.OwnerReference
	for _, ref := range item.OwnerReferences {
		state, err := c.ownerState(ctx, mon, item, ref)
		if err != nil {
			return err
		}
		switch state {
		case ownerPresent, ownerUnknown:
			present = append(present, ref)
		case ownerGone:
			gone = append(gone, ref)
		case ownerDeleting:
			deleting = append(deleting, ref)
		}
	}
	switch {
	case len(present) > 0 && len(gone)+len(deleting) == 0:
		return nil
	case len(present) > 0:
		return c.patchOwnerReferences(ctx, mon, item, present)
	case len(deleting) > 0:
		// An owner is being deleted in the foreground: go first, taking our own
		// dependents with us in the same mode if we have any.
		policy := metav1.DeletePropagationBackground
		dependents := c.monitors.dependentsOf(item.UID)
		if len(dependents) > 0 {
			policy = metav1.DeletePropagationForeground
		}
		// A dependent that is itself waiting for its dependents may be waiting, through
		// a circle of owners, for the foreground owner above us: each would hold the
		// next forever. As upstream does, stop blocking our owners first, which lets the
		// owner waiting on us finish and breaks the circle.
		for _, d := range dependents {
			if d.obj.DeletionTimestamp != nil && slices.Contains(d.obj.Finalizers, metav1.FinalizerDeleteDependents) {
				if err := c.patchOwnerReferences(ctx, mon, item, unblocked(item.OwnerReferences)); err != nil {
					return err
				}
				break
			}
		}
		return c.delete(ctx, mon, item, policy)
	default:
		policy := metav1.DeletePropagationBackground
		if slices.Contains(item.Finalizers, metav1.FinalizerOrphanDependents) {
			policy = metav1.DeletePropagationOrphan
		} else if slices.Contains(item.Finalizers, metav1.FinalizerDeleteDependents) {
			policy = metav1.DeletePropagationForeground
		}
		slog.InfoContext(ctx, "deleting object whose owners are gone", "resource", mon.gvr.String(), "namespace", item.Namespace, "name", item.Name)
		return c.delete(ctx, mon, item, policy)
	}
}

// deleteDependentsFirst: foreground deletion. Dependents are deleted (or, if another
// owner keeps them, released); the owner's finalizer goes once no dependent with
// blockOwnerDeletion is left.
func (c *Controller) deleteDependentsFirst(ctx context.Context, mon *monitor, owner *metav1.PartialObjectMetadata) error {
	blocking := 0
	for _, d := range c.monitors.dependentsOf(owner.UID) {
		for _, ref := range d.obj.OwnerReferences {
			if ref.UID == owner.UID && ref.BlockOwnerDeletion != nil && *ref.BlockOwnerDeletion {
				blocking++
			}
		}
		if d.obj.DeletionTimestamp == nil {
			if err := c.collectIfOrphaned(ctx, d.mon, d.obj); err != nil {
				return err
			}
		}
	}
	if blocking > 0 {
		return nil // each dependent's deletion event brings the owner back
	}
	return c.removeFinalizer(ctx, mon, owner, metav1.FinalizerDeleteDependents)
}

// unblocked returns the references with blockOwnerDeletion false wherever it was true.
func unblocked(refs []metav1.OwnerReference) []metav1.OwnerReference {
	out := slices.Clone(refs)
	for i := range out {
		if out[i].BlockOwnerDeletion != nil && *out[i].BlockOwnerDeletion {
			f := false
			out[i].BlockOwnerDeletion = &f
		}
	}
	return out
}

// orphanDependents: orphan deletion. Every dependent loses its reference to the owner,
// then the owner loses the orphan finalizer.
func (c *Controller) orphanDependents(ctx context.Context, mon *monitor, owner *metav1.PartialObjectMetadata) error {
	for _, d := range c.monitors.dependentsOf(owner.UID) {
		keep := slices.DeleteFunc(slices.Clone(d.obj.OwnerReferences), func(r metav1.OwnerReference) bool { return r.UID == owner.UID })
		if err := c.patchOwnerReferences(ctx, d.mon, d.obj, keep); err != nil {
			return err
		}
	}
	return c.removeFinalizer(ctx, mon, owner, metav1.FinalizerOrphanDependents)
}

func (c *Controller) delete(ctx context.Context, mon *monitor, item *metav1.PartialObjectMetadata, policy metav1.DeletionPropagation) error {
	uid := item.UID
	err := c.metadata.Resource(mon.gvr).Namespace(item.Namespace).Delete(ctx, item.Name, metav1.DeleteOptions{
		PropagationPolicy: &policy, Preconditions: &metav1.Preconditions{UID: &uid}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // already gone, or replaced by a new object with the same name
	}
	if err != nil {
		return fmt.Errorf("delete %s %s/%s: %w", mon.gvr.Resource, item.Namespace, item.Name, err)
	}
	return nil
}

// patchOwnerReferences sets the object's ownerReferences to keep. The UID in the patch
// makes the apiserver refuse it if the name now belongs to a different object.
func (c *Controller) patchOwnerReferences(ctx context.Context, mon *monitor, item *metav1.PartialObjectMetadata, keep []metav1.OwnerReference) error {
	if keep == nil {
		keep = []metav1.OwnerReference{}
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"uid": item.UID, "ownerReferences": keep}})
	_, err := c.metadata.Resource(mon.gvr).Namespace(item.Namespace).Patch(ctx, item.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("update owner references of %s %s/%s: %w", mon.gvr.Resource, item.Namespace, item.Name, err)
	}
	return nil
}

// removeFinalizer drops one finalizer from a live read of the object; the
// resourceVersion in the patch guards against racing edits of the finalizer list.
func (c *Controller) removeFinalizer(ctx context.Context, mon *monitor, item *metav1.PartialObjectMetadata, finalizer string) error {
	api := c.metadata.Resource(mon.gvr).Namespace(item.Namespace)
	live, err := api.Get(ctx, item.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if live.UID != item.UID || !slices.Contains(live.Finalizers, finalizer) {
		return nil
	}
	rest := slices.DeleteFunc(slices.Clone(live.Finalizers), func(f string) bool { return f == finalizer })
	if rest == nil {
		rest = []string{}
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{
		"finalizers": rest, "resourceVersion": live.ResourceVersion, "uid": live.UID}})
	_, err = api.Patch(ctx, item.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("remove finalizer %s from %s %s/%s: %w", finalizer, mon.gvr.Resource, item.Namespace, item.Name, err)
	}
	return nil
}
