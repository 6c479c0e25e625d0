package kubelet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	nodeserver "mizzen/internal/kubelet/server"
	"mizzen/internal/kubelet/volume"
	"mizzen/internal/kubelet/watchedobjects"
)

// volumeSources gives the volume manager what it reads: ConfigMaps and Secrets from
// the watches their pods registered (see package watchedobjects), other objects from
// the API through a short-lived cache (so that every pod's periodic sync does not cost
// a GET per volume), tokens from the TokenRequest API, and resource values the kubelet
// computes. Environment variables and image pull secrets read their ConfigMaps and
// Secrets through it too.
type volumeSources struct {
	kl      *Kubelet
	objects *objectCache
	// configMaps and secrets follow what registered pods refer to; an object no pod
	// registered (or a Kubelet built by hand in a test, where they are nil) is read
	// through objects.
	configMaps, secrets *watchedobjects.Manager
}

var _ volume.Sources = volumeSources{}

func (s volumeSources) ConfigMap(ctx context.Context, ns, name string) (*v1.ConfigMap, error) {
	if s.configMaps != nil {
		if obj, ok, err := s.configMaps.Get(ctx, ns, name); ok {
			if err != nil {
				return nil, err
			}
			return obj.(*v1.ConfigMap), nil
		}
	}
	obj, err := s.objects.get("configmaps/"+ns+"/"+name, func() (any, error) {
		return s.kl.client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	})
	if err != nil {
		return nil, err
	}
	return obj.(*v1.ConfigMap), nil
}

func (s volumeSources) Secret(ctx context.Context, ns, name string) (*v1.Secret, error) {
	if s.secrets != nil {
		if obj, ok, err := s.secrets.Get(ctx, ns, name); ok {
			if err != nil {
				return nil, err
			}
			return obj.(*v1.Secret), nil
		}
	}
	obj, err := s.objects.get("secrets/"+ns+"/"+name, func() (any, error) {
		return s.kl.client.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	})
	if err != nil {
		return nil, err
	}
	return obj.(*v1.Secret), nil
}

// register follows the ConfigMaps and Secrets the pod refers to (its current version's).
func (s volumeSources) register(pod *v1.Pod) {
	if s.configMaps != nil {
		s.configMaps.RegisterPod(pod)
		s.secrets.RegisterPod(pod)
	}
}

// unregister drops the pod's references; watches no other pod needs stop.
func (s volumeSources) unregister(uid types.UID) {
	if s.configMaps != nil {
		s.configMaps.UnregisterPod(uid)
		s.secrets.UnregisterPod(uid)
	}
}

// stopWatches ends every watch, when the kubelet stops.
func (s volumeSources) stopWatches() {
	if s.configMaps != nil {
		s.configMaps.Stop()
		s.secrets.Stop()
	}
}

// PersistentVolumeClaim is read fresh each time: a pod waiting for its claim to be
// bound should start as soon as it is.
func (s volumeSources) PersistentVolumeClaim(ctx context.Context, ns, name string) (*v1.PersistentVolumeClaim, error) {
	return s.kl.client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
}

func (s volumeSources) PersistentVolume(ctx context.Context, name string) (*v1.PersistentVolume, error) {
	obj, err := s.objects.get("persistentvolumes/"+name, func() (any, error) {
		return s.kl.client.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
	})
	if err != nil {
		return nil, err
	}
	return obj.(*v1.PersistentVolume), nil
}

// objectCache keeps objects read from the API for a while; errors (a missing
// ConfigMap) are not kept, so a pod waiting for one sees it on its next retry.
type objectCache struct {
	clock     clock.PassiveClock
	ttl       time.Duration
	mu        sync.Mutex
	entries   map[string]cachedObject
	lastPrune time.Time
}

type cachedObject struct {
	obj     any
	fetched time.Time
}

func newObjectCache(c clock.PassiveClock, ttl time.Duration) *objectCache {
	return &objectCache{clock: c, ttl: ttl, entries: map[string]cachedObject{}}
}

func (c *objectCache) get(key string, fetch func() (any, error)) (any, error) {
	if c == nil {
		return fetch() // a Kubelet built by hand in a test
	}
	now := c.clock.Now()
	c.mu.Lock()
	e, ok := c.entries[key]
	c.mu.Unlock()
	if ok && now.Sub(e.fetched) < c.ttl {
		return e.obj, nil
	}
	obj, err := fetch()
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		delete(c.entries, key)
		return nil, err
	}
	c.entries[key] = cachedObject{obj: obj, fetched: now}
	if now.Sub(c.lastPrune) > c.ttl {
		for k, e := range c.entries {
			if now.Sub(e.fetched) >= c.ttl {
				delete(c.entries, k)
			}
		}
		c.lastPrune = now
	}
	return obj, nil
}

func (s volumeSources) ResourceValue(pod *v1.Pod, ref *v1.ResourceFieldSelector) (string, error) {
	c := containerSpec(pod, ref.ContainerName)
	if c == nil {
		return "", fmt.Errorf("resourceFieldRef: no container %q", ref.ContainerName)
	}
	return s.kl.resourceFieldValue(pod, c, ref)
}

func (s volumeSources) ServiceAccountToken(ctx context.Context, pod *v1.Pod, audience string, seconds int64) (string, time.Time, error) {
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: &seconds,
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}
	if audience != "" {
		req.Spec.Audiences = []string{audience}
	}
	tr, err := s.kl.client.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, sa, req, metav1.CreateOptions{})
	if err != nil {
		return "", time.Time{}, err
	}
	return tr.Status.Token, tr.Status.ExpirationTimestamp.Time, nil
}

// Volume set-up retries back off as upstream's volume operations do: from half a
// second, doubling up to about two minutes. After mountTimeout of waiting, one summary
// event names the volumes still missing (and again each time as long).
const (
	mountRetryInitial = 500 * time.Millisecond
	mountRetryMax     = 2*time.Minute + 2*time.Second
	mountTimeout      = 2*time.Minute + 3*time.Second
)

// setUpVolumes makes the pod's volumes ready and current. A volume that is not is
// reported as a FailedMount event, worded as upstream's, each time its retry falls due.
func (kl *Kubelet) setUpVolumes(ctx context.Context, w *podWorker, pod *v1.Pod) (map[string]volume.Mounted, bool) {
	st := w.state
	vols, err := kl.volumes.SetUp(ctx, pod)
	if err == nil {
		st.mountWaitSince, st.mountRetryAt, st.mountRetry = time.Time{}, time.Time{}, 0
		return vols, true
	}
	now := kl.clock.Now()
	if st.mountWaitSince.IsZero() {
		st.mountWaitSince = now
	}
	if now.Sub(st.mountWaitSince) >= mountTimeout {
		var unmounted []string
		for _, e := range mountErrors(err) {
			unmounted = append(unmounted, e.Volume)
		}
		all := make([]string, 0, len(pod.Spec.Volumes))
		for _, v := range pod.Spec.Volumes {
			all = append(all, v.Name)
		}
		kl.recorder.Eventf(containerRef(pod, ""), v1.EventTypeWarning, "FailedMount",
			"Unable to attach or mount volumes: unmounted volumes=[%s], unattached volumes=[%s]: timed out waiting for the condition",
			strings.Join(unmounted, " "), strings.Join(all, " "))
		st.mountWaitSince = now
	}
	if now.Before(st.mountRetryAt) {
		return vols, false // a sync between retries: the retry is scheduled
	}
	for _, e := range mountErrors(err) {
		kl.recorder.Eventf(containerRef(pod, ""), v1.EventTypeWarning, "FailedMount", "%v", e)
	}
	st.mountRetry = min(max(2*st.mountRetry, mountRetryInitial), mountRetryMax)
	st.mountRetryAt = now.Add(st.mountRetry)
	kl.workers.pokeAfter(pod.UID, st.mountRetry)
	return vols, false
}

// mountErrors splits SetUp's joined error into its volumes' errors.
func mountErrors(err error) []*volume.MountError {
	var out []*volume.MountError
	errs := []error{err}
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		errs = joined.Unwrap()
	}
	for _, e := range errs {
		var me *volume.MountError
		if errors.As(e, &me) {
			out = append(out, me)
		}
	}
	return out
}

// containerMounts is every mount of a container instance: its volumes, the managed
// /etc/hosts, and a fresh termination message file.
func (kl *Kubelet) containerMounts(pod *v1.Pod, c *v1.Container, vols map[string]volume.Mounted, vars map[string]string, podIPs []string, termPath string) ([]*runtimeapi.Mount, error) {
	mounts, err := volume.ContainerMounts(c, vols, vars)
	if err != nil {
		return nil, err
	}
	// As upstream, the hosts file is managed only where the pod has addresses (a
	// sandbox without a network keeps the image's).
	if volume.ManagesHosts(c) && (pod.Spec.HostNetwork || len(podIPs) > 0) {
		hostname, domain := kl.podHostname(pod)
		hosts, err := kl.volumes.HostsFile(pod, hostname, domain, podIPs)
		if err != nil {
			return nil, err
		}
		mounts = append(mounts, &runtimeapi.Mount{ContainerPath: "/etc/hosts", HostPath: hosts})
	}
	if termPath != "" {
		f, err := kl.volumes.TerminationLogFile(pod.UID, c.Name)
		if err != nil {
			return nil, err
		}
		mounts = append(mounts, &runtimeapi.Mount{ContainerPath: termPath, HostPath: f})
	}
	return mounts, nil
}

// Limits of a termination message, as upstream's.
const (
	maxTerminationMessageBytes = 4096
	maxFallbackLogBytes        = 2048
	maxFallbackLogLines        = 80
)

// terminationMessageMount is the mount of the container's termination message file,
// or nil.
func terminationMessageMount(c *runtimeapi.ContainerStatus) *runtimeapi.Mount {
	path := c.GetAnnotations()[annoTermMsgPath]
	if path == "" {
		return nil
	}
	for _, m := range c.GetMounts() {
		if m.ContainerPath == path {
			return m
		}
	}
	return nil
}

// terminationMessage is what an exited container left in its termination message
// file; with FallbackToLogsOnError and a failure and no message, the tail of its log.
func terminationMessage(c *runtimeapi.ContainerStatus) string {
	if c.GetAnnotations()[annoTermMsgPath] == "" {
		return ""
	}
	var msg string
	if m := terminationMessageMount(c); m != nil {
		msg = readHead(m.HostPath, maxTerminationMessageBytes)
	}
	if msg == "" && c.ExitCode != 0 && c.GetAnnotations()[annoTermMsgPolicy] == string(v1.TerminationMessageFallbackToLogsOnError) {
		msg = logTail(c.LogPath)
	}
	return msg
}

func readHead(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	b, _ := io.ReadAll(io.LimitReader(f, n))
	return string(b)
}

// logTail is the last lines of a container's CRI log (at most 80 lines and 2048
// bytes), without the CRI timestamp, stream and tag fields.
func logTail(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	const window = 64 << 10
	if st, err := f.Stat(); err == nil && st.Size() > window {
		_, _ = f.Seek(st.Size()-window, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	// Each record is "<time> <stream> <F|P> <message>": a full line (F) ended with a
	// newline in the container's output, a partial one (P) did not.
	var out []string
	for _, l := range lines {
		parts := strings.SplitN(l, " ", 4)
		if len(parts) == 4 {
			if parts[2] == "F" {
				parts[3] += "\n"
			}
			out = append(out, parts[3])
		}
	}
	if len(out) > maxFallbackLogLines {
		out = out[len(out)-maxFallbackLogLines:]
	}
	msg := strings.Join(out, "")
	if len(msg) > maxFallbackLogBytes {
		msg = msg[len(msg)-maxFallbackLogBytes:]
	}
	return msg
}

// podVolumes are the pod's ready volumes whose usage /stats/summary reports: all but
// the node's own files (hostPath volumes that no claim is behind), as upstream, raw
// block devices, which have no filesystem to measure, and image volumes, which the
// runtime mounts from its own store.
func (kl *Kubelet) podVolumes(uid string) []nodeserver.PodVolume {
	var out []nodeserver.PodVolume
	for name, mv := range kl.volumes.Ready(types.UID(uid)) {
		if (mv.HostPath && mv.Claim == "") || mv.Block || mv.Image != "" {
			continue
		}
		out = append(out, nodeserver.PodVolume{Name: name, Path: mv.Path, ClaimName: mv.Claim})
	}
	return out
}

// ClusterTrustBundle is read fresh: a pod waiting for one starts as soon as it exists.
func (s volumeSources) ClusterTrustBundle(ctx context.Context, name string) (*certificatesv1.ClusterTrustBundle, error) {
	return s.kl.client.CertificatesV1().ClusterTrustBundles().Get(ctx, name, metav1.GetOptions{})
}

func (s volumeSources) ClusterTrustBundles(ctx context.Context, signerName string) ([]certificatesv1.ClusterTrustBundle, error) {
	list, err := s.kl.client.CertificatesV1().ClusterTrustBundles().List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.signerName", signerName).String()})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// CreatePodCertificateRequest names the node and the pod's service account by name
// and UID in req, as the API requires, and files it.
func (s volumeSources) CreatePodCertificateRequest(ctx context.Context, pod *v1.Pod, req *certificatesv1.PodCertificateRequest) (*certificatesv1.PodCertificateRequest, error) {
	node, err := s.kl.client.CoreV1().Nodes().Get(ctx, s.kl.opts.NodeName, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("while reading node %s: %w", s.kl.opts.NodeName, err)
	}
	saName := pod.Spec.ServiceAccountName
	if saName == "" {
		saName = "default"
	}
	sa, err := s.kl.client.CoreV1().ServiceAccounts(pod.Namespace).Get(ctx, saName, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("while reading service account %s/%s: %w", pod.Namespace, saName, err)
	}
	req.Spec.NodeName, req.Spec.NodeUID = types.NodeName(node.Name), node.UID
	req.Spec.ServiceAccountName, req.Spec.ServiceAccountUID = sa.Name, sa.UID
	return s.kl.client.CertificatesV1().PodCertificateRequests(pod.Namespace).Create(ctx, req, metav1.CreateOptions{})
}

func (s volumeSources) PodCertificateRequest(ctx context.Context, ns, name string) (*certificatesv1.PodCertificateRequest, error) {
	return s.kl.client.CertificatesV1().PodCertificateRequests(ns).Get(ctx, name, metav1.GetOptions{})
}
