package persistentvolume

import (
	"context"
	"fmt"
	"sort"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
)

var everything = labels.Everything()

// Annotations the binder reads and writes, as upstream's.
const (
	AnnBindCompleted        = "pv.kubernetes.io/bind-completed"
	AnnBoundByController    = "pv.kubernetes.io/bound-by-controller"
	AnnStorageProvisioner   = "volume.kubernetes.io/storage-provisioner"
	AnnBetaStorageProvision = "volume.beta.kubernetes.io/storage-provisioner"
	AnnSelectedNode         = "volume.kubernetes.io/selected-node"
	AnnDynamicallyProvision = "pv.kubernetes.io/provisioned-by"
	AnnDefaultClass         = "storageclass.kubernetes.io/is-default-class"
	AnnBetaDefaultClass     = "storageclass.beta.kubernetes.io/is-default-class"
	noProvisioner           = "kubernetes.io/no-provisioner"
)

// Event reasons, as upstream's.
const (
	EventFailedBinding       = "FailedBinding"
	EventVolumeMismatch      = "VolumeMismatch"
	EventWaitForFirstConsume = "WaitForFirstConsumer"
	EventExternalProvision   = "ExternalProvisioning"
	EventProvisioningFailed  = "ProvisioningFailed"
	EventClaimLost           = "ClaimLost"
	EventClaimMisbound       = "ClaimMisbound"
	EventVolumeFailedDelete  = "VolumeFailedDelete"
	EventVolumeFailedRecycle = "VolumeFailedRecycle"
)

func (c *Controller) syncClaimKey(ctx context.Context, key string) error {
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
	return c.syncClaim(ctx, pvc)
}

func (c *Controller) syncVolumeKey(ctx context.Context, name string) error {
	pv, err := c.volumes.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	return c.syncVolume(ctx, pv)
}

// syncClaim brings one claim toward Bound.
func (c *Controller) syncClaim(ctx context.Context, pvc *v1.PersistentVolumeClaim) error {
	if pvc.Spec.StorageClassName == nil && pvc.Spec.VolumeName == "" {
		if assigned, err := c.assignDefaultClass(ctx, pvc); assigned || err != nil {
			return err
		}
	}
	if pvc.Annotations[AnnBindCompleted] == "" {
		return c.syncUnboundClaim(ctx, pvc)
	}
	return c.syncBoundClaim(ctx, pvc)
}

// assignDefaultClass gives a classless, unbound claim the default StorageClass (the
// newest one if several are marked), as upstream's retroactive default class does.
func (c *Controller) assignDefaultClass(ctx context.Context, pvc *v1.PersistentVolumeClaim) (bool, error) {
	def := c.defaultClass()
	if def == nil {
		return false, nil
	}
	claim := pvc.DeepCopy()
	claim.Spec.StorageClassName = &def.Name
	_, err := c.client.CoreV1().PersistentVolumeClaims(claim.Namespace).Update(ctx, claim, metav1.UpdateOptions{})
	return true, err
}

func (c *Controller) defaultClass() *storagev1.StorageClass {
	classes, err := c.classes.List(everything)
	if err != nil {
		return nil
	}
	var best *storagev1.StorageClass
	for _, sc := range classes {
		if sc.Annotations[AnnDefaultClass] != "true" && sc.Annotations[AnnBetaDefaultClass] != "true" {
			continue
		}
		if best == nil || best.CreationTimestamp.Before(&sc.CreationTimestamp) ||
			best.CreationTimestamp.Equal(&sc.CreationTimestamp) && sc.Name < best.Name {
			best = sc
		}
	}
	return best
}

func className(pvc *v1.PersistentVolumeClaim) string {
	if pvc.Spec.StorageClassName != nil {
		return *pvc.Spec.StorageClassName
	}
	return ""
}

func (c *Controller) class(pvc *v1.PersistentVolumeClaim) (*storagev1.StorageClass, error) {
	name := className(pvc)
	if name == "" {
		return nil, nil
	}
	return c.classes.Get(name)
}

// delayBinding: the claim's class waits for the scheduler to pick a node.
func delayBinding(sc *storagev1.StorageClass) bool {
	return sc != nil && sc.VolumeBindingMode != nil && *sc.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer
}

func (c *Controller) syncUnboundClaim(ctx context.Context, pvc *v1.PersistentVolumeClaim) error {
	if pvc.Spec.VolumeName != "" {
		return c.syncPreboundClaim(ctx, pvc)
	}
	sc, classErr := c.class(pvc)
	delayed := delayBinding(sc)

	c.bindMu.Lock()
	pv, err := c.findBestMatch(pvc, delayed)
	if err != nil {
		c.bindMu.Unlock()
		return err
	}
	if pv != nil {
		err = c.bind(ctx, pv, pvc)
		c.bindMu.Unlock()
		return err
	}
	c.bindMu.Unlock()

	if delayed && pvc.Annotations[AnnSelectedNode] == "" {
		c.recorder.Event(pvc, v1.EventTypeNormal, EventWaitForFirstConsume, "waiting for first consumer to be created before binding")
		return c.setClaimPhase(ctx, pvc, v1.ClaimPending)
	}
	switch {
	case className(pvc) == "":
		c.recorder.Event(pvc, v1.EventTypeNormal, EventFailedBinding, "no persistent volumes available for this claim and no storage class is set")
	case apierrors.IsNotFound(classErr):
		c.recorder.Event(pvc, v1.EventTypeWarning, EventProvisioningFailed, fmt.Sprintf("storageclass.storage.k8s.io %q not found", className(pvc)))
	case classErr != nil:
		return classErr
	case sc.Provisioner == noProvisioner:
		c.recorder.Event(pvc, v1.EventTypeNormal, EventFailedBinding, "no persistent volumes available for this claim and no storage class is set")
	default:
		if err := c.requestProvisioning(ctx, pvc, sc.Provisioner); err != nil {
			return err
		}
		c.recorder.Event(pvc, v1.EventTypeNormal, EventExternalProvision, fmt.Sprintf("Waiting for a volume to be created either by the external provisioner '%s' or manually by the system administrator. If volume creation is delayed, please verify that the provisioner is running and correctly registered.", sc.Provisioner))
	}
	return c.setClaimPhase(ctx, pvc, v1.ClaimPending)
}

// requestProvisioning names the provisioner on the claim, the signal external
// provisioners act on.
func (c *Controller) requestProvisioning(ctx context.Context, pvc *v1.PersistentVolumeClaim, provisioner string) error {
	if pvc.Annotations[AnnStorageProvisioner] == provisioner && pvc.Annotations[AnnBetaStorageProvision] == provisioner {
		return nil
	}
	claim := pvc.DeepCopy()
	if claim.Annotations == nil {
		claim.Annotations = map[string]string{}
	}
	claim.Annotations[AnnStorageProvisioner] = provisioner
	claim.Annotations[AnnBetaStorageProvision] = provisioner
	_, err := c.client.CoreV1().PersistentVolumeClaims(claim.Namespace).Update(ctx, claim, metav1.UpdateOptions{})
	return err
}

// syncPreboundClaim binds a claim that names its volume.
func (c *Controller) syncPreboundClaim(ctx context.Context, pvc *v1.PersistentVolumeClaim) error {
	pv, err := c.volumes.Get(pvc.Spec.VolumeName)
	if apierrors.IsNotFound(err) {
		c.recorder.Event(pvc, v1.EventTypeNormal, EventFailedBinding, fmt.Sprintf("volume %q not found", pvc.Spec.VolumeName))
		return c.setClaimPhase(ctx, pvc, v1.ClaimPending)
	}
	if err != nil {
		return err
	}
	if ref := pv.Spec.ClaimRef; ref != nil && !refersTo(ref, pvc) {
		c.recorder.Event(pvc, v1.EventTypeWarning, EventFailedBinding, fmt.Sprintf("volume %q already bound to a different claim.", pv.Name))
		return c.setClaimPhase(ctx, pvc, v1.ClaimPending)
	}
	if why := mismatch(pv, pvc); why != "" {
		c.recorder.Event(pvc, v1.EventTypeWarning, EventVolumeMismatch, fmt.Sprintf("Cannot bind to requested volume %q: %s", pv.Name, why))
		return c.setClaimPhase(ctx, pvc, v1.ClaimPending)
	}
	c.bindMu.Lock()
	defer c.bindMu.Unlock()
	return c.bind(ctx, pv, pvc)
}

func (c *Controller) syncBoundClaim(ctx context.Context, pvc *v1.PersistentVolumeClaim) error {
	if pvc.Spec.VolumeName == "" {
		c.recorder.Event(pvc, v1.EventTypeWarning, EventClaimLost, "Bound claim has lost reference to PersistentVolume. Data on the volume is lost!")
		return c.setClaimPhase(ctx, pvc, v1.ClaimLost)
	}
	pv, err := c.volumes.Get(pvc.Spec.VolumeName)
	if apierrors.IsNotFound(err) {
		c.recorder.Event(pvc, v1.EventTypeWarning, EventClaimLost, "Bound claim has lost its PersistentVolume. Data on the volume is lost!")
		return c.setClaimPhase(ctx, pvc, v1.ClaimLost)
	}
	if err != nil {
		return err
	}
	switch {
	case pv.Spec.ClaimRef == nil:
		// The volume lost its claimRef (an admin, or a half-done bind): finish it again.
		c.bindMu.Lock()
		defer c.bindMu.Unlock()
		return c.bind(ctx, pv, pvc)
	case pv.Spec.ClaimRef.UID == pvc.UID:
		c.bindMu.Lock()
		defer c.bindMu.Unlock()
		return c.bind(ctx, pv, pvc)
	default:
		c.recorder.Event(pvc, v1.EventTypeWarning, EventClaimMisbound, "Two claims are bound to the same volume, this one is bound incorrectly")
		return c.setClaimPhase(ctx, pvc, v1.ClaimLost)
	}
}

// refersTo: ref names this claim (a claimRef without UID is a pre-binding by name).
func refersTo(ref *v1.ObjectReference, pvc *v1.PersistentVolumeClaim) bool {
	return ref.Namespace == pvc.Namespace && ref.Name == pvc.Name && (ref.UID == "" || ref.UID == pvc.UID)
}

// findBestMatch is the smallest available volume that satisfies the claim, preferring
// one pre-bound to it. Claims of delayed binding only take pre-bound volumes: the
// scheduler chooses among the others, since only it knows the node.
func (c *Controller) findBestMatch(pvc *v1.PersistentVolumeClaim, delayed bool) (*v1.PersistentVolume, error) {
	pvs, err := c.volumes.List(everything)
	if err != nil {
		return nil, err
	}
	sort.Slice(pvs, func(i, j int) bool {
		a, b := pvs[i].Spec.Capacity[v1.ResourceStorage], pvs[j].Spec.Capacity[v1.ResourceStorage]
		if cmp := a.Cmp(b); cmp != 0 {
			return cmp < 0
		}
		return pvs[i].Name < pvs[j].Name
	})
	var best *v1.PersistentVolume
	for _, pv := range pvs {
		if pv.DeletionTimestamp != nil || mismatch(pv, pvc) != "" {
			continue
		}
		if ref := pv.Spec.ClaimRef; ref != nil {
			if refersTo(ref, pvc) {
				return pv, nil
			}
			continue
		}
		if pv.Status.Phase != "" && pv.Status.Phase != v1.VolumeAvailable && pv.Status.Phase != v1.VolumePending {
			continue
		}
		if !delayed && best == nil {
			best = pv
		}
	}
	return best, nil
}

// mismatch says why pv cannot serve pvc, in upstream's words, or "".
func mismatch(pv *v1.PersistentVolume, pvc *v1.PersistentVolumeClaim) string {
	if pv.Spec.StorageClassName != className(pvc) {
		return "storageClassName does not match"
	}
	pvMode, pvcMode := v1.PersistentVolumeFilesystem, v1.PersistentVolumeFilesystem
	if pv.Spec.VolumeMode != nil {
		pvMode = *pv.Spec.VolumeMode
	}
	if pvc.Spec.VolumeMode != nil {
		pvcMode = *pvc.Spec.VolumeMode
	}
	if pvMode != pvcMode {
		return "incompatible volumeMode"
	}
	want := pvc.Spec.Resources.Requests[v1.ResourceStorage]
	have := pv.Spec.Capacity[v1.ResourceStorage]
	if have.Cmp(want) < 0 {
		return "requested PV is too small"
	}
	for _, m := range pvc.Spec.AccessModes {
		ok := false
		for _, h := range pv.Spec.AccessModes {
			ok = ok || h == m
		}
		if !ok {
			return "incompatible accessMode"
		}
	}
	if pvc.Spec.Selector != nil {
		sel, err := metav1.LabelSelectorAsSelector(pvc.Spec.Selector)
		if err != nil || !sel.Matches(labels.Set(pv.Labels)) {
			return "volume labels do not match the claim's selector"
		}
	}
	return ""
}

// bind writes the four steps of a binding, each only if not done yet: the volume's
// claimRef, the volume's phase, the claim's volumeName and annotations, the claim's
// status. Each write is idempotent, so an interrupted bind finishes on the next sync.
func (c *Controller) bind(ctx context.Context, pv *v1.PersistentVolume, pvc *v1.PersistentVolumeClaim) error {
	if ref := pv.Spec.ClaimRef; ref == nil || ref.UID != pvc.UID || ref.Name != pvc.Name || ref.Namespace != pvc.Namespace {
		vol := pv.DeepCopy()
		if ref == nil {
			setAnn(&vol.ObjectMeta, AnnBoundByController, "yes")
		}
		vol.Spec.ClaimRef = &v1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1",
			Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID, ResourceVersion: pvc.ResourceVersion}
		updated, err := c.client.CoreV1().PersistentVolumes().Update(ctx, vol, metav1.UpdateOptions{})
		if err != nil {
			return err
		}
		pv = updated
	}
	if pv.Status.Phase != v1.VolumeBound {
		vol := pv.DeepCopy()
		vol.Status.Phase, vol.Status.Message, vol.Status.Reason = v1.VolumeBound, "", ""
		now := metav1.Now()
		vol.Status.LastPhaseTransitionTime = &now
		if _, err := c.client.CoreV1().PersistentVolumes().UpdateStatus(ctx, vol, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	if pvc.Spec.VolumeName != pv.Name || pvc.Annotations[AnnBindCompleted] != "yes" {
		claim := pvc.DeepCopy()
		if claim.Spec.VolumeName == "" {
			setAnn(&claim.ObjectMeta, AnnBoundByController, "yes")
		}
		claim.Spec.VolumeName = pv.Name
		setAnn(&claim.ObjectMeta, AnnBindCompleted, "yes")
		updated, err := c.client.CoreV1().PersistentVolumeClaims(claim.Namespace).Update(ctx, claim, metav1.UpdateOptions{})
		if err != nil {
			return err
		}
		pvc = updated
	}
	// Capacity and access modes are the volume's when the claim becomes Bound; later
	// changes of capacity are the resize flow's to report.
	capacity := pv.Spec.Capacity[v1.ResourceStorage]
	if pvc.Status.Phase != v1.ClaimBound {
		claim := pvc.DeepCopy()
		claim.Status.Phase = v1.ClaimBound
		claim.Status.AccessModes = pv.Spec.AccessModes
		claim.Status.Capacity = v1.ResourceList{v1.ResourceStorage: capacity}
		if _, err := c.client.CoreV1().PersistentVolumeClaims(claim.Namespace).UpdateStatus(ctx, claim, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	return nil
}

func setAnn(meta *metav1.ObjectMeta, k, v string) {
	if meta.Annotations == nil {
		meta.Annotations = map[string]string{}
	}
	meta.Annotations[k] = v
}

func (c *Controller) setClaimPhase(ctx context.Context, pvc *v1.PersistentVolumeClaim, phase v1.PersistentVolumeClaimPhase) error {
	if pvc.Status.Phase == phase {
		return nil
	}
	claim := pvc.DeepCopy()
	claim.Status.Phase = phase
	if phase == v1.ClaimLost {
		claim.Status.Capacity, claim.Status.AccessModes = nil, nil
	}
	_, err := c.client.CoreV1().PersistentVolumeClaims(claim.Namespace).UpdateStatus(ctx, claim, metav1.UpdateOptions{})
	return err
}

func (c *Controller) setVolumePhase(ctx context.Context, pv *v1.PersistentVolume, phase v1.PersistentVolumePhase, message string) (*v1.PersistentVolume, error) {
	if pv.Status.Phase == phase && pv.Status.Message == message {
		return pv, nil
	}
	vol := pv.DeepCopy()
	if vol.Status.Phase != phase {
		now := metav1.Now()
		vol.Status.LastPhaseTransitionTime = &now
	}
	vol.Status.Phase, vol.Status.Message = phase, message
	return c.client.CoreV1().PersistentVolumes().UpdateStatus(ctx, vol, metav1.UpdateOptions{})
}

// syncVolume keeps a volume's phase true to its claim and reclaims it once released.
func (c *Controller) syncVolume(ctx context.Context, pv *v1.PersistentVolume) error {
	ref := pv.Spec.ClaimRef
	if ref == nil {
		_, err := c.setVolumePhase(ctx, pv, v1.VolumeAvailable, "")
		return err
	}
	pvc, err := c.claimFor(ctx, ref)
	if err != nil {
		return err
	}
	if ref.UID == "" {
		// Pre-bound by name, waiting for its claim (or for the claim sync to finish).
		if pvc != nil && pvc.Spec.VolumeName == pv.Name {
			_, err := c.setVolumePhase(ctx, pv, v1.VolumeBound, "")
			return err
		}
		_, err := c.setVolumePhase(ctx, pv, v1.VolumeAvailable, "")
		return err
	}
	if pvc != nil && pvc.UID != ref.UID {
		pvc = nil // the claim was deleted and a new one took its name
	}
	if pvc == nil {
		if pv.Status.Phase != v1.VolumeReleased && pv.Status.Phase != v1.VolumeFailed {
			updated, err := c.setVolumePhase(ctx, pv, v1.VolumeReleased, "")
			if err != nil {
				return err
			}
			pv = updated
		}
		return c.reclaim(ctx, pv)
	}
	switch pvc.Spec.VolumeName {
	case pv.Name:
		_, err := c.setVolumePhase(ctx, pv, v1.VolumeBound, "")
		return err
	case "":
		// The claim's half of the bind is not written yet; the claim sync finishes it.
		if pv.Annotations[AnnBoundByController] != "" {
			c.claimQueue.Add(pvc.Namespace + "/" + pvc.Name)
		}
		return nil
	default:
		// The claim went to another volume: give this one back if we bound it.
		if pv.Annotations[AnnBoundByController] == "" {
			return nil
		}
		vol := pv.DeepCopy()
		vol.Spec.ClaimRef = nil
		delete(vol.Annotations, AnnBoundByController)
		updated, err := c.client.CoreV1().PersistentVolumes().Update(ctx, vol, metav1.UpdateOptions{})
		if err != nil {
			return err
		}
		_, err = c.setVolumePhase(ctx, updated, v1.VolumeAvailable, "")
		return err
	}
}

// claimFor is the claim ref names, confirmed with a live read when the cache has none
// (a released volume is a decision not to take on a stale cache).
func (c *Controller) claimFor(ctx context.Context, ref *v1.ObjectReference) (*v1.PersistentVolumeClaim, error) {
	pvc, err := c.claims.PersistentVolumeClaims(ref.Namespace).Get(ref.Name)
	if err == nil {
		return pvc, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, err
	}
	pvc, err = c.client.CoreV1().PersistentVolumeClaims(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return pvc, err
}

// reclaim applies a released volume's policy. Retain keeps it Released for an admin;
// Delete of a provisioned volume is its provisioner's job (it watches for Released);
// the binder itself can delete nothing and recycle nothing, as upstream without
// in-tree deleters, and says so on the volume.
func (c *Controller) reclaim(ctx context.Context, pv *v1.PersistentVolume) error {
	switch pv.Spec.PersistentVolumeReclaimPolicy {
	case v1.PersistentVolumeReclaimRetain, "":
		return nil
	case v1.PersistentVolumeReclaimDelete:
		if pv.Annotations[AnnDynamicallyProvision] != "" {
			return nil
		}
		if pv.Status.Phase == v1.VolumeFailed {
			return nil
		}
		msg := fmt.Sprintf("error getting deleter volume plugin for volume %q: no deletable volume plugin matched", pv.Name)
		c.recorder.Event(pv, v1.EventTypeWarning, EventVolumeFailedDelete, msg)
		_, err := c.setVolumePhase(ctx, pv, v1.VolumeFailed, msg)
		return err
	case v1.PersistentVolumeReclaimRecycle:
		if pv.Status.Phase == v1.VolumeFailed {
			return nil
		}
		msg := fmt.Sprintf("No recycler plugin found for the volume %q", pv.Name)
		c.recorder.Event(pv, v1.EventTypeWarning, EventVolumeFailedRecycle, msg)
		_, err := c.setVolumePhase(ctx, pv, v1.VolumeFailed, msg)
		return err
	}
	return nil
}
