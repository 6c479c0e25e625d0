// Package localpath is the controller half of mizzen's bundled local-path storage, like
// k3s's local-path-provisioner: it keeps the default StorageClass "local-path"
// (WaitForFirstConsumer, reclaim Delete), provisions a claim of that class handed to it
// by the persistentvolume-binder as a hostPath PersistentVolume in the local-path
// directory of the node the scheduler selected, pinned there by node affinity, and
// deletes its volumes once released with reclaim policy Delete. The directory itself
// is made and removed by that node's kubelet (internal/localpath): the controller-manager
// cannot reach another node's disk, and the kubelet needs no helper pod or image to.
package localpath

import (
	"context"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
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
	"mizzen/internal/localpath"
)

// Name is the controller's name in logs and its events' source.
const Name = "local-path-provisioner"

// Annotations and labels it reads and writes, as upstream's provisioners.
const (
	annStorageProvisioner = "volume.kubernetes.io/storage-provisioner"
	annSelectedNode       = "volume.kubernetes.io/selected-node"
	annProvisionedBy      = "pv.kubernetes.io/provisioned-by"
	annDefaultClass       = "storageclass.kubernetes.io/is-default-class"
	annResizer            = "volume.kubernetes.io/storage-resizer"
	labelHostname         = "kubernetes.io/hostname"
)

// Controller provisions and deletes local-path volumes.
type Controller struct {
	client   kubernetes.Interface
	claims   corelisters.PersistentVolumeClaimLister
	volumes  corelisters.PersistentVolumeLister
	classes  storagelisters.StorageClassLister
	nodes    corelisters.NodeLister
	recorder record.EventRecorder
	events   *util.Events

	claimQueue  workqueue.TypedRateLimitingInterface[string]
	volumeQueue workqueue.TypedRateLimitingInterface[string]
	synced      []cache.InformerSynced
}

// New builds the provisioner over the shared informers.
func New(client kubernetes.Interface, claims coreinformers.PersistentVolumeClaimInformer, volumes coreinformers.PersistentVolumeInformer,
	classes storageinformers.StorageClassInformer, nodes coreinformers.NodeInformer) *Controller {
	ev := util.NewEvents(client, Name)
	c := &Controller{
		client: client, claims: claims.Lister(), volumes: volumes.Lister(), classes: classes.Lister(), nodes: nodes.Lister(),
		recorder: ev, events: ev,
		claimQueue:  util.NewQueue(Name + "-claims"),
		volumeQueue: util.NewQueue(Name + "-volumes"),
		synced: []cache.InformerSynced{claims.Informer().HasSynced, volumes.Informer().HasSynced,
			classes.Informer().HasSynced, nodes.Informer().HasSynced},
	}
	claims.Informer().AddEventHandler(util.EnqueueKeyHandler(c.claimQueue))
	volumes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { util.Enqueue(c.volumeQueue, obj) },
		UpdateFunc: func(_, obj any) { util.Enqueue(c.volumeQueue, obj) },
	})
	return c
}

// Run makes sure the StorageClass exists, then provisions until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	c.events.Start(ctx)
	if err := EnsureClass(ctx, c.client); err != nil {
		// Not fatal: claims of a class an admin made still get provisioned.
		c.recorder.Eventf(&v1.ObjectReference{Kind: "StorageClass", Name: localpath.ClassName, APIVersion: "storage.k8s.io/v1"},
			v1.EventTypeWarning, "FailedCreate", "creating the default StorageClass: %v", err)
	}
	go util.RunKeyWorkers(ctx, Name+"-volumes", c.volumeQueue, workers, c.syncVolume, c.synced...)
	util.RunKeyWorkers(ctx, Name+"-claims", c.claimQueue, workers, c.syncClaim, c.synced...)
}

// Class is the default StorageClass of local-path storage.
func Class() *storagev1.StorageClass {
	wait := storagev1.VolumeBindingWaitForFirstConsumer
	del := v1.PersistentVolumeReclaimDelete
	// A directory has no size of its own: growing a claim only records the new size,
	// so expansion is allowed.
	expand := true
	return &storagev1.StorageClass{
		ObjectMeta:           metav1.ObjectMeta{Name: localpath.ClassName, Annotations: map[string]string{annDefaultClass: "true"}},
		Provisioner:          localpath.Provisioner,
		VolumeBindingMode:    &wait,
		ReclaimPolicy:        &del,
		AllowVolumeExpansion: &expand,
	}
}

// EnsureClass creates the local-path StorageClass unless one of that name exists; an
// existing one is the admin's and is left as it is.
func EnsureClass(ctx context.Context, client kubernetes.Interface) error {
	_, err := client.StorageV1().StorageClasses().Get(ctx, localpath.ClassName, metav1.GetOptions{})
	if err == nil {
		return nil
	}
	if !apierrors.IsNotFound(err) {
		return err
	}
	_, err = client.StorageV1().StorageClasses().Create(ctx, Class(), metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// volumeName is the PersistentVolume provisioned for a claim, as upstream's
// provisioners name it.
func volumeName(pvc *v1.PersistentVolumeClaim) string { return "pvc-" + string(pvc.UID) }

func (c *Controller) syncClaim(ctx context.Context, key string) error {
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
	if pvc.Annotations[annResizer] == localpath.Provisioner && pvc.DeletionTimestamp == nil {
		return c.resize(ctx, pvc)
	}
	if pvc.Spec.VolumeName != "" || pvc.DeletionTimestamp != nil || pvc.Annotations[annStorageProvisioner] != localpath.Provisioner {
		return nil
	}
	if _, err := c.volumes.Get(volumeName(pvc)); err == nil {
		return nil // provisioned already; the binder binds it
	}
	if pvc.Spec.StorageClassName == nil {
		return nil
	}
	sc, err := c.classes.Get(*pvc.Spec.StorageClassName)
	if err != nil || sc.Provisioner != localpath.Provisioner {
		return nil
	}
	pv, why := c.volumeFor(pvc, sc)
	if why != "" {
		c.recorder.Event(pvc, v1.EventTypeWarning, "ProvisioningFailed", "failed to provision volume with StorageClass \""+sc.Name+"\": "+why)
		return nil
	}
	c.recorder.Event(pvc, v1.EventTypeNormal, "Provisioning", fmt.Sprintf("External provisioner is provisioning volume for claim %q", key))
	if _, err := c.client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		c.recorder.Event(pvc, v1.EventTypeWarning, "ProvisioningFailed", fmt.Sprintf("failed to provision volume with StorageClass %q: %v", sc.Name, err))
		return err
	}
	c.recorder.Event(pvc, v1.EventTypeNormal, "ProvisioningSucceeded", fmt.Sprintf("Successfully provisioned volume %s", pv.Name))
	return nil
}

// volumeFor is the volume to provision for the claim, or why there can be none.
func (c *Controller) volumeFor(pvc *v1.PersistentVolumeClaim, sc *storagev1.StorageClass) (*v1.PersistentVolume, string) {
	if pvc.Spec.VolumeMode != nil && *pvc.Spec.VolumeMode == v1.PersistentVolumeBlock {
		return nil, "Block volume mode is not supported: local-path volumes are directories"
	}
	for _, m := range pvc.Spec.AccessModes {
		if m != v1.ReadWriteOnce && m != v1.ReadWriteOncePod {
			return nil, fmt.Sprintf("access mode %s is not supported: local-path volumes live on one node (ReadWriteOnce and ReadWriteOncePod only)", m)
		}
	}
	if pvc.Spec.Selector != nil {
		return nil, "claim Selector is not supported"
	}
	nodeName := pvc.Annotations[annSelectedNode]
	if nodeName == "" {
		return nil, "configuration error, no node was specified: the StorageClass needs volumeBindingMode WaitForFirstConsumer"
	}
	node, err := c.nodes.Get(nodeName)
	if err != nil {
		return nil, fmt.Sprintf("selected node %q: %v", nodeName, err)
	}
	dir := node.Annotations[localpath.NodeDirAnnotation]
	if dir == "" {
		return nil, fmt.Sprintf("node %q offers no local-path storage (its kubelet has no --local-path-dir)", nodeName)
	}
	hostname := node.Labels[labelHostname]
	if hostname == "" {
		hostname = node.Name
	}
	name := volumeName(pvc)
	policy := v1.PersistentVolumeReclaimDelete
	if sc.ReclaimPolicy != nil {
		policy = *sc.ReclaimPolicy
	}
	mode := v1.PersistentVolumeFilesystem
	dirType := v1.HostPathDirectoryOrCreate
	path := strings.TrimSuffix(dir, "/") + "/" + localpath.DirName(name, pvc.Namespace, pvc.Name)
	return &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{annProvisionedBy: localpath.Provisioner}},
		Spec: v1.PersistentVolumeSpec{
			Capacity:                      v1.ResourceList{v1.ResourceStorage: pvc.Spec.Resources.Requests[v1.ResourceStorage]},
			AccessModes:                   pvc.Spec.AccessModes,
			VolumeMode:                    &mode,
			StorageClassName:              sc.Name,
			PersistentVolumeReclaimPolicy: policy,
			MountOptions:                  sc.MountOptions,
			ClaimRef: &v1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1",
				Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID, ResourceVersion: pvc.ResourceVersion},
			PersistentVolumeSource: v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: path, Type: &dirType}},
			NodeAffinity: &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
				MatchExpressions: []v1.NodeSelectorRequirement{{Key: labelHostname, Operator: v1.NodeSelectorOpIn, Values: []string{hostname}}},
			}}}},
		},
	}, ""
}

// syncVolume deletes a released local-path volume whose policy says Delete; its node's
// kubelet then removes the directory.
func (c *Controller) syncVolume(ctx context.Context, name string) error {
	pv, err := c.volumes.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if !localpath.IsLocalPath(pv) || pv.DeletionTimestamp != nil || pv.Status.Phase != v1.VolumeReleased ||
		pv.Spec.PersistentVolumeReclaimPolicy != v1.PersistentVolumeReclaimDelete {
		return nil
	}
	err = c.client.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &pv.UID},
	})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// resize grows a bound local-path claim handed to it by the persistentvolume-expander.
// A directory has no size of its own, so resizing records the new size: the volume's
// capacity first, then the claim's status, each step idempotent.
func (c *Controller) resize(ctx context.Context, pvc *v1.PersistentVolumeClaim) error {
	want := pvc.Spec.Resources.Requests[v1.ResourceStorage]
	have, ok := pvc.Status.Capacity[v1.ResourceStorage]
	if pvc.Status.Phase != v1.ClaimBound || pvc.Spec.VolumeName == "" || !ok || want.Cmp(have) <= 0 {
		return nil
	}
	pv, err := c.volumes.Get(pvc.Spec.VolumeName)
	if err != nil {
		return err
	}
	if !localpath.IsLocalPath(pv) {
		return nil
	}
	if pvCap := pv.Spec.Capacity[v1.ResourceStorage]; pvCap.Cmp(want) < 0 {
		c.recorder.Event(pvc, v1.EventTypeNormal, "Resizing", fmt.Sprintf("External resizer is resizing volume %s", pv.Name))
		vol := pv.DeepCopy()
		vol.Spec.Capacity[v1.ResourceStorage] = want
		if _, err := c.client.CoreV1().PersistentVolumes().Update(ctx, vol, metav1.UpdateOptions{}); err != nil {
			c.recorder.Event(pvc, v1.EventTypeWarning, "VolumeResizeFailed", err.Error())
			return err
		}
	}
	claim := pvc.DeepCopy()
	claim.Status.Capacity = v1.ResourceList{v1.ResourceStorage: want}
	claim.Status.AllocatedResources = v1.ResourceList{v1.ResourceStorage: want}
	claim.Status.AllocatedResourceStatuses = nil
	var conds []v1.PersistentVolumeClaimCondition
	for _, cond := range claim.Status.Conditions {
		if cond.Type != v1.PersistentVolumeClaimResizing && cond.Type != v1.PersistentVolumeClaimFileSystemResizePending {
			conds = append(conds, cond)
		}
	}
	claim.Status.Conditions = conds
	if _, err := c.client.CoreV1().PersistentVolumeClaims(claim.Namespace).UpdateStatus(ctx, claim, metav1.UpdateOptions{}); err != nil {
		return err
	}
	c.recorder.Event(pvc, v1.EventTypeNormal, "VolumeResizeSuccessful", "Resize volume succeeded")
	return nil
}
