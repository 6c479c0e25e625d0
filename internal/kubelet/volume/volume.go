// Package volume prepares a pod's volumes on the node before its containers start and
// removes them after its containers are gone: emptyDir (on disk or tmpfs), configMap,
// secret, downwardAPI and projected volumes (written atomically, following updates of
// their sources on every sync), hostPath with its type checks, and the service account
// tokens, ClusterTrustBundles and pod certificates of projected volumes, tokens and
// certificates refreshed before they expire. A pod's fsGroup owns its
// emptyDir and API-data volumes (hostPath never), as upstream's kubelet sets it. It
// also turns a container's volumeMounts into CRI mounts.
//
// Layout, as upstream's kubelet: RootDir/pods/<uid>/volumes/kubernetes.io~<kind>/<name>.
package volume

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// Sources is where volume content comes from: the API, and what only the kubelet knows.
type Sources interface {
	ConfigMap(ctx context.Context, namespace, name string) (*v1.ConfigMap, error)
	Secret(ctx context.Context, namespace, name string) (*v1.Secret, error)
	// ResourceValue resolves a downwardAPI resourceFieldRef of the pod.
	ResourceValue(pod *v1.Pod, ref *v1.ResourceFieldSelector) (string, error)
	// ServiceAccountToken requests a token for the pod's service account, bound to
	// the pod, and returns it with its expiry.
	ServiceAccountToken(ctx context.Context, pod *v1.Pod, audience string, expirationSeconds int64) (string, time.Time, error)
	// PersistentVolumeClaim and PersistentVolume read what claim-backed volumes name.
	PersistentVolumeClaim(ctx context.Context, namespace, name string) (*v1.PersistentVolumeClaim, error)
	PersistentVolume(ctx context.Context, name string) (*v1.PersistentVolume, error)
	// ClusterTrustBundle reads one ClusterTrustBundle; ClusterTrustBundles lists a
	// signer's, for clusterTrustBundle projections.
	ClusterTrustBundle(ctx context.Context, name string) (*certificatesv1.ClusterTrustBundle, error)
	ClusterTrustBundles(ctx context.Context, signerName string) ([]certificatesv1.ClusterTrustBundle, error)
	// CreatePodCertificateRequest files req for the pod, with the node's and the
	// pod's service account's names and UIDs filled in; PodCertificateRequest reads
	// one back, for podCertificate projections.
	CreatePodCertificateRequest(ctx context.Context, pod *v1.Pod, req *certificatesv1.PodCertificateRequest) (*certificatesv1.PodCertificateRequest, error)
	PodCertificateRequest(ctx context.Context, namespace, name string) (*certificatesv1.PodCertificateRequest, error)
}

// Options configure a Manager. RootDir and Sources are required.
type Options struct {
	RootDir string
	Sources Sources
	// Tmpfs puts memory-medium emptyDirs and secret, downwardAPI and projected volumes on
	// tmpfs mounts, as upstream does; without it they are plain directories (hollow
	// nodes, unprivileged tests).
	Tmpfs bool
	// LocalPathDir is the node's local-path storage directory (internal/localpath),
	// where the reclaim policies of the local-path volumes it mounts are noted.
	LocalPathDir string
	// CSI publishes CSI volumes; without it they cannot be set up.
	CSI    CSI
	Clock  clock.PassiveClock
	Logger *slog.Logger
}

// Manager sets up and tears down the volumes of the pods on one node.
type Manager struct {
	opts   Options
	tokens *tokenCache
	// podCerts are the keys and certificates of podCertificate projections.
	podCerts *podCertCache
	owned    ownedVolumes
	// writer writes API-data volumes, remembering what each holds.
	writer atomicWriter
	// ready is what SetUp last returned for each pod, for volume stats.
	readyMu sync.Mutex
	ready   map[types.UID]map[string]Mounted
}

// NewManager returns a manager for the volumes under opts.RootDir.
func NewManager(opts Options) *Manager {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Manager{opts: opts, tokens: newTokenCache(opts.Clock), podCerts: newPodCertCache(opts.Clock)}
}

// Plugin directory names, as upstream's volume plugins name them.
const (
	kindEmptyDir    = "kubernetes.io~empty-dir"
	kindConfigMap   = "kubernetes.io~configmap"
	kindSecret      = "kubernetes.io~secret"
	kindDownwardAPI = "kubernetes.io~downward-api"
	kindProjected   = "kubernetes.io~projected"
)

// Mounted is one volume ready on the host.
type Mounted struct {
	// Path is the host path to bind into containers.
	Path string
	// ReadOnly volumes (API data) are mounted read-only whatever the volumeMount says.
	ReadOnly bool
	// Writable volumes may get a missing subPath created inside them.
	Writable bool
	// Claim names the PersistentVolumeClaim behind the volume, if any.
	Claim string
	// HostPath volumes are the node's own files: no volume stats, as upstream.
	HostPath bool
	// Block volumes are raw devices: Path links to the device, which containers get
	// through volumeDevices, never through volumeMounts.
	Block bool
	// Image is an image volume's reference, with its pull policy: the runtime mounts
	// the image itself (CRI Mount.image), so it has no Path. The kubelet pulls it
	// before a container that mounts it starts and sets ImageRef to the pulled image.
	Image           string
	ImagePullPolicy v1.PullPolicy
	ImageRef        string
}

// PodDir is the pod's state directory.
func (m *Manager) PodDir(uid types.UID) string {
	return filepath.Join(m.opts.RootDir, "pods", string(uid))
}

// MakePodDir creates the pod's state directory. The kubelet makes it before the pod's
// first sandbox, whose start creates the pod's cgroup: the directory is what tells the
// kubelet's orphan sweep that the cgroup is its own.
func (m *Manager) MakePodDir(uid types.UID) error {
	return os.MkdirAll(m.PodDir(uid), 0o750)
}

// EmptyDirPath is where the pod's emptyDir volume of this name lives.
func (m *Manager) EmptyDirPath(uid types.UID, name string) string {
	return m.volumeDir(uid, kindEmptyDir, name)
}

func (m *Manager) volumeDir(uid types.UID, kind, name string) string {
	return filepath.Join(m.PodDir(uid), "volumes", kind, name)
}

// MountError is why one volume could not be set up; its message is worded as
// upstream's FailedMount events.
type MountError struct {
	Volume string
	Err    error
}

func (e *MountError) Error() string {
	return fmt.Sprintf("MountVolume.SetUp failed for volume %q : %v", e.Volume, e.Err)
}

func (e *MountError) Unwrap() error { return e.Err }

// SetUp makes every volume of the pod present and current: it creates what is
// missing and rewrites API-data volumes whose sources changed. It is cheap to call on
// every sync. The error joins one *MountError per volume that is not ready; a volume
// that was set up before and now fails to refresh (its ConfigMap deleted, say) keeps
// its last content and stays in the result, so running pods keep working as upstream's.
func (m *Manager) SetUp(ctx context.Context, pod *v1.Pod) (map[string]Mounted, error) {
	out := make(map[string]Mounted, len(pod.Spec.Volumes))
	var errs []error
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		if claim, ephemeral, ok := claimName(pod, vol); ok {
			mv, err := m.setUpClaimVolume(ctx, pod, vol, claim, ephemeral)
			if err != nil {
				errs = append(errs, &MountError{Volume: vol.Name, Err: err})
				continue
			}
			out[vol.Name] = mv
			continue
		}
		mv, ok := m.mounted(pod, vol)
		if !ok {
			errs = append(errs, &MountError{Volume: vol.Name, Err: errors.New("volume type is not supported by this kubelet")})
			continue
		}
		if err := m.setUpVolume(ctx, pod, vol, mv.Path); err != nil {
			errs = append(errs, &MountError{Volume: vol.Name, Err: err})
			if !mv.ReadOnly || !isDir(filepath.Join(mv.Path, dataDirName)) {
				continue
			}
		}
		out[vol.Name] = mv
	}
	m.readyMu.Lock()
	if m.ready == nil {
		m.ready = map[types.UID]map[string]Mounted{}
	}
	m.ready[pod.UID] = out
	m.readyMu.Unlock()
	return out, errors.Join(errs...)
}

// refreshRetry is how soon a refresh that is due and did not happen (a TokenRequest
// that failed, a certificate request not issued yet) is tried again.
const refreshRetry = 10 * time.Second

// NextRefresh is when the pod's volumes next change with nothing changing in the API:
// a service account token due its refresh (80% of its lifetime or 24 hours), a pod
// certificate its beginRefreshAt. The kubelet syncs the pod then, rather than
// waiting for its periodic resync. A refresh already due (it failed) is retried
// refreshRetry from now. ok is false when nothing is to be refreshed.
func (m *Manager) NextRefresh(uid types.UID) (time.Time, bool) {
	at, ok := m.tokens.nextRefresh(uid)
	if c, cok := m.podCerts.nextRefresh(uid); cok {
		at, ok = earliest(at, ok, c), true
	}
	if now := m.opts.Clock.Now(); ok && !at.After(now) {
		at = now.Add(refreshRetry)
	}
	return at, ok
}

// Ready returns the pod's volumes that its last SetUp made ready, by volume name.
func (m *Manager) Ready(uid types.UID) map[string]Mounted {
	m.readyMu.Lock()
	defer m.readyMu.Unlock()
	return m.ready[uid]
}

// mounted is where a volume lives on the host and how it may be mounted.
func (m *Manager) mounted(pod *v1.Pod, vol *v1.Volume) (Mounted, bool) {
	src := &vol.VolumeSource
	apiData := func(kind string) (Mounted, bool) {
		return Mounted{Path: m.volumeDir(pod.UID, kind, vol.Name), ReadOnly: true}, true
	}
	switch {
	case src.EmptyDir != nil:
		return Mounted{Path: m.volumeDir(pod.UID, kindEmptyDir, vol.Name), Writable: true}, true
	case src.HostPath != nil:
		return Mounted{Path: src.HostPath.Path, Writable: true, HostPath: true}, true
	case src.ConfigMap != nil:
		return apiData(kindConfigMap)
	case src.Secret != nil:
		return apiData(kindSecret)
	case src.DownwardAPI != nil:
		return apiData(kindDownwardAPI)
	case src.Projected != nil:
		return apiData(kindProjected)
	case src.Image != nil:
		return Mounted{Image: src.Image.Reference, ImagePullPolicy: src.Image.PullPolicy, ReadOnly: true}, true
	}
	return Mounted{}, false
}

func isDir(path string) bool {
	info, err := os.Stat(path)
	return err == nil && info.IsDir()
}

// setUpVolume creates or refreshes one volume at dir.
func (m *Manager) setUpVolume(ctx context.Context, pod *v1.Pod, vol *v1.Volume, dir string) error {
	src := &vol.VolumeSource
	gid := fsGroup(pod)
	var p payload
	var err error
	memory := true
	switch {
	case src.EmptyDir != nil:
		return m.setUpEmptyDir(pod, vol.Name, dir, src.EmptyDir)
	case src.HostPath != nil:
		// Never chowned, whatever the fsGroup: the host's files are not the pod's.
		return setUpHostPath(src.HostPath)
	case src.Image != nil:
		return nil // nothing on the host: pulled and mounted by the runtime
	case src.ConfigMap != nil:
		memory = false
		p, err = m.configMapPayload(ctx, pod.Namespace, src.ConfigMap.Name, src.ConfigMap.Items, src.ConfigMap.DefaultMode, src.ConfigMap.Optional)
	case src.Secret != nil:
		p, err = m.secretPayload(ctx, pod.Namespace, src.Secret.SecretName, src.Secret.Items, src.Secret.DefaultMode, src.Secret.Optional)
	case src.DownwardAPI != nil:
		p, err = m.downwardAPIPayload(pod, src.DownwardAPI.Items, src.DownwardAPI.DefaultMode)
	case src.Projected != nil:
		p, err = m.projectedPayload(ctx, pod, vol.Name, src.Projected)
	}
	if err != nil {
		return err
	}
	return m.write(dir, memory, p, gid)
}

// write brings an API-data volume to the payload, on tmpfs when memory-backed; with
// an fsGroup the group owns and may read every file and directory, as upstream sets
// it, each time the content changes.
func (m *Manager) write(dir string, memory bool, p payload, gid int64) error {
	if memory && m.opts.Tmpfs {
		if err := mountTmpfs(dir, ""); err != nil {
			return err
		}
	}
	if gid >= 0 {
		for path, f := range p {
			f.mode |= 0o440
			p[path] = f
		}
	}
	changed, err := m.writer.write(dir, p, gid)
	if err != nil || !changed {
		return err
	}
	// The directories too, as upstream: group-searchable and setgid, read-only.
	return setVolumeOwnership(dir, gid, nil, true)
}

// fsGroup is the pod's fsGroup, or -1.
func fsGroup(pod *v1.Pod) int64 {
	if sc := pod.Spec.SecurityContext; sc != nil && sc.FSGroup != nil {
		return *sc.FSGroup
	}
	return -1
}

// fileMode is an item's mode, else the volume's default mode, else 0644.
func fileMode(item, def *int32) os.FileMode {
	mode := int32(v1.ConfigMapVolumeSourceDefaultMode)
	if def != nil {
		mode = *def
	}
	if item != nil {
		mode = *item
	}
	return os.FileMode(mode) & os.ModePerm
}

// TearDown removes everything the pod had on the node: its volumes, then its
// directory (hosts file, termination messages).
func (m *Manager) TearDown(ctx context.Context, uid types.UID) error {
	if err := m.TearDownVolumes(ctx, uid); err != nil {
		return err
	}
	return os.RemoveAll(m.PodDir(uid))
}

// TearDownVolumes unmounts and removes the pod's volumes, keeping the rest of its
// directory: a finished pod's volumes go while its object (and the termination
// messages its status came from) remain. tmpfs mounts are unmounted first, so that
// nothing outside the pod directory can be removed through them.
func (m *Manager) TearDownVolumes(ctx context.Context, uid types.UID) error {
	m.tokens.forget(uid)
	m.podCerts.forget(uid)
	m.owned.forget(uid)
	m.writer.forget(m.PodDir(uid))
	m.readyMu.Lock()
	delete(m.ready, uid)
	m.readyMu.Unlock()
	if err := m.tearDownDevices(ctx, uid); err != nil {
		return err
	}
	volumes := filepath.Join(m.PodDir(uid), "volumes")
	kinds, err := os.ReadDir(volumes)
	if err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		return err
	}
	for _, k := range kinds {
		names, err := os.ReadDir(filepath.Join(volumes, k.Name()))
		if err != nil {
			return err
		}
		for _, n := range names {
			dir := filepath.Join(volumes, k.Name(), n.Name())
			if k.Name() == kindCSI {
				if err := m.tearDownCSI(ctx, dir); err != nil {
					return fmt.Errorf("UnmountVolume.TearDown failed for volume %q : %w", n.Name(), err)
				}
				if mounted, err := isMountPoint(filepath.Join(dir, "mount")); err == nil && mounted {
					if err := syscall.Unmount(filepath.Join(dir, "mount"), 0); err != nil {
						return fmt.Errorf("unmounting %s: %w", dir, err)
					}
				}
			}
			if mounted, err := isMountPoint(dir); err != nil {
				return err
			} else if mounted {
				if err := syscall.Unmount(dir, 0); err != nil {
					return fmt.Errorf("unmounting %s: %w", dir, err)
				}
			}
		}
	}
	return os.RemoveAll(volumes)
}

// PodsOnDisk lists the pods that have a directory under RootDir/pods.
func (m *Manager) PodsOnDisk() ([]types.UID, error) {
	entries, err := os.ReadDir(filepath.Join(m.opts.RootDir, "pods"))
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	uids := make([]types.UID, 0, len(entries))
	for _, e := range entries {
		if e.IsDir() {
			uids = append(uids, types.UID(e.Name()))
		}
	}
	return uids, nil
}
