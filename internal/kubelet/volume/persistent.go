package volume

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

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
// volumes are directories of the node itself; a CSI volume is published by its driver
// into the pod's volume directory.
func (m *Manager) persistentMounted(pod *v1.Pod, volName string, pv *v1.PersistentVolume, readOnly bool) (Mounted, error) {
	switch {
	case pv.Spec.CSI != nil:
		return Mounted{Path: filepath.Join(m.volumeDir(pod.UID, kindCSI, volName), "mount"), ReadOnly: readOnly, Writable: !readOnly}, nil
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
	if isBlock(pv) {
		mv, err := m.setUpBlock(ctx, pod, vol.Name, pv, readOnly)
		if err != nil {
			return Mounted{}, err
		}
		mv.Claim = claim
		return mv, nil
	}
	mv, err := m.persistentMounted(pod, vol.Name, pv, readOnly)
	if err != nil {
		return Mounted{}, err
	}
	if pv.Spec.CSI != nil {
		if err := m.setUpCSI(ctx, pod, vol.Name, pv, mv.Path, readOnly); err != nil {
			return Mounted{}, err
		}
	} else if err := m.setUpPersistent(pod, vol.Name, pv, mv.Path); err != nil {
		return Mounted{}, err
	}
	mv.Claim = claim
	return mv, nil
}

// CSI publishes and unpublishes CSI volumes (internal/kubelet/csi).
type CSI interface {
	// Publish stages (once per node) and publishes the volume at target: a directory,
	// or for a block volume a file the driver maps the device to. ownFSGroup says the
	// kubelet must give the published volume to the pod's fsGroup (the CSIDriver's
	// fsGroupPolicy asks for it and the driver does not apply it itself).
	Publish(ctx context.Context, pod *v1.Pod, pv *v1.PersistentVolume, target string, readOnly bool) (ownFSGroup bool, err error)
	Unpublish(ctx context.Context, driver, volumeHandle, target string) error
	// Unstage undoes the node-wide staging once no pod on the node uses the volume;
	// blockVolume names the volume when it is a block one, "" otherwise.
	Unstage(ctx context.Context, driver, volumeHandle, blockVolume string) error
}

const kindCSI = "kubernetes.io~csi"

// csiVolumeData is what teardown needs to unpublish a CSI volume, kept beside its
// mount as upstream's vol_data.json.
type csiVolumeData struct {
	DriverName   string `json:"driverName"`
	VolumeHandle string `json:"volumeHandle"`
	// BlockVolume names a block volume (its staging is by name); TargetPath is where a
	// block volume was published. Both empty for filesystem volumes.
	BlockVolume string `json:"blockVolume,omitempty"`
	TargetPath  string `json:"targetPath,omitempty"`
}

// setUpCSI publishes the volume once per pod; vol_data.json, written after a successful
// publish, says it was. When the driver leaves the pod's fsGroup to the kubelet, the
// published tree is given to it as upstream's kubelet does (honouring
// fsGroupChangePolicy), before the pod's containers see it.
func (m *Manager) setUpCSI(ctx context.Context, pod *v1.Pod, volName string, pv *v1.PersistentVolume, target string, readOnly bool) error {
	if m.opts.CSI == nil {
		return errors.New("CSI volumes are not supported by this kubelet")
	}
	dataFile := filepath.Join(filepath.Dir(target), "vol_data.json")
	if _, err := os.Stat(dataFile); err == nil {
		return nil
	}
	own, err := m.opts.CSI.Publish(ctx, pod, pv, target, readOnly)
	if err != nil {
		return err
	}
	if own {
		if err := m.ownVolume(pod, volName, target); err != nil {
			return err
		}
	}
	b, _ := json.Marshal(csiVolumeData{DriverName: pv.Spec.CSI.Driver, VolumeHandle: pv.Spec.CSI.VolumeHandle})
	return os.WriteFile(dataFile, b, 0o600)
}

// tearDownCSI unpublishes a pod's CSI volume whose vol_data.json is in dir (its volume
// directory, or its device directory for a block volume).
func (m *Manager) tearDownCSI(ctx context.Context, dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, "vol_data.json"))
	if os.IsNotExist(err) {
		return nil // never published
	}
	if err != nil {
		return err
	}
	var data csiVolumeData
	if err := json.Unmarshal(b, &data); err != nil {
		return err
	}
	if m.opts.CSI == nil {
		return errors.New("CSI volumes are not supported by this kubelet")
	}
	target := filepath.Join(dir, "mount")
	if data.TargetPath != "" {
		target = data.TargetPath
	}
	if err := m.opts.CSI.Unpublish(ctx, data.DriverName, data.VolumeHandle, target); err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(dir, "vol_data.json")); err != nil {
		return err
	}
	if m.csiVolumeInUse(data) {
		return nil
	}
	return m.opts.CSI.Unstage(ctx, data.DriverName, data.VolumeHandle, data.BlockVolume)
}

// csiVolumeInUse: another pod on the node still has the volume published.
func (m *Manager) csiVolumeInUse(data csiVolumeData) bool {
	files, _ := filepath.Glob(filepath.Join(m.opts.RootDir, "pods", "*", "volumes", kindCSI, "*", "vol_data.json"))
	devices, _ := filepath.Glob(filepath.Join(m.opts.RootDir, "pods", "*", "volumeDevices", kindCSI, "*", "vol_data.json"))
	for _, f := range append(files, devices...) {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		var other csiVolumeData
		if json.Unmarshal(b, &other) == nil && other.DriverName == data.DriverName && other.VolumeHandle == data.VolumeHandle {
			return true
		}
	}
	return false
}
