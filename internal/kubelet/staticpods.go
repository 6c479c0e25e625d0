package kubelet

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/yaml"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"
)

// Annotations of static pods and their mirror pods, as upstream names them.
const (
	annoConfigHash   = "kubernetes.io/config.hash"
	annoConfigSource = "kubernetes.io/config.source"
	annoConfigSeen   = "kubernetes.io/config.seen"
	annoConfigMirror = "kubernetes.io/config.mirror"
)

// staticPods are the pods of the manifest directory, by their UID: a hash of the
// manifest and the node, so that a changed file is a new pod and an unchanged one keeps
// its containers across kubelet restarts. A pod whose manifest is removed or changed
// terminates gracefully, as a deleted API pod does.
type staticPods struct {
	dir  string
	node string
	mu   sync.Mutex
	pods map[types.UID]*v1.Pod
	// removed are pods whose manifest went away, marked for deletion (as an API pod
	// being deleted is) until their containers have stopped gracefully.
	removed map[types.UID]*v1.Pod
}

func newStaticPods(dir, node string) *staticPods {
	return &staticPods{dir: dir, node: node, pods: map[types.UID]*v1.Pod{}, removed: map[types.UID]*v1.Pod{}}
}

// get returns a copy of the static pod with this UID, or nil.
func (s *staticPods) get(uid types.UID) *v1.Pod {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.pods[uid]; ok {
		return p.DeepCopy()
	}
	if p, ok := s.removed[uid]; ok {
		return p.DeepCopy()
	}
	return nil
}

// forget drops a removed pod once it has terminated; it returns the pod, or nil when
// uid was not a removed one.
func (s *staticPods) forget(uid types.UID) *v1.Pod {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.removed[uid]
	delete(s.removed, uid)
	return p
}

// olderTerminating reports whether a removed pod with this full name (namespace/name)
// and another UID has not finished terminating yet.
func (s *staticPods) olderTerminating(key string, uid types.UID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for other, p := range s.removed {
		if other != uid && p.Namespace+"/"+p.Name == key {
			return true
		}
	}
	return false
}

// byKey returns the static pod named namespace/name, or nil.
func (s *staticPods) byKey(key string) *v1.Pod {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.pods {
		if p.Namespace+"/"+p.Name == key {
			return p.DeepCopy()
		}
	}
	return nil
}

// reload reads the directory again and returns the UIDs of pods added or removed. A
// manifest that cannot be read is logged and skipped; the others still run.
func (s *staticPods) reload(now time.Time, warn func(file string, err error)) []types.UID {
	next := map[types.UID]*v1.Pod{}
	entries, err := os.ReadDir(s.dir)
	if err != nil && !os.IsNotExist(err) {
		warn(s.dir, err)
		return nil
	}
	for _, e := range entries {
		if e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		path := filepath.Join(s.dir, e.Name())
		data, err := os.ReadFile(path)
		if err != nil {
			warn(path, err)
			continue
		}
		pod, err := staticPodFromManifest(data, s.node, now)
		if err != nil {
			warn(path, err)
			continue
		}
		next[pod.UID] = pod
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var changed []types.UID
	for uid := range next {
		if old, ok := s.pods[uid]; ok {
			next[uid] = old // keep the first config.seen
			continue
		}
		if _, ok := s.removed[uid]; ok {
			delete(next, uid) // back once its old self has stopped
			continue
		}
		changed = append(changed, uid)
	}
	for uid, pod := range s.pods {
		if _, ok := next[uid]; !ok {
			pod.DeletionTimestamp = ptr.To(metav1.NewTime(now))
			pod.DeletionGracePeriodSeconds = pod.Spec.TerminationGracePeriodSeconds
			s.removed[uid] = pod
			changed = append(changed, uid)
		}
	}
	s.pods = next
	return changed
}

// list returns copies of the current static pods in name order.
func (s *staticPods) list() []*v1.Pod {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*v1.Pod, 0, len(s.pods))
	for _, p := range s.pods {
		out = append(out, p.DeepCopy())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Namespace+"/"+out[i].Name < out[j].Namespace+"/"+out[j].Name })
	return out
}

// staticPodFromManifest decodes a YAML or JSON pod manifest and makes it this node's
// pod as upstream does: named <name>-<node>, in namespace default unless it says
// otherwise, bound to the node, with the config annotations and the hash as its UID.
func staticPodFromManifest(data []byte, node string, now time.Time) (*v1.Pod, error) {
	var pod v1.Pod
	if err := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096).Decode(&pod); err != nil {
		return nil, fmt.Errorf("decoding pod manifest: %w", err)
	}
	if pod.Kind != "" && pod.Kind != "Pod" || pod.APIVersion != "" && pod.APIVersion != "v1" {
		return nil, fmt.Errorf("manifest is a %s %s, not a v1 Pod", pod.APIVersion, pod.Kind)
	}
	if pod.Name == "" {
		return nil, fmt.Errorf("pod manifest has no metadata.name")
	}
	if len(pod.Spec.Containers) == 0 {
		return nil, fmt.Errorf("pod %s has no containers", pod.Name)
	}
	pod.Name = pod.Name + "-" + strings.ToLower(node)
	if pod.Namespace == "" {
		pod.Namespace = metav1.NamespaceDefault
	}
	pod.Spec.NodeName = node
	defaultStaticPod(&pod)
	pod.Status = v1.PodStatus{}
	canonical, err := json.Marshal(&pod)
	if err != nil {
		return nil, err
	}
	sum := md5.Sum(append(canonical, node...))
	hash := hex.EncodeToString(sum[:])
	pod.UID = types.UID(hash)
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[annoConfigHash] = hash
	pod.Annotations[annoConfigSource] = "file"
	pod.Annotations[annoConfigSeen] = now.UTC().Format(time.RFC3339Nano)
	pod.CreationTimestamp = metav1.NewTime(now)
	return &pod, nil
}

// defaultStaticPod fills the defaults the kubelet relies on that the apiserver would
// have set for a pod created through it.
func defaultStaticPod(pod *v1.Pod) {
	if pod.Spec.RestartPolicy == "" {
		pod.Spec.RestartPolicy = v1.RestartPolicyAlways
	}
	if pod.Spec.DNSPolicy == "" {
		pod.Spec.DNSPolicy = v1.DNSClusterFirst
	}
	if pod.Spec.TerminationGracePeriodSeconds == nil {
		pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](defaultGracePeriodSec)
	}
	if pod.Spec.SchedulerName == "" {
		pod.Spec.SchedulerName = v1.DefaultSchedulerName
	}
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			c := &list[i]
			if c.ImagePullPolicy == "" {
				c.ImagePullPolicy = v1.PullIfNotPresent
				if hasLatestTag(c.Image) {
					c.ImagePullPolicy = v1.PullAlways
				}
			}
			if c.TerminationMessagePath == "" {
				c.TerminationMessagePath = v1.TerminationMessagePathDefault
			}
			if c.TerminationMessagePolicy == "" {
				c.TerminationMessagePolicy = v1.TerminationMessageReadFile
			}
		}
	}
}

// isMirrorPod reports whether an API pod is the mirror of a static pod.
func isMirrorPod(pod *v1.Pod) bool {
	_, ok := pod.Annotations[annoConfigMirror]
	return ok
}

// staticPod returns the static pod with this UID, with the status of its mirror pod
// when the mirror is its own (not an older manifest's), or nil when uid is not a static pod's.
func (kl *Kubelet) staticPod(uid types.UID) *v1.Pod {
	pod := kl.static.get(uid)
	if pod == nil {
		return nil
	}
	if mirror := kl.mirrorOf(pod); mirror != nil && mirror.DeletionTimestamp == nil && mirror.Annotations[annoConfigMirror] == string(uid) {
		pod.Status = mirror.Status
	}
	return pod
}

// mirrorOf returns the API pod named as the static pod, or nil.
func (kl *Kubelet) mirrorOf(pod *v1.Pod) *v1.Pod {
	obj, exists, err := kl.podInformer.GetStore().GetByKey(pod.Namespace + "/" + pod.Name)
	if err != nil || !exists {
		return nil
	}
	return obj.(*v1.Pod)
}

// staticPodTerminated is called when a pod's graceful termination has finished: a
// removed static pod is then forgotten, its worker cleans up what is left, and the
// static pod that replaces it (same full name, new manifest) may start.
func (kl *Kubelet) staticPodTerminated(uid types.UID) {
	old := kl.static.forget(uid)
	if old == nil {
		return
	}
	kl.workers.poke(uid)
	kl.wakeStaticPodNamed(old.Namespace+"/"+old.Name, uid)
}

// wakeStaticPodNamed pokes the static pod of this full name, other than the pod
// (UID) that just terminated, which may be waiting for it.
func (kl *Kubelet) wakeStaticPodNamed(key string, terminated types.UID) {
	if next := kl.static.byKey(key); next != nil && next.UID != terminated {
		kl.workers.dispatch(next.UID, key)
	}
}

// waitsForOlderPod reports whether a static pod must wait before starting because an
// older pod of the same full name is still terminating, as upstream's kubelet makes
// it: the two would otherwise overlap, and host-network pods (etcd, an apiserver)
// would fight over their ports. The older pod is either one whose manifest changed or
// went away, or one a restarted kubelet found still running in the runtime.
func (kl *Kubelet) waitsForOlderPod(ctx context.Context, pod *v1.Pod) (bool, error) {
	key := pod.Namespace + "/" + pod.Name
	if kl.static.olderTerminating(key, pod.UID) {
		return true, nil
	}
	sbs, err := kl.runtime.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{
		State:         &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY},
		LabelSelector: map[string]string{labelPodNamespace: pod.Namespace, labelPodName: pod.Name},
	})
	if err != nil {
		return false, fmt.Errorf("listing sandboxes: %w", err)
	}
	for _, sb := range sbs {
		if sb.Labels[labelPodUID] != string(pod.UID) {
			return true, nil
		}
	}
	return false, nil
}

// statusTarget is the API object a pod's status is written to: the pod itself, or for
// a static pod its current mirror pod (nil when there is none yet).
func (kl *Kubelet) statusTarget(pod *v1.Pod) *v1.Pod {
	if kl.static.get(pod.UID) == nil {
		return pod
	}
	mirror := kl.mirrorOf(pod)
	if mirror == nil || mirror.Annotations[annoConfigMirror] != string(pod.UID) || mirror.DeletionTimestamp != nil {
		return nil
	}
	return mirror
}

// syncMirrorPod makes the static pod's mirror in the API current: it removes a mirror
// that is being deleted or belongs to an older manifest, and creates a missing one.
func (kl *Kubelet) syncMirrorPod(ctx context.Context, pod *v1.Pod) error {
	mirror := kl.mirrorOf(pod)
	if mirror != nil {
		if mirror.Annotations[annoConfigMirror] == string(pod.UID) && mirror.DeletionTimestamp == nil {
			return nil
		}
		if err := kl.deleteMirrorPod(ctx, mirror); err != nil {
			return err
		}
	}
	node, err := kl.client.CoreV1().Nodes().Get(ctx, kl.opts.NodeName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading node for the mirror pod's owner: %w", err)
	}
	m := pod.DeepCopy()
	m.UID, m.ResourceVersion, m.CreationTimestamp = "", "", metav1.Time{}
	m.Annotations[annoConfigMirror] = string(pod.UID)
	m.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID, Controller: ptr.To(true),
	}}
	m.Status = v1.PodStatus{}
	_, err = kl.client.CoreV1().Pods(m.Namespace).Create(ctx, m, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil // the old mirror is still going; the watch brings us back
	}
	if err != nil {
		return fmt.Errorf("creating mirror pod: %w", err)
	}
	kl.log.Info("created mirror pod", "pod", m.Namespace+"/"+m.Name, "hash", pod.UID)
	return nil
}

// deleteMirrorPod removes a mirror pod at once; it has no containers of its own.
func (kl *Kubelet) deleteMirrorPod(ctx context.Context, mirror *v1.Pod) error {
	err := kl.client.CoreV1().Pods(mirror.Namespace).Delete(ctx, mirror.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0),
		Preconditions:      metav1.NewUIDPreconditions(string(mirror.UID)),
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting mirror pod: %w", err)
	}
	return nil
}

// onMirrorPod routes an event about a mirror pod to its static pod's worker; a mirror
// whose static pod is gone is deleted.
func (kl *Kubelet) onMirrorPod(mirror *v1.Pod) {
	key := mirror.Namespace + "/" + mirror.Name
	if pod := kl.static.byKey(key); pod != nil {
		kl.workers.dispatch(pod.UID, key)
		return
	}
	kl.workers.dispatch(types.UID("mirror:"+string(mirror.UID)), key)
}

// reloadStaticPods rereads the manifest directory and pokes the workers of the pods that
// came or went.
func (kl *Kubelet) reloadStaticPods() {
	for _, uid := range kl.static.reload(kl.clock.Now(), kl.manifestError) {
		key := ""
		if pod := kl.static.get(uid); pod != nil {
			key = pod.Namespace + "/" + pod.Name
		}
		kl.workers.dispatch(uid, key)
	}
}

// manifestError reports a manifest the kubelet cannot run.
func (kl *Kubelet) manifestError(file string, err error) {
	kl.log.Error("reading static pod manifest", "file", file, "err", err)
}

// runStaticPods rereads the manifest directory every FileCheckFrequency and removes
// mirror pods left without a static pod.
func (kl *Kubelet) runStaticPods(ctx context.Context) {
	t := kl.clock.NewTicker(kl.opts.FileCheckFrequency)
	defer t.Stop()
	for {
		for _, obj := range kl.podInformer.GetStore().List() {
			if p := obj.(*v1.Pod); isMirrorPod(p) && kl.static.byKey(cacheKey(p)) == nil {
				kl.onMirrorPod(p)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			kl.reloadStaticPods()
		}
	}
}

// syncOrphanMirror handles the worker of a mirror pod without a static pod: it deletes
// the mirror and reports done.
func (kl *Kubelet) syncOrphanMirror(ctx context.Context, w *podWorker) (bool, error) {
	obj, exists, err := kl.podInformer.GetStore().GetByKey(w.key)
	if err != nil || !exists {
		return true, err
	}
	mirror := obj.(*v1.Pod)
	if !isMirrorPod(mirror) || "mirror:"+string(mirror.UID) != string(w.uid) || kl.static.byKey(w.key) != nil {
		return true, nil
	}
	kl.log.Info("deleting mirror pod without a static pod", "pod", w.key)
	return true, kl.deleteMirrorPod(ctx, mirror)
}
