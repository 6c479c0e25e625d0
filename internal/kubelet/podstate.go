package kubelet

import (
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
)

// podState is what a pod worker remembers between syncs that neither the API nor the
// runtime records: why a container is waiting, probe results, kills a probe asked for.
// Losing it (a kubelet restart) costs nothing but a fresh probe round.
type podState struct {
	mu        sync.Mutex
	startTime time.Time // when this kubelet first acted on the pod; worker-owned
	// sandboxReadyAt is when this kubelet's last RunPodSandbox returned, worker-owned:
	// the PodReadyToStartContainers condition's transition time, which a status
	// written only after the containers started would otherwise place after them.
	sandboxReadyAt time.Time
	waiting        map[string]waitingReason
	pullFailed     map[string]time.Time
	probes         map[probeKey]*probeWorker
	results        map[string]*containerProbeResults // by container ID
	kills          map[string]killRequest            // by container ID
	// readinessChanged is signalled when a readiness probe changed a container's
	// readiness: a pod being stopped reports it before its containers have stopped.
	readinessChanged chan struct{}
	// eviction is why and how the pod is to be evicted; empty unless an eviction
	// manager chose it (over a local storage limit, or for node pressure).
	eviction evictionRequest
	// Volume set-up failures, worker-owned: when the current stretch began, and the
	// back-off of their retries and events.
	mountWaitSince time.Time
	mountRetryAt   time.Time
	mountRetry     time.Duration
	// resized is the cpu and memory an in-place resize applied, by container ID;
	// resize is the pod's resize refused or failing, for its conditions.
	resized map[string]v1.ResourceRequirements
	resize  resizeState
	// created is each container's current instance's decoded resources annotation,
	// by container name (see actualResources).
	created map[string]decodedResources
}

// decodedResources is the resources annotation raw of instance id, decoded.
type decodedResources struct {
	id, raw   string
	resources v1.ResourceRequirements
}

type waitingReason struct{ reason, message string }

// containerProbeResults are the current outcomes of one container's probes.
type containerProbeResults struct {
	ready   bool // readiness passed (true when the container has no readiness probe)
	started bool // startup passed (true when the container has no startup probe)
}

// newPodState returns a pod's empty state. Its maps are made on their first write:
// most pods never have a probe, a kill, a resize or a waiting reason, and a node
// (or the hollow nodes' one process) holds a state per pod.
func newPodState() *podState {
	return &podState{readinessChanged: make(chan struct{}, 1)}
}

// put sets m[k] = v, making the map first if it is nil.
func put[K comparable, V any](m *map[K]V, k K, v V) {
	if *m == nil {
		*m = make(map[K]V)
	}
	(*m)[k] = v
}

func (s *podState) setWaiting(name, reason, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	put(&s.waiting, name, waitingReason{reason, msg})
}

func (s *podState) clearWaiting(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.waiting, name)
	delete(s.pullFailed, name)
}

func (s *podState) getWaiting(name string) (waitingReason, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w, ok := s.waiting[name]
	return w, ok
}

func (s *podState) setPullFailed(name string, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	put(&s.pullFailed, name, at)
}

func (s *podState) pullFailedAt(name string) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pullFailed[name]
}

// killRequest is a kill a failed liveness or startup probe asked for: why, and the
// grace period the container gets (the probe's terminationGracePeriodSeconds, else the
// pod's).
type killRequest struct {
	reason string
	grace  int64
}

// requestKill asks the next sync to kill a container.
func (s *podState) requestKill(containerID string, k killRequest) {
	s.mu.Lock()
	defer s.mu.Unlock()
	put(&s.kills, containerID, k)
}

// takeKill returns and clears a pending kill request for the container; its reason is
// "" when there is none.
func (s *podState) takeKill(containerID string) killRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.kills[containerID]
	delete(s.kills, containerID)
	return r
}

// evictionRequest is an eviction decided for the pod: upstream's message, the grace
// period its containers get, and whether node pressure caused it (which marks the pod
// with a DisruptionTarget condition, as upstream's kubelet does).
type evictionRequest struct {
	message      string
	gracePeriod  int64
	nodePressure bool
}

// setEviction records the pod's eviction; the first one recorded stands.
func (s *podState) setEviction(e evictionRequest) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.eviction.message == "" {
		s.eviction = e
	}
}

// pendingEviction is the pod's eviction; its message is empty when there is none.
func (s *podState) pendingEviction() evictionRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.eviction
}

// probeResults returns the container's probe results, or nil if none are recorded.
func (s *podState) probeResults(containerID string) (containerProbeResults, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.results[containerID]
	if !ok {
		return containerProbeResults{}, false
	}
	return *r, true
}

// stopProbesOf stops the pod's probe workers of the types given; the results stay.
func (s *podState) stopProbesOf(types ...probeType) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopProbesWhereLocked(func(k probeKey, _ *probeWorker) bool { return slices.Contains(types, k.typ) })
}

// stopContainerProbes stops the probe workers of one container instance.
func (s *podState) stopContainerProbes(containerID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopProbesWhereLocked(func(_ probeKey, p *probeWorker) bool { return p.containerID == containerID })
}

// stopProbes stops every probe worker of the pod and forgets their results.
func (s *podState) stopProbes() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopProbesWhereLocked(func(probeKey, *probeWorker) bool { return true })
	clear(s.results)
}

// stopProbesWhereLocked stops and drops the probe workers match picks; s.mu is held.
func (s *podState) stopProbesWhereLocked(match func(probeKey, *probeWorker) bool) {
	for k, p := range s.probes {
		if match(k, p) {
			p.stop()
			delete(s.probes, k)
		}
	}
}

// started reports whether a running container instance is past its startup probe (at
// once when it has none).
func (s *podState) started(containerID string, c *v1.Container) bool {
	if res, ok := s.probeResults(containerID); ok {
		return res.started
	}
	return c.StartupProbe == nil
}
