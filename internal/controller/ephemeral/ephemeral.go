// Package ephemeral is the ephemeral-volume controller: for every pod volume with an
// ephemeral.volumeClaimTemplate it creates the claim <pod>-<volume>, owned by the pod,
// so the claim is bound and provisioned like any other and is garbage-collected with
// the pod.
package ephemeral

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"mizzen/internal/controller/util"
)

// Name is the controller's name in logs and events.
const Name = "ephemeral-volume-controller"

// Controller creates the claims of pods' ephemeral volumes.
type Controller struct {
	client   kubernetes.Interface
	pods     corelisters.PodLister
	claims   corelisters.PersistentVolumeClaimLister
	recorder record.EventRecorder
	events   *util.Events
	queue    workqueue.TypedRateLimitingInterface[string]
	synced   []cache.InformerSynced
}

// New builds the controller.
func New(client kubernetes.Interface, pods coreinformers.PodInformer, claims coreinformers.PersistentVolumeClaimInformer) *Controller {
	ev := util.NewEvents(client, Name)
	c := &Controller{
		client: client, pods: pods.Lister(), claims: claims.Lister(), recorder: ev, events: ev,
		queue:  util.NewQueue(Name),
		synced: []cache.InformerSynced{pods.Informer().HasSynced, claims.Informer().HasSynced},
	}
	enqueue := func(obj any) {
		if pod, ok := obj.(*v1.Pod); ok && hasEphemeral(pod) {
			util.Enqueue(c.queue, pod)
		}
	}
	pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	})
	// A claim deleted under a live pod is made again.
	claims.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			pvc, ok := obj.(*v1.PersistentVolumeClaim)
			if !ok {
				return
			}
			if ref := metav1.GetControllerOf(pvc); ref != nil && ref.Kind == "Pod" {
				c.queue.Add(pvc.Namespace + "/" + ref.Name)
			}
		},
	})
	return c
}

func hasEphemeral(pod *v1.Pod) bool {
	for _, vol := range pod.Spec.Volumes {
		if vol.Ephemeral != nil {
			return true
		}
	}
	return false
}

// Run blocks until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	c.events.Start(ctx)
	util.RunKeyWorkers(ctx, Name, c.queue, workers, c.sync, c.synced...)
}

func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	pod, err := c.pods.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if pod.DeletionTimestamp != nil {
		return nil
	}
	for _, vol := range pod.Spec.Volumes {
		if vol.Ephemeral == nil || vol.Ephemeral.VolumeClaimTemplate == nil {
			continue
		}
		if err := c.ensureClaim(ctx, pod, vol.Name, vol.Ephemeral.VolumeClaimTemplate); err != nil {
			return err
		}
	}
	return nil
}

func (c *Controller) ensureClaim(ctx context.Context, pod *v1.Pod, volume string, tpl *v1.PersistentVolumeClaimTemplate) error {
	name := pod.Name + "-" + volume
	existing, err := c.claims.PersistentVolumeClaims(pod.Namespace).Get(name)
	if err == nil {
		if !metav1.IsControlledBy(existing, pod) {
			msg := fmt.Sprintf("PVC %s/%s was not created for pod %s/%s (pod is not owner)", pod.Namespace, name, pod.Namespace, pod.Name)
			c.recorder.Event(pod, v1.EventTypeWarning, "FailedBinding", msg)
		}
		return nil
	}
	if !apierrors.IsNotFound(err) {
		return err
	}
	yes := true
	claim := &v1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: pod.Namespace,
			Labels: tpl.Labels, Annotations: tpl.Annotations,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID,
				Controller: &yes, BlockOwnerDeletion: &yes}},
		},
		Spec: *tpl.Spec.DeepCopy(),
	}
	_, err = c.client.CoreV1().PersistentVolumeClaims(pod.Namespace).Create(ctx, claim, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}
