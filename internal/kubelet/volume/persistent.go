package volume

import (
	"context"
	"errors"
	"fmt"
	"os"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"mizzen/internal/localpath"
)

// claimName is the claim behind a pod volume, and whether it is the pod's ephemeral
// one (<pod>-<volume>), which must be owned by the pod.
func claimName(pod *v1.Pod, vol *v1.Volume) (name string, ephemeral, ok bool) {
	switch {
	case vol.PersistentVolumeClaim != nil:
		return vol.PersistentVolumeClaim.ClaimName, false, true
	case vol.Ephemeral != nil:
		return pod.Name + "-" + vol.Name, true, true
	}
	return "", false, false
}

// resolveClaim follows a claim-backed volume to its bound PersistentVolume, failing
// with upstream's words while the claim is missing, unbound or being deleted.
func (m *Manager) resolveClaim(ctx context.Context, pod *v1.Pod, name string, ephemeral bool) (*v1.PersistentVolume, error) {
	pvc, err := m.opts.Sources.PersistentVolumeClaim(ctx, pod.Namespace, name)
	if err != nil {
		return nil, fmt.Errorf("error processing PVC %s/%s: failed to fetch PVC from API server: %w", pod.Namespace, name, err)
	}
	if ephemeral && !metav1.IsControlledBy(pvc, pod) {
		return nil, fmt.Errorf("error processing PVC %s/%s: PVC was not created for the pod", pod.Namespace, name)
	}
	if pvc.DeletionTimestamp != nil {
		return nil, fmt.Errorf("error processing PVC %s/%s: can't start pod because PVC is being deleted", pod.Namespace, name)
	}
	if pvc.Status.Phase != v1.ClaimBound || pvc.Spec.VolumeName == "" {
		return nil, fmt.Errorf("error processing PVC %s/%s: PVC %s/%s has non-bound phase (%q) or empty pvc.Spec.VolumeName (%q)",
			pod.Namespace, name, pod.Namespace, name, pvc.Status.Phase, pvc.Spec.VolumeName)
	}
	pv, err := m.opts.Sources.PersistentVolume(ctx, pvc.Spec.VolumeName)
	if err != nil {
		return nil, fmt.Errorf("error processing PVC %s/%s: failed to fetch PV %s from API server: %w", pod.Namespace, name, pvc.Spec.VolumeName, err)
	}
	if ref := pv.Spec.ClaimRef; ref == nil || ref.UID != pvc.UID {
		return nil, fmt.Errorf("error processing PVC %s/%s: PV %s is not bound to it", pod.Namespace, name, pv.Name)
	}
	return pv, nil
}

// persistentMounted is where a bound volume lives on this node: hostPath and local
// volumes are directories of the node itself.
func persistentMounted(pv *v1.PersistentVolume, readOnly bool) (Mounted, error) {
	switch {
	case pv.Spec.HostPath != nil:
		return Mounted{Path: pv.Spec.HostPath.Path, ReadOnly: readOnly, Writable: !readOnly}, nil
	case pv.Spec.Local != nil:
		return Mounted{Path: pv.Spec.Local.Path, ReadOnly: readOnly, Writable: !readOnly}, nil
	}
	return Mounted{}, errors.New("volume type is not supported by this kubelet")
}

// setUpPersistent makes a bound volume's directory ready. A local-path directory is
// made on first use, open to every user as k3s's provisioner makes it, and its reclaim
// policy noted for the Sweeper; a local volume must exist and is given the pod's
// fsGroup, as upstream's local plugin does (a hostPath never is).
func (m *Manager) setUpPersistent(pod *v1.Pod, volName string, pv *v1.PersistentVolume, path string) error {
	switch {
	case pv.Spec.HostPath != nil && localpath.IsLocalPath(pv):
		if !isDir(path) {
			if err := os.MkdirAll(path, 0o777); err != nil {
				return err
			}
			if err := os.Chmod(path, 0o777); err != nil {
				return err
			}
		}
		if m.opts.LocalPathDir != "" {
			return localpath.Record(m.opts.LocalPathDir, pv.Name, pv.Spec.PersistentVolumeReclaimPolicy)
		}
		return nil
	case pv.Spec.HostPath != nil:
		return setUpHostPath(pv.Spec.HostPath)
	case pv.Spec.Local != nil:
		if !isDir(path) {
			return fmt.Errorf("path %q does not exist", path)
		}
		return m.ownVolume(pod, volName, path)
	}
	return nil
}

// setUpClaimVolume resolves and prepares a claim-backed volume. readOnly comes from the
// pod's persistentVolumeClaim source (an ephemeral volume's claim is always writable).
func (m *Manager) setUpClaimVolume(ctx context.Context, pod *v1.Pod, vol *v1.Volume, claim string, ephemeral bool) (Mounted, error) {
	pv, err := m.resolveClaim(ctx, pod, claim, ephemeral)
	if err != nil {
		return Mounted{}, err
	}
	readOnly := vol.PersistentVolumeClaim != nil && vol.PersistentVolumeClaim.ReadOnly
	mv, err := persistentMounted(pv, readOnly)
	if err != nil {
		return Mounted{}, err
	}
	if err := m.setUpPersistent(pod, vol.Name, pv, mv.Path); err != nil {
		return Mounted{}, err
	}
	mv.Claim = claim
	return mv, nil
}
