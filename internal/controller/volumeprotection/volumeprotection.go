// Package volumeprotection holds the pvc-protection and pv-protection controllers: they
// keep a claim that a pod still uses, and a volume still bound to a claim, from going
// away under it. Each puts its finalizer (kubernetes.io/pvc-protection,
// kubernetes.io/pv-protection) on objects that lack it, as upstream's do for objects
// created before the StorageObjectInUseProtection admission plugin, and removes it from
// a deleted object only once nothing uses it.
package volumeprotection

import (
	"context"
	"slices"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"mizzen/internal/controller/util"
)

// Finalizers, as upstream's.
const (
	PVCFinalizer = "kubernetes.io/pvc-protection"
	PVFinalizer  = "kubernetes.io/pv-protection"
)

// Names of the controllers in logs.
const (
	PVCName = "pvc-protection"
	PVName  = "pv-protection"
)

// PVCController protects claims in use by pods.
type PVCController struct {
	client kubernetes.Interface
	claims corelisters.PersistentVolumeClaimLister
	pods   corelisters.PodLister
	queue  workqueue.TypedRateLimitingInterface[string]
	synced []cache.InformerSynced
}

// NewPVC builds the pvc-protection controller.
func NewPVC(client kubernetes.Interface, claims coreinformers.PersistentVolumeClaimInformer, pods coreinformers.PodInformer) *PVCController {
	c := &PVCController{
		client: client,
		claims: claims.Lister(),
		pods:   pods.Lister(),
		queue:  util.NewQueue(PVCName),
		synced: []cache.InformerSynced{claims.Informer().HasSynced, pods.Informer().HasSynced},
	}
	claims.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { util.Enqueue(c.queue, obj) },
		UpdateFunc: func(_, obj any) { util.Enqueue(c.queue, obj) },
	})
	// A pod that ends or goes may free its claims.
	enqueuePodClaims := func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		pod, ok := obj.(*v1.Pod)
		if !ok {
			return
		}
		for _, name := range ClaimNames(pod) {
			c.queue.Add(pod.Namespace + "/" + name)
		}
	}
	pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) { enqueuePodClaims(obj) },
		DeleteFunc: enqueuePodClaims,
	})
	return c
}

// Run blocks until ctx ends.
func (c *PVCController) Run(ctx context.Context, workers int) {
	util.RunKeyWorkers(ctx, PVCName, c.queue, workers, c.sync, c.synced...)
}

// ClaimNames are the claims a pod uses: its persistentVolumeClaim volumes and the
// claims of its ephemeral volumes (<pod>-<volume>).
func ClaimNames(pod *v1.Pod) []string {
	var out []string
	for _, vol := range pod.Spec.Volumes {
		switch {
		case vol.PersistentVolumeClaim != nil:
			out = append(out, vol.PersistentVolumeClaim.ClaimName)
		case vol.Ephemeral != nil:
			out = append(out, pod.Name+"-"+vol.Name)
		}
	}
	return out
}

func (c *PVCController) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	pvc, err := c.claims.PersistentVolumeClaims(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	has := slices.Contains(pvc.Finalizers, PVCFinalizer)
	if pvc.DeletionTimestamp == nil {
		if has {
			return nil
		}
		claim := pvc.DeepCopy()
		claim.Finalizers = append(claim.Finalizers, PVCFinalizer)
		_, err := c.client.CoreV1().PersistentVolumeClaims(ns).Update(ctx, claim, metav1.UpdateOptions{})
		return err
	}
	if !has {
		return nil
	}
	used, err := c.inUse(ctx, pvc)
	if err != nil || used {
		return err
	}
	claim := pvc.DeepCopy()
	claim.Finalizers = slices.DeleteFunc(claim.Finalizers, func(f string) bool { return f == PVCFinalizer })
	_, err = c.client.CoreV1().PersistentVolumeClaims(ns).Update(ctx, claim, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// inUse: a pod that has not finished names the claim. A cache that says no is checked
// against a live list, since removing the finalizer cannot be undone.
func (c *PVCController) inUse(ctx context.Context, pvc *v1.PersistentVolumeClaim) (bool, error) {
	pods, err := c.pods.Pods(pvc.Namespace).List(labels.Everything())
	if err != nil {
		return false, err
	}
	if usedBy(pods, pvc.Name) {
		return true, nil
	}
	live, err := c.client.CoreV1().Pods(pvc.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err
	}
	ptrs := make([]*v1.Pod, len(live.Items))
	for i := range live.Items {
		ptrs[i] = &live.Items[i]
	}
	return usedBy(ptrs, pvc.Name), nil
}

// usedBy: a pod not yet finished uses the claim. A finished pod's containers are gone,
// so its claim may go (upstream also frees claims of terminal pods).
func usedBy(pods []*v1.Pod, claim string) bool {
	for _, pod := range pods {
		if pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed {
			continue
		}
		if slices.Contains(ClaimNames(pod), claim) {
			return true
		}
	}
	return false
}

// PVController protects volumes bound to a claim.
type PVController struct {
	client  kubernetes.Interface
	volumes corelisters.PersistentVolumeLister
	queue   workqueue.TypedRateLimitingInterface[string]
	synced  []cache.InformerSynced
}

// NewPV builds the pv-protection controller.
func NewPV(client kubernetes.Interface, volumes coreinformers.PersistentVolumeInformer) *PVController {
	c := &PVController{
		client:  client,
		volumes: volumes.Lister(),
		queue:   util.NewQueue(PVName),
		synced:  []cache.InformerSynced{volumes.Informer().HasSynced},
	}
	volumes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { util.Enqueue(c.queue, obj) },
		UpdateFunc: func(_, obj any) { util.Enqueue(c.queue, obj) },
	})
	return c
}

// Run blocks until ctx ends.
func (c *PVController) Run(ctx context.Context, workers int) {
	util.RunKeyWorkers(ctx, PVName, c.queue, workers, c.sync, c.synced...)
}

func (c *PVController) sync(ctx context.Context, name string) error {
	pv, err := c.volumes.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	has := slices.Contains(pv.Finalizers, PVFinalizer)
	if pv.DeletionTimestamp == nil {
		if has {
			return nil
		}
		vol := pv.DeepCopy()
		vol.Finalizers = append(vol.Finalizers, PVFinalizer)
		_, err := c.client.CoreV1().PersistentVolumes().Update(ctx, vol, metav1.UpdateOptions{})
		return err
	}
	// Bound means a claim still holds it; upstream asks no more than the phase either.
	if !has || pv.Status.Phase == v1.VolumeBound {
		return nil
	}
	vol := pv.DeepCopy()
	vol.Finalizers = slices.DeleteFunc(vol.Finalizers, func(f string) bool { return f == PVFinalizer })
	_, err = c.client.CoreV1().PersistentVolumes().Update(ctx, vol, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
