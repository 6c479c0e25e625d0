package kubelet

import (
	"context"
	"encoding/json"
	"fmt"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// In-place resize (pods/resize): the kubelet compares each running container's cpu and
// memory in the spec with what the container runs with, and brings the container to the
// spec through CRI UpdateContainerResources, or restarts it where the container's
// resize policy says RestartContainer. What a container was created with is in an
// annotation of the instance; what a resize applied since is in the worker's memory (a
// restarted kubelet applies it again, which changes nothing).

// annoResources records the cpu and memory requests and limits an instance was created with.
const annoResources = "io.mizzen.container.resources"

// resizeState is a pod's resize in progress or refused, for its conditions.
type resizeState struct {
	pending    string // PodResizePending reason (Infeasible, Deferred); "" if none
	inProgress bool   // PodResizeInProgress: applying failed and will be retried
	message    string
}

// cpuMemory is the cpu and memory part of r, nil maps where r has none, as the status's
// resources and allocatedResources report them.
func cpuMemory(r v1.ResourceRequirements) v1.ResourceRequirements {
	pick := func(l v1.ResourceList) v1.ResourceList {
		var out v1.ResourceList
		for _, name := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
			if q, ok := l[name]; ok {
				if out == nil {
					out = v1.ResourceList{}
				}
				out[name] = q.DeepCopy()
			}
		}
		return out
	}
	return v1.ResourceRequirements{Requests: pick(r.Requests), Limits: pick(r.Limits)}
}

func encodeResources(r v1.ResourceRequirements) string {
	b, err := json.Marshal(cpuMemory(r))
	if err != nil {
		return ""
	}
	return string(b)
}

// actualResources is what the running instance cur has: the last resize applied to it,
// else what it was created with; ok is false for an instance without the record.
func (s *podState) actualResources(cur *runtimeapi.ContainerStatus) (v1.ResourceRequirements, bool) {
	s.mu.Lock()
	r, ok := s.resized[cur.Id]
	s.mu.Unlock()
	if ok {
		return r, true
	}
	raw, ok := cur.GetAnnotations()[annoResources]
	if !ok {
		return v1.ResourceRequirements{}, false
	}
	// The annotation is decoded once per instance: every status the pod's syncs
	// compute asks for it, and decoding JSON costs far more than a copy.
	name := cur.GetMetadata().GetName()
	s.mu.Lock()
	d, ok := s.created[name]
	s.mu.Unlock()
	if ok && d.id == cur.Id && d.raw == raw {
		return *d.resources.DeepCopy(), true
	}
	var created v1.ResourceRequirements
	if json.Unmarshal([]byte(raw), &created) != nil {
		return v1.ResourceRequirements{}, false
	}
	s.mu.Lock()
	put(&s.created, name, decodedResources{id: cur.Id, raw: raw, resources: *created.DeepCopy()})
	s.mu.Unlock()
	return created, true
}

func (s *podState) setResized(containerID string, r v1.ResourceRequirements) {
	s.mu.Lock()
	defer s.mu.Unlock()
	put(&s.resized, containerID, r)
}

func (s *podState) setResize(r resizeState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resize = r
}

func (s *podState) resizeStatus() resizeState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.resize
}

// resizeDiff reports whether want differs from have, and whether a resource that
// changed asks for a restart.
func resizeDiff(c *v1.Container, want, have v1.ResourceRequirements) (changed, restart bool) {
	for _, name := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
		// Cmp is how apimachinery's semantic equality compares quantities, without reflection.
		wr, hr, wl, hl := want.Requests[name], have.Requests[name], want.Limits[name], have.Limits[name]
		same := wr.Cmp(hr) == 0 && wl.Cmp(hl) == 0
		_, inWant := want.Limits[name]
		_, inHave := have.Limits[name]
		_, rInWant := want.Requests[name]
		_, rInHave := have.Requests[name]
		if same && inWant == inHave && rInWant == rInHave {
			continue
		}
		changed = true
		for _, p := range c.ResizePolicy {
			if p.ResourceName == name && p.RestartPolicy == v1.RestartContainer {
				restart = true
			}
		}
	}
	return changed, restart
}

// resizeFits reports why the pod's new requests cannot be had on this node: Infeasible
// when they exceed what the node has at all (upstream's reason), "" when they fit.
func (kl *Kubelet) resizeFits(pod *v1.Pod) (reason, message string) {
	var cpu, mem int64
	for _, c := range pod.Spec.Containers {
		cpu += c.Resources.Requests.Cpu().MilliValue()
		mem += c.Resources.Requests.Memory().Value()
	}
	m := kl.opts.Machine
	if m == nil {
		return "", ""
	}
	if capCPU := int64(m.CPUCores) * 1000; capCPU > 0 && cpu > capCPU {
		return v1.PodReasonInfeasible, fmt.Sprintf("Node didn't have enough capacity: cpu, requested: %d, capacity: %d", cpu, capCPU)
	}
	if m.MemoryBytes > 0 && mem > m.MemoryBytes {
		return v1.PodReasonInfeasible, fmt.Sprintf("Node didn't have enough capacity: memory, requested: %d, capacity: %d", mem, m.MemoryBytes)
	}
	return "", ""
}

// resize brings the running instance cur of c to the spec's cpu and memory. It returns
// true when it stopped the container for a restart (the next sync starts it again).
func (p *podSync) resize(ctx context.Context, c *v1.Container, cur *runtimeapi.ContainerStatus) (bool, error) {
	kl, st := p.kl, p.w.state
	want := cpuMemory(c.Resources)
	have, known := st.actualResources(cur)
	changed, restart := resizeDiff(c, want, have)
	if known && !changed {
		return false, nil
	}
	if reason, msg := kl.resizeFits(p.pod); reason != "" {
		st.setResize(resizeState{pending: reason, message: msg})
		return false, nil
	}
	if known && restart {
		msg := fmt.Sprintf("Container %s resize requires restart", c.Name)
		kl.recorder.Eventf(containerRef(p.pod, c.Name), v1.EventTypeNormal, "Killing", "%s", msg)
		if err := kl.runtime.StopContainer(ctx, cur.Id, gracePeriod(p.pod)); err != nil {
			return false, err
		}
		kl.workers.poke(p.w.uid)
		return true, nil
	}
	if err := kl.runtime.UpdateContainerResources(ctx, cur.Id, &runtimeapi.ContainerResources{Linux: kl.linuxResources(p.pod, c)}); err != nil {
		st.setResize(resizeState{inProgress: true, message: fmt.Sprintf("updating the resources of container %s: %v", c.Name, err)})
		return false, err
	}
	st.setResized(cur.Id, want)
	return false, nil
}
