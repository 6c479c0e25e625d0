// Package csi is the kubelet's side of CSI: it watches the plugin registration directory
// (RootDir/plugins_registry, where a driver's node-driver-registrar puts its socket, as
// upstream's kubelet serves it), registers CSIPlugin drivers through the registration
// API, records each driver's node ID and topology keys in the node's CSINode object
// (and the csi.volume.kubernetes.io/nodeid annotation), and publishes CSI volumes for
// pods through the driver's Node service: NodeStageVolume once per node when the driver
// asks for staging, then NodePublishVolume per pod. The controller side (provisioning,
// attaching) is the driver's own sidecars', as upstream.
package csi

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// NodeIDAnnotation maps driver names to this node's IDs, as upstream's kubelet keeps it.
const NodeIDAnnotation = "csi.volume.kubernetes.io/nodeid"

// supportedVersions are the CSI versions this kubelet speaks.
var supportedVersions = []string{"1.0.0", "1.5.0", "1.9.0", "1.10.0", "1.11.0", "1.12.0"}

// Options configure a Manager.
type Options struct {
	Client   kubernetes.Interface
	NodeName string
	// RootDir is the kubelet's state directory; registration sockets are looked for in
	// RootDir/plugins_registry, staging paths live under RootDir/plugins/kubernetes.io/csi.
	RootDir string
	// Period between scans of the registration directory; one second if zero.
	Period time.Duration
	Logger *slog.Logger
}

type driver struct {
	name     string
	endpoint string
	conn     *grpc.ClientConn
	stage    bool
	// mountGroup: the driver applies a pod's fsGroup itself (VOLUME_MOUNT_GROUP).
	mountGroup bool
}

// Manager registers drivers and publishes their volumes.
type Manager struct {
	opts    Options
	mu      sync.Mutex
	drivers map[string]*driver // by name
	sockets map[string]string  // registration socket -> driver name
	failed  map[string]bool    // sockets that failed, retried next scan
}

// NewManager builds a Manager; Run starts its registration loop.
func NewManager(opts Options) *Manager {
	if opts.Period == 0 {
		opts.Period = time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Manager{opts: opts, drivers: map[string]*driver{}, sockets: map[string]string{}, failed: map[string]bool{}}
}

// Prepare creates the registration directory drivers put their sockets in.
func (m *Manager) Prepare() error { return os.MkdirAll(m.RegistryDir(), 0o750) }

// RegistryDir is where drivers put their registration sockets.
func (m *Manager) RegistryDir() string { return filepath.Join(m.opts.RootDir, "plugins_registry") }

// Run scans the registration directory until ctx ends. The caller creates the
// directory first (Prepare), so that nothing is created under RootDir after the caller
// has stopped.
func (m *Manager) Run(ctx context.Context) {
	t := time.NewTicker(m.opts.Period)
	defer t.Stop()
	for {
		m.Scan(ctx)
		select {
		case <-ctx.Done():
			m.mu.Lock()
			for _, d := range m.drivers {
				_ = d.conn.Close()
			}
			m.mu.Unlock()
			return
		case <-t.C:
		}
	}
}

// Scan registers new sockets and deregisters drivers whose socket went away.
func (m *Manager) Scan(ctx context.Context) {
	entries, _ := os.ReadDir(m.RegistryDir())
	present := map[string]bool{}
	for _, e := range entries {
		if e.Type()&os.ModeSocket == 0 {
			continue
		}
		path := filepath.Join(m.RegistryDir(), e.Name())
		present[path] = true
		m.mu.Lock()
		_, known := m.sockets[path]
		m.mu.Unlock()
		if known {
			continue
		}
		if err := m.register(ctx, path); err != nil {
			m.mu.Lock()
			first := !m.failed[path]
			m.failed[path] = true
			m.mu.Unlock()
			if first {
				m.opts.Logger.Warn("csi: plugin registration failed; will retry", "socket", path, "err", err)
			}
		}
	}
	m.mu.Lock()
	var gone []string
	for path, name := range m.sockets {
		if !present[path] {
			gone = append(gone, name)
			delete(m.sockets, path)
		}
	}
	m.mu.Unlock()
	for _, name := range gone {
		m.deregister(ctx, name)
	}
}

func dial(endpoint string) (*grpc.ClientConn, error) {
	endpoint = strings.TrimPrefix(endpoint, "unix://")
	return grpc.NewClient("unix://"+endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
}

// register runs the registration handshake with the socket's plugin, then asks the
// driver who this node is and records it.
func (m *Manager) register(ctx context.Context, socket string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := dial(socket)
	if err != nil {
		return err
	}
	defer conn.Close()
	reg := registerapi.NewRegistrationClient(conn)
	info, err := reg.GetInfo(ctx, &registerapi.InfoRequest{})
	if err != nil {
		return fmt.Errorf("GetInfo: %w", err)
	}
	regErr := m.validateAndAdd(ctx, socket, info)
	status := &registerapi.RegistrationStatus{PluginRegistered: regErr == nil}
	if regErr != nil {
		status.Error = regErr.Error()
	}
	if _, err := reg.NotifyRegistrationStatus(ctx, status); err != nil && regErr == nil {
		m.opts.Logger.Warn("csi: NotifyRegistrationStatus failed", "driver", info.Name, "err", err)
	}
	return regErr
}

func (m *Manager) validateAndAdd(ctx context.Context, socket string, info *registerapi.PluginInfo) error {
	if info.Type != registerapi.CSIPlugin {
		return fmt.Errorf("plugin type %q is not supported by this kubelet", info.Type)
	}
	if info.Name == "" {
		return errors.New("plugin has no name")
	}
	ok := false
	for _, v := range info.SupportedVersions {
		for _, s := range supportedVersions {
			ok = ok || strings.TrimPrefix(v, "v") == s || strings.HasPrefix(strings.TrimPrefix(v, "v"), "1.")
		}
	}
	if !ok {
		return fmt.Errorf("none of the versions specified %q are supported", info.SupportedVersions)
	}
	endpoint := info.Endpoint
	if endpoint == "" {
		endpoint = socket
	}
	conn, err := dial(endpoint)
	if err != nil {
		return err
	}
	node := csipb.NewNodeClient(conn)
	nodeInfo, err := node.NodeGetInfo(ctx, &csipb.NodeGetInfoRequest{})
	if err != nil {
		_ = conn.Close()
		return fmt.Errorf("NodeGetInfo: %w", err)
	}
	caps, err := node.NodeGetCapabilities(ctx, &csipb.NodeGetCapabilitiesRequest{})
	if err != nil {
		_ = conn.Close()
		return fmt.Errorf("NodeGetCapabilities: %w", err)
	}
	d := &driver{name: info.Name, endpoint: endpoint, conn: conn}
	for _, c := range caps.GetCapabilities() {
		switch c.GetRpc().GetType() {
		case csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME:
			d.stage = true
		case csipb.NodeServiceCapability_RPC_VOLUME_MOUNT_GROUP:
			d.mountGroup = true
		}
	}
	if err := m.recordNode(ctx, info.Name, nodeInfo); err != nil {
		_ = conn.Close()
		return err
	}
	m.mu.Lock()
	if old := m.drivers[info.Name]; old != nil {
		_ = old.conn.Close()
	}
	m.drivers[info.Name] = d
	m.sockets[socket] = info.Name
	delete(m.failed, socket)
	m.mu.Unlock()
	m.opts.Logger.Info("csi: registered driver", "driver", info.Name, "endpoint", endpoint, "nodeID", nodeInfo.NodeId)
	return nil
}

// recordNode puts the driver's node ID and topology keys in the CSINode object (made
// if missing, owned by the Node) and in the node's nodeid annotation.
func (m *Manager) recordNode(ctx context.Context, name string, info *csipb.NodeGetInfoResponse) error {
	var keys []string
	for k := range info.GetAccessibleTopology().GetSegments() {
		keys = append(keys, k)
	}
	entry := storagev1.CSINodeDriver{Name: name, NodeID: info.NodeId, TopologyKeys: keys}
	if n := info.MaxVolumesPerNode; n > 0 {
		count := int32(n)
		entry.Allocatable = &storagev1.VolumeNodeResources{Count: &count}
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := m.opts.Client.CoreV1().Nodes().Get(ctx, m.opts.NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		ids := map[string]string{}
		_ = json.Unmarshal([]byte(node.Annotations[NodeIDAnnotation]), &ids)
		if ids[name] != info.NodeId {
			ids[name] = info.NodeId
			b, _ := json.Marshal(ids)
			if node.Annotations == nil {
				node.Annotations = map[string]string{}
			}
			node.Annotations[NodeIDAnnotation] = string(b)
			if _, err := m.opts.Client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
				return err
			}
		}
		return m.updateCSINode(ctx, node, func(drivers []storagev1.CSINodeDriver) []storagev1.CSINodeDriver {
			out := []storagev1.CSINodeDriver{entry}
			for _, d := range drivers {
				if d.Name != name {
					out = append(out, d)
				}
			}
			return out
		})
	})
}

func (m *Manager) updateCSINode(ctx context.Context, node *v1.Node, change func([]storagev1.CSINodeDriver) []storagev1.CSINodeDriver) error {
	csiNodes := m.opts.Client.StorageV1().CSINodes()
	existing, err := csiNodes.Get(ctx, m.opts.NodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		obj := &storagev1.CSINode{
			ObjectMeta: metav1.ObjectMeta{Name: m.opts.NodeName, OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}}},
			Spec: storagev1.CSINodeSpec{Drivers: change(nil)},
		}
		_, err = csiNodes.Create(ctx, obj, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	existing.Spec.Drivers = change(existing.Spec.Drivers)
	_, err = csiNodes.Update(ctx, existing, metav1.UpdateOptions{})
	return err
}

// deregister forgets a driver whose socket went away and removes it from the CSINode.
func (m *Manager) deregister(ctx context.Context, name string) {
	m.mu.Lock()
	if d := m.drivers[name]; d != nil {
		_ = d.conn.Close()
	}
	delete(m.drivers, name)
	m.mu.Unlock()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := m.opts.Client.CoreV1().Nodes().Get(ctx, m.opts.NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		return m.updateCSINode(ctx, node, func(drivers []storagev1.CSINodeDriver) []storagev1.CSINodeDriver {
			var out []storagev1.CSINodeDriver
			for _, d := range drivers {
				if d.Name != name {
					out = append(out, d)
				}
			}
			return out
		})
	})
	if err != nil {
		m.opts.Logger.Warn("csi: removing a driver from the CSINode failed", "driver", name, "err", err)
	}
	m.opts.Logger.Info("csi: driver deregistered", "driver", name)
}

func (m *Manager) driver(name string) (*driver, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if d := m.drivers[name]; d != nil {
		return d, nil
	}
	return nil, fmt.Errorf("driver name %s not found in the list of registered CSI drivers", name)
}

// stagingPath is the node-wide staging directory of a volume, as upstream lays it out:
// by the handle's hash for a filesystem volume, by the volume's name for a block one.
func (m *Manager) stagingPath(driverName, handle, blockVolume string) string {
	if blockVolume != "" {
		return filepath.Join(m.opts.RootDir, "plugins", "kubernetes.io", "csi", "volumeDevices", "staging", blockVolume)
	}
	sum := sha256.Sum256([]byte(handle))
	return filepath.Join(m.opts.RootDir, "plugins", "kubernetes.io", "csi", driverName, fmt.Sprintf("%x", sum), "globalmount")
}

// IsBlock says whether a volume is consumed as a raw block device.
func IsBlock(pv *v1.PersistentVolume) bool {
	return pv.Spec.VolumeMode != nil && *pv.Spec.VolumeMode == v1.PersistentVolumeBlock
}

// capability is the volume's CSI capability; mountGroup, when not empty, asks the
// driver to make the volume usable by that group (VOLUME_MOUNT_GROUP).
func capability(pv *v1.PersistentVolume, mountGroup string) *csipb.VolumeCapability {
	mode := csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER
	for _, m := range pv.Spec.AccessModes {
		switch m {
		case v1.ReadWriteMany:
			mode = csipb.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER
		case v1.ReadOnlyMany:
			mode = csipb.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY
		case v1.ReadWriteOncePod:
			mode = csipb.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER
		}
	}
	c := &csipb.VolumeCapability{AccessMode: &csipb.VolumeCapability_AccessMode{Mode: mode}}
	if IsBlock(pv) {
		c.AccessType = &csipb.VolumeCapability_Block{Block: &csipb.VolumeCapability_BlockVolume{}}
	} else {
		c.AccessType = &csipb.VolumeCapability_Mount{Mount: &csipb.VolumeCapability_MountVolume{
			FsType: pv.Spec.CSI.FSType, MountFlags: pv.Spec.MountOptions, VolumeMountGroup: mountGroup}}
	}
	return c
}

// fsGroupPolicy is the driver's CSIDriver fsGroupPolicy; a driver without a CSIDriver
// object, or one that leaves the field out, gets the API's default,
// ReadWriteOnceWithFSType, as upstream's kubelet reads it.
func (m *Manager) fsGroupPolicy(ctx context.Context, driverName string) (storagev1.FSGroupPolicy, error) {
	d, err := m.opts.Client.StorageV1().CSIDrivers().Get(ctx, driverName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy, nil
	}
	if err != nil {
		return "", fmt.Errorf("failed to get CSIDriver %s: %w", driverName, err)
	}
	if d.Spec.FSGroupPolicy == nil {
		return storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy, nil
	}
	return *d.Spec.FSGroupPolicy, nil
}

// SupportsFSGroup is upstream's rule for whether a pod's fsGroup applies to a CSI
// volume: never when the pod has none, the policy is None or the volume is read-only;
// always under File; under ReadWriteOnceWithFSType only for a volume with an fsType
// whose access modes include ReadWriteOnce (or ReadWriteOncePod).
func SupportsFSGroup(policy storagev1.FSGroupPolicy, fsType string, modes []v1.PersistentVolumeAccessMode, hasFSGroup, readOnly bool) bool {
	if !hasFSGroup || policy == storagev1.NoneFSGroupPolicy || readOnly {
		return false
	}
	if policy == storagev1.FileFSGroupPolicy {
		return true
	}
	if fsType == "" {
		return false
	}
	for _, m := range modes {
		if m == v1.ReadWriteOnce || m == v1.ReadWriteOncePod {
			return true
		}
	}
	return false
}

// Publish makes a CSI volume available at target for one pod: staged once per node if
// the driver stages, then published. A block volume's target is a file the driver maps
// the device to. A driver with VOLUME_MOUNT_GROUP is handed the pod's fsGroup and
// applies it itself, as upstream delegates it; otherwise ownFSGroup says whether the
// kubelet must give the published volume to the pod's fsGroup.
func (m *Manager) Publish(ctx context.Context, pod *v1.Pod, pv *v1.PersistentVolume, target string, readOnly bool) (ownFSGroup bool, err error) {
	src := pv.Spec.CSI
	d, err := m.driver(src.Driver)
	if err != nil {
		return false, err
	}
	readOnly = readOnly || src.ReadOnly
	block := IsBlock(pv)
	var own bool
	mountGroup := ""
	if gid := podFSGroup(pod); gid != nil && !block {
		if d.mountGroup {
			mountGroup = fmt.Sprint(*gid)
		} else {
			policy, err := m.fsGroupPolicy(ctx, src.Driver)
			if err != nil {
				return false, err
			}
			own = SupportsFSGroup(policy, src.FSType, pv.Spec.AccessModes, true, readOnly)
		}
	}
	node := csipb.NewNodeClient(d.conn)
	staging := ""
	blockName := ""
	if block {
		blockName = pv.Name
	}
	if d.stage {
		staging = m.stagingPath(src.Driver, src.VolumeHandle, blockName)
		if err := os.MkdirAll(staging, 0o750); err != nil {
			return false, err
		}
		if _, err := node.NodeStageVolume(ctx, &csipb.NodeStageVolumeRequest{
			VolumeId: src.VolumeHandle, StagingTargetPath: staging, VolumeCapability: capability(pv, mountGroup),
			VolumeContext: src.VolumeAttributes,
		}); err != nil {
			return false, fmt.Errorf("MountVolume.MountDevice failed for volume %q : rpc error: %w", pv.Name, err)
		}
	}
	if err := os.MkdirAll(filepath.Dir(target), 0o750); err != nil {
		return false, err
	}
	vctx := map[string]string{}
	for k, v := range src.VolumeAttributes {
		vctx[k] = v
	}
	// What upstream passes when the CSIDriver asks for pod info; harmless otherwise.
	vctx["csi.storage.k8s.io/pod.name"] = pod.Name
	vctx["csi.storage.k8s.io/pod.namespace"] = pod.Namespace
	vctx["csi.storage.k8s.io/pod.uid"] = string(pod.UID)
	vctx["csi.storage.k8s.io/serviceAccount.name"] = pod.Spec.ServiceAccountName
	if _, err := node.NodePublishVolume(ctx, &csipb.NodePublishVolumeRequest{
		VolumeId: src.VolumeHandle, StagingTargetPath: staging, TargetPath: target, VolumeCapability: capability(pv, mountGroup),
		Readonly: readOnly, VolumeContext: vctx,
	}); err != nil {
		return false, fmt.Errorf("rpc error: NodePublishVolume: %w", err)
	}
	return own, nil
}

func podFSGroup(pod *v1.Pod) *int64 {
	if sc := pod.Spec.SecurityContext; sc != nil {
		return sc.FSGroup
	}
	return nil
}

// Unpublish removes a pod's publication of a volume; a driver gone away cannot be
// asked, and the error says so.
func (m *Manager) Unpublish(ctx context.Context, driverName, handle, target string) error {
	d, err := m.driver(driverName)
	if err != nil {
		return err
	}
	_, err = csipb.NewNodeClient(d.conn).NodeUnpublishVolume(ctx, &csipb.NodeUnpublishVolumeRequest{VolumeId: handle, TargetPath: target})
	return err
}

// Unstage undoes NodeStageVolume once the node's last pod using the volume is gone.
// blockVolume names the volume if it is a block one ("" for a filesystem).
func (m *Manager) Unstage(ctx context.Context, driverName, handle, blockVolume string) error {
	d, err := m.driver(driverName)
	if err != nil {
		return err
	}
	if !d.stage {
		return nil
	}
	staging := m.stagingPath(driverName, handle, blockVolume)
	if _, err := csipb.NewNodeClient(d.conn).NodeUnstageVolume(ctx, &csipb.NodeUnstageVolumeRequest{VolumeId: handle, StagingTargetPath: staging}); err != nil {
		return err
	}
	if blockVolume != "" {
		return os.RemoveAll(staging)
	}
	return os.RemoveAll(filepath.Dir(staging))
}
