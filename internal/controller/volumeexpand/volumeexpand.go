// Package volumeexpand is the persistentvolume-expander: when a bound claim asks for
// more storage than it has, it checks that the claim's StorageClass allows expansion and
// hands the claim to the class's provisioner as its resizer (the
// volume.kubernetes.io/storage-resizer annotation external resizers act on), as upstream
// does for volumes without an in-tree plugin; a class that does not allow expansion gets
// the refusal upstream's PersistentVolumeClaimResize admission would have given, as an
// event.
package volumeexpand

import (
	"context"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
const Name = "volume_expand"

// AnnResizer names the controller that resizes a claim's volume.
const AnnResizer = "volume.kubernetes.io/storage-resizer"

// Controller hands expanding claims to their resizer.
type Controller struct {
	client   kubernetes.Interface
	claims   corelisters.PersistentVolumeClaimLister
	classes  storagelisters.StorageClassLister
	recorder record.EventRecorder
	events   *util.Events
	queue    workqueue.TypedRateLimitingInterface[string]
	synced   []cache.InformerSynced
}

// New builds the expander.
func New(client kubernetes.Interface, claims coreinformers.PersistentVolumeClaimInformer, classes storageinformers.StorageClassInformer) *Controller {
	ev := util.NewEvents(client, Name)
	c := &Controller{client: client, claims: claims.Lister(), classes: classes.Lister(), recorder: ev, events: ev,
		queue:  util.NewQueue("persistentvolume-expander"),
		synced: []cache.InformerSynced{claims.Informer().HasSynced, classes.Informer().HasSynced}}
	claims.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { util.Enqueue(c.queue, obj) },
		UpdateFunc: func(old, obj any) {
			o, n := old.(*v1.PersistentVolumeClaim), obj.(*v1.PersistentVolumeClaim)
			if !o.Spec.Resources.Requests.Storage().Equal(*n.Spec.Resources.Requests.Storage()) || o.Status.Phase != n.Status.Phase {
				util.Enqueue(c.queue, obj)
			}
		},
	})
	return c
}

// Run blocks until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	c.events.Start(ctx)
	util.RunKeyWorkers(ctx, "persistentvolume-expander", c.queue, workers, c.sync, c.synced...)
}

// NeedsExpansion: a bound claim asks for more than its status says it has.
func NeedsExpansion(pvc *v1.PersistentVolumeClaim) bool {
	if pvc.Status.Phase != v1.ClaimBound || pvc.Spec.VolumeName == "" {
		return false
	}
	want := pvc.Spec.Resources.Requests[v1.ResourceStorage]
	have, ok := pvc.Status.Capacity[v1.ResourceStorage]
	return ok && want.Cmp(have) > 0
}

func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	pvc, err := c.claims.PersistentVolumeClaims(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil || !NeedsExpansion(pvc) {
		return err
	}
	className := ""
	if pvc.Spec.StorageClassName != nil {
		className = *pvc.Spec.StorageClassName
	}
	sc, err := c.classes.Get(className)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if sc == nil || sc.AllowVolumeExpansion == nil || !*sc.AllowVolumeExpansion {
		c.recorder.Event(pvc, v1.EventTypeWarning, "VolumeResizeFailed",
			"only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize")
		return nil
	}
	if pvc.Annotations[AnnResizer] != sc.Provisioner {
		claim := pvc.DeepCopy()
		if claim.Annotations == nil {
			claim.Annotations = map[string]string{}
		}
		claim.Annotations[AnnResizer] = sc.Provisioner
		if _, err := c.client.CoreV1().PersistentVolumeClaims(ns).Update(ctx, claim, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	c.recorder.Event(pvc, v1.EventTypeNormal, "ExternalExpanding", "waiting for an external controller to expand this PVC")
	return nil
}
