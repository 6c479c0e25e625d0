package volume

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Block volumes (volumeMode: Block) reach containers as devices, not mounts. Each pod
// gets a link to the device under RootDir/pods/<uid>/volumeDevices/<kind>/<volume>/
// device, which the runtime resolves when it creates the container's device node, as
// upstream's kubelet hands the runtime its pod device map path. A local volume's path
// is the device itself; a CSI volume is staged and published by its driver, which maps
// the device onto a file under RootDir/plugins/kubernetes.io/csi/volumeDevices/publish,
// as upstream lays it out.

const (
	kindLocalVolume = "kubernetes.io~local-volume"
	deviceLinkName  = "device"
)

func isBlock(pv *v1.PersistentVolume) bool {
	return pv.Spec.VolumeMode != nil && *pv.Spec.VolumeMode == v1.PersistentVolumeBlock
}

func (m *Manager) deviceDir(uid types.UID, kind, name string) string {
	return filepath.Join(m.PodDir(uid), "volumeDevices", kind, name)
}

// csiBlockTarget is the file the driver maps a block volume to for one pod.
func (m *Manager) csiBlockTarget(pvName string, uid types.UID) string {
	return filepath.Join(m.opts.RootDir, "plugins", "kubernetes.io", "csi", "volumeDevices", "publish", pvName, string(uid))
}

// setUpBlock makes a block volume's device available to the pod: the device of a local
// volume, which must be a block device; the driver's mapping of a CSI one.
func (m *Manager) setUpBlock(ctx context.Context, pod *v1.Pod, volName string, pv *v1.PersistentVolume, readOnly bool) (Mounted, error) {
	var kind, device string
	switch {
	case pv.Spec.Local != nil:
		kind, device = kindLocalVolume, pv.Spec.Local.Path
		if err := checkBlockDevice(device); err != nil {
			return Mounted{}, err
		}
	case pv.Spec.CSI != nil:
		kind, device = kindCSI, m.csiBlockTarget(pv.Name, pod.UID)
		if err := m.publishCSIBlock(ctx, pod, volName, pv, device, readOnly); err != nil {
			return Mounted{}, err
		}
	default:
		return Mounted{}, fmt.Errorf("volume %s has volumeMode Block, which its volume type does not support", pv.Name)
	}
	dir := m.deviceDir(pod.UID, kind, volName)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return Mounted{}, err
	}
	link := filepath.Join(dir, deviceLinkName)
	if cur, err := os.Readlink(link); err != nil || cur != device {
		_ = os.Remove(link)
		if err := os.Symlink(device, link); err != nil {
			return Mounted{}, err
		}
	}
	return Mounted{Path: link, ReadOnly: readOnly, Block: true}, nil
}

func checkBlockDevice(path string) error {
	info, err := os.Stat(path)
	if err != nil {
		return err
	}
	if info.Mode()&os.ModeDevice == 0 || info.Mode()&os.ModeCharDevice != 0 {
		return fmt.Errorf("%s is not a block device", path)
	}
	return nil
}

// publishCSIBlock publishes a CSI block volume once per pod; the device directory's
// vol_data.json, written after a successful publish, says it was and lets teardown
// unpublish it.
func (m *Manager) publishCSIBlock(ctx context.Context, pod *v1.Pod, volName string, pv *v1.PersistentVolume, target string, readOnly bool) error {
	if m.opts.CSI == nil {
		return errors.New("CSI volumes are not supported by this kubelet")
	}
	dir := m.deviceDir(pod.UID, kindCSI, volName)
	dataFile := filepath.Join(dir, "vol_data.json")
	if _, err := os.Stat(dataFile); err == nil {
		return nil
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	if _, err := m.opts.CSI.Publish(ctx, pod, pv, target, readOnly); err != nil {
		return err
	}
	b, _ := json.Marshal(csiVolumeData{DriverName: pv.Spec.CSI.Driver, VolumeHandle: pv.Spec.CSI.VolumeHandle,
		BlockVolume: pv.Name, TargetPath: target})
	return os.WriteFile(dataFile, b, 0o600)
}

// tearDownDevices unpublishes the pod's CSI block volumes and removes its device links.
func (m *Manager) tearDownDevices(ctx context.Context, uid types.UID) error {
	root := filepath.Join(m.PodDir(uid), "volumeDevices")
	names, err := os.ReadDir(filepath.Join(root, kindCSI))
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	for _, n := range names {
		dir := filepath.Join(root, kindCSI, n.Name())
		if err := m.tearDownCSI(ctx, dir); err != nil {
			return fmt.Errorf("UnmapVolume.TearDownDevice failed for volume %q : %w", n.Name(), err)
		}
	}
	return os.RemoveAll(root)
}

// ContainerDevices turns a container's volumeDevices into CRI devices over the block
// volumes SetUp returned, read-only ones readable only, as upstream's kubelet.
func ContainerDevices(c *v1.Container, vols map[string]Mounted) ([]*runtimeapi.Device, error) {
	var out []*runtimeapi.Device
	for _, d := range c.VolumeDevices {
		vol, ok := vols[d.Name]
		if !ok || !vol.Block {
			return nil, fmt.Errorf("could not find block volume %s", d.Name)
		}
		perm := "mrw"
		if vol.ReadOnly {
			perm = "r"
		}
		out = append(out, &runtimeapi.Device{ContainerPath: d.DevicePath, HostPath: vol.Path, Permissions: perm})
	}
	return out, nil
}
