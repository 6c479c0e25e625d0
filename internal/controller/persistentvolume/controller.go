// Package persistentvolume is the controller-manager's persistentvolume-binder: it binds
// PersistentVolumeClaims to PersistentVolumes (statically, by class, capacity, access
// modes, volumeMode, selector and pre-binding through claimRef or volumeName), hands
// claims it cannot satisfy to their class's provisioner (or waits for the scheduler with
// WaitForFirstConsumer), gives classless claims the default class, moves volumes through
// upstream's phases (Available, Bound, Released, Failed) and applies their reclaim policy
// when their claim goes. It records upstream's events for what it cannot do.
//
// Two queues, one of claim keys and one of volume names; each sync is level-based and
// reads everything from listers, so a restart loses nothing.
package persistentvolume

import (
	"context"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	storageinformers "k8s.io/client-go/informers/storage/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"mizzen/internal/controller/util"
)

// Name is the controller's name in logs and its events' source, as upstream's.
const Name = "persistentvolume-controller"

// resync is how often every claim and volume is looked at again, as upstream's
// --pvclaimbinder-sync-period: provisioners and admins act without events to us.
const resync = 15 * time.Second

// Controller is the persistentvolume-binder.
type Controller struct {
	client   kubernetes.Interface
	claims   corelisters.PersistentVolumeClaimLister
	volumes  corelisters.PersistentVolumeLister
	classes  storagelisters.StorageClassLister
	recorder record.EventRecorder
	events   *util.Events

	claimQueue  workqueue.TypedRateLimitingInterface[string]
	volumeQueue workqueue.TypedRateLimitingInterface[string]
	synced      []cache.InformerSynced

	// bindMu serialises binding, so that two claims are never given one volume by two
	// workers reading the same stale cache.
	bindMu sync.Mutex
}

// New builds the binder over the shared informers.
func New(client kubernetes.Interface, claims coreinformers.PersistentVolumeClaimInformer,
	volumes coreinformers.PersistentVolumeInformer, classes storageinformers.StorageClassInformer) *Controller {
	ev := util.NewEvents(client, Name)
	c := newController(client, claims.Lister(), volumes.Lister(), classes.Lister(), ev)
	c.events = ev
	c.synced = []cache.InformerSynced{claims.Informer().HasSynced, volumes.Informer().HasSynced, classes.Informer().HasSynced}
	claims.Informer().AddEventHandlerWithResyncPeriod(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { util.Enqueue(c.claimQueue, obj) },
		UpdateFunc: func(_, obj any) { util.Enqueue(c.claimQueue, obj) },
		DeleteFunc: func(obj any) {
			// The claim's volume is released: look at it now rather than at resync.
			if pvc, ok := tombstone[*v1.PersistentVolumeClaim](obj); ok && pvc.Spec.VolumeName != "" {
				c.volumeQueue.Add(pvc.Spec.VolumeName)
			}
		},
	}, resync)
	volumes.Informer().AddEventHandlerWithResyncPeriod(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { c.volumeAdded(obj) },
		UpdateFunc: func(_, obj any) {
			c.volumeAdded(obj)
		},
		DeleteFunc: func(obj any) {
			if pv, ok := tombstone[*v1.PersistentVolume](obj); ok && pv.Spec.ClaimRef != nil {
				c.claimQueue.Add(pv.Spec.ClaimRef.Namespace + "/" + pv.Spec.ClaimRef.Name)
			}
		},
	}, resync)
	// A new class may let pending classless claims get a default, or claims of that
	// class be provisioned: look at every pending claim.
	classes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { c.enqueuePendingClaims() },
		UpdateFunc: func(any, any) { c.enqueuePendingClaims() },
	})
	return c
}

func newController(client kubernetes.Interface, claims corelisters.PersistentVolumeClaimLister, volumes corelisters.PersistentVolumeLister,
	classes storagelisters.StorageClassLister, recorder record.EventRecorder) *Controller {
	return &Controller{
		client:      client,
		claims:      claims,
		volumes:     volumes,
		classes:     classes,
		recorder:    recorder,
		claimQueue:  util.NewQueue("persistentvolume-claims"),
		volumeQueue: util.NewQueue("persistentvolume-volumes"),
	}
}

func tombstone[T any](obj any) (T, bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	t, ok := obj.(T)
	return t, ok
}

// volumeAdded queues the volume, and the claim it names: a provisioned or pre-bound
// volume is what a pending claim was waiting for.
func (c *Controller) volumeAdded(obj any) {
	pv, ok := obj.(*v1.PersistentVolume)
	if !ok {
		return
	}
	c.volumeQueue.Add(pv.Name)
	if pv.Spec.ClaimRef != nil {
		c.claimQueue.Add(pv.Spec.ClaimRef.Namespace + "/" + pv.Spec.ClaimRef.Name)
	} else {
		// An available volume may satisfy any pending claim.
		c.enqueuePendingClaims()
	}
}

func (c *Controller) enqueuePendingClaims() {
	list, err := c.claims.List(everything)
	if err != nil {
		return
	}
	for _, pvc := range list {
		if pvc.Status.Phase != v1.ClaimBound {
			c.claimQueue.Add(pvc.Namespace + "/" + pvc.Name)
		}
	}
}

// Run starts the event sink and workers and blocks until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	c.events.Start(ctx)
	go util.RunKeyWorkers(ctx, Name+"-volumes", c.volumeQueue, workers, c.syncVolumeKey, c.synced...)
	util.RunKeyWorkers(ctx, Name+"-claims", c.claimQueue, workers, c.syncClaimKey, c.synced...)
}
