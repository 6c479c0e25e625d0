package kubelet

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Labels and annotations the kubelet puts on sandboxes and containers, named as upstream
// names them, so that a restarted kubelet (or crictl) can tell whose they are.
const (
	labelPodName       = "io.kubernetes.pod.name"
	labelPodNamespace  = "io.kubernetes.pod.namespace"
	labelPodUID        = "io.kubernetes.pod.uid"
	labelContainerName = "io.kubernetes.container.name"
	annoRestartCount   = "io.kubernetes.container.restartCount"
	annoTermMsgPath    = "io.kubernetes.container.terminationMessagePath"
	annoTermMsgPolicy  = "io.kubernetes.container.terminationMessagePolicy"
	annoGracePeriod    = "io.kubernetes.pod.terminationGracePeriod"
	annoContainerHash  = "io.kubernetes.container.hash"
)

// podRuntime is what the runtime holds for one pod: its sandboxes and containers, newest
// first.
type podRuntime struct {
	sandboxes  []*runtimeapi.PodSandboxStatus
	containers []*runtimeapi.ContainerStatus
	sandboxOf  map[string]string // container ID -> sandbox ID
}

// readySandbox is the newest sandbox if it is ready.
func (r *podRuntime) readySandbox() *runtimeapi.PodSandboxStatus {
	if len(r.sandboxes) > 0 && r.sandboxes[0].State == runtimeapi.PodSandboxState_SANDBOX_READY {
		return r.sandboxes[0]
	}
	return nil
}

// instances returns the containers of this name, newest first.
func (r *podRuntime) instances(name string) []*runtimeapi.ContainerStatus {
	var out []*runtimeapi.ContainerStatus
	for _, c := range r.containers {
		if c.GetMetadata().GetName() == name {
			out = append(out, c)
		}
	}
	return out
}

// latestIn is the newest container of this name in the given sandbox, or nil.
func (r *podRuntime) latestIn(name, sandboxID string) *runtimeapi.ContainerStatus {
	for _, c := range r.containers {
		if c.GetMetadata().GetName() == name && r.sandboxOf[c.Id] == sandboxID {
			return c
		}
	}
	return nil
}

// latest is the newest container of this name, or nil.
func (r *podRuntime) latest(name string) *runtimeapi.ContainerStatus {
	for _, c := range r.containers {
		if c.GetMetadata().GetName() == name {
			return c
		}
	}
	return nil
}

// latestExited is the newest exited container of this name, or nil.
func (r *podRuntime) latestExited(name string) *runtimeapi.ContainerStatus {
	for _, c := range r.containers {
		if c.GetMetadata().GetName() == name && c.State == runtimeapi.ContainerState_CONTAINER_EXITED {
			return c
		}
	}
	return nil
}

// anyRunning reports whether any container is running or created.
func (r *podRuntime) anyRunning() bool {
	for _, c := range r.containers {
		if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING || c.State == runtimeapi.ContainerState_CONTAINER_CREATED {
			return true
		}
	}
	return false
}

// restartCount reads a container's restart count from its annotation, falling back to
// its attempt number.
func restartCount(c *runtimeapi.ContainerStatus) int32 {
	if n, err := strconv.Atoi(c.GetAnnotations()[annoRestartCount]); err == nil {
		return int32(n)
	}
	return int32(c.GetMetadata().GetAttempt())
}

// statusCache keeps the runtime's PodSandboxStatus and ContainerStatus answers for as
// long as they cannot change. A status changes only with its state: a running
// container's start time, a ready sandbox's IP and an exited container's exit code and
// reason are fixed. So readPodRuntime asks again only for what the list shows in a new
// state, and a pod's sync costs two list calls instead of one more call per sandbox and
// container (three times per sync, for every pod).
type statusCache struct {
	mu   sync.Mutex
	pods map[string]*podStatuses // by pod UID
}

// podStatuses are the cached statuses of one pod's sandboxes and containers, by ID.
type podStatuses struct {
	sandboxes  map[string]*runtimeapi.PodSandboxStatus
	containers map[string]*runtimeapi.ContainerStatus
}

func newStatusCache() *statusCache { return &statusCache{pods: map[string]*podStatuses{}} }

// get returns the pod's cached statuses; the caller replaces them with put.
func (c *statusCache) get(uid string) *podStatuses {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pods[uid]
}

// put replaces the pod's statuses with those of its latest read, which drops the
// sandboxes and containers that are gone.
func (c *statusCache) put(uid string, p *podStatuses) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(p.sandboxes) == 0 && len(p.containers) == 0 {
		delete(c.pods, uid)
		return
	}
	c.pods[uid] = p
}

// forget drops a removed pod's statuses.
func (c *statusCache) forget(uid string) { c.put(uid, &podStatuses{}) }

// readPodRuntime lists the pod's sandboxes and containers by its UID label.
func (kl *Kubelet) readPodRuntime(ctx context.Context, uid string) (*podRuntime, error) {
	sel := map[string]string{labelPodUID: uid}
	sbs, err := kl.runtime.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("listing sandboxes: %w", err)
	}
	cs, err := kl.runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("listing containers: %w", err)
	}
	cached := kl.statuses.get(uid)
	if cached == nil {
		cached = &podStatuses{}
	}
	fresh := &podStatuses{
		sandboxes:  make(map[string]*runtimeapi.PodSandboxStatus, len(sbs)),
		containers: make(map[string]*runtimeapi.ContainerStatus, len(cs)),
	}
	r := &podRuntime{sandboxOf: make(map[string]string, len(cs))}
	for _, sb := range sbs {
		st := cached.sandboxes[sb.Id]
		if st == nil || st.State != sb.State {
			resp, err := kl.runtime.PodSandboxStatus(ctx, sb.Id, false)
			if err != nil {
				continue // removed meanwhile
			}
			st = resp.Status
		}
		fresh.sandboxes[sb.Id] = st
		r.sandboxes = append(r.sandboxes, st)
	}
	for _, c := range cs {
		st := cached.containers[c.Id]
		if st == nil || st.State != c.State || c.State == runtimeapi.ContainerState_CONTAINER_UNKNOWN {
			resp, err := kl.runtime.ContainerStatus(ctx, c.Id, false)
			if err != nil {
				continue
			}
			st = withoutUnreadMounts(resp.Status)
		}
		fresh.containers[c.Id] = st
		r.containers = append(r.containers, st)
		r.sandboxOf[c.Id] = c.PodSandboxId
	}
	kl.statuses.put(uid, fresh)
	sort.SliceStable(r.sandboxes, func(i, j int) bool {
		a, b := r.sandboxes[i], r.sandboxes[j]
		if a.Metadata.GetAttempt() != b.Metadata.GetAttempt() {
			return a.Metadata.GetAttempt() > b.Metadata.GetAttempt()
		}
		return a.CreatedAt > b.CreatedAt
	})
	sort.SliceStable(r.containers, func(i, j int) bool {
		a, b := r.containers[i], r.containers[j]
		if a.CreatedAt != b.CreatedAt {
			return a.CreatedAt > b.CreatedAt
		}
		return a.Metadata.GetAttempt() > b.Metadata.GetAttempt()
	})
	return r, nil
}

// withoutUnreadMounts drops from a container's status, kept until its state changes,
// the mounts the kubelet never reads again: all but its termination message file's
// (each container has several, of a few strings each).
func withoutUnreadMounts(st *runtimeapi.ContainerStatus) *runtimeapi.ContainerStatus {
	if st == nil {
		return nil
	}
	var kept []*runtimeapi.Mount
	if m := terminationMessageMount(st); m != nil {
		kept = []*runtimeapi.Mount{m}
	}
	st.Mounts = kept
	return st
}
