package kubelet

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// abandonedStartGrace is how long after the kubelet gave up a sandbox start (its pod
// was deleted meanwhile) the runtime may still be at it: the CRI call's own bound. A
// cancelled RunPodSandbox goes on in containerd until it succeeds or fails, and runc
// creates the pod's cgroup on the way, possibly after the kubelet has torn the pod
// down; so the pod's directory, by which the orphan sweep knows the cgroup is this
// kubelet's, stays until then.
const abandonedStartGrace = connectTimeout

// abandonedStarts are the pods whose sandbox start the kubelet gave up, by pod UID,
// with when.
type abandonedStarts struct {
	mu   sync.Mutex
	pods map[types.UID]time.Time
}

func (a *abandonedStarts) add(uid types.UID, at time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.pods == nil {
		a.pods = map[types.UID]time.Time{}
	}
	a.pods[uid] = at
}

// runtimeMayStillStart reports whether a sandbox start of the pod given up before now
// may still be going on in the runtime; a start given up longer ago is forgotten.
func (a *abandonedStarts) runtimeMayStillStart(uid types.UID, now time.Time) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	at, ok := a.pods[uid]
	if ok && now.Sub(at) >= abandonedStartGrace {
		delete(a.pods, uid)
		return false
	}
	return ok
}
