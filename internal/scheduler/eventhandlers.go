package scheduler

import (
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/client-go/tools/cache"

	"mizzen/internal/scheduler/config"
	"mizzen/internal/scheduler/framework"
)

func podIsTerminated(pod *v1.Pod) bool {
	return pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed
}

func (s *Scheduler) responsibleFor(pod *v1.Pod) bool {
	name := pod.Spec.SchedulerName
	if name == "" {
		name = config.DefaultSchedulerName
	}
	_, ok := s.profiles[name]
	return ok
}

func asPod(obj interface{}) *v1.Pod {
	switch t := obj.(type) {
	case *v1.Pod:
		return t
	case cache.DeletedFinalStateUnknown:
		p, _ := t.Obj.(*v1.Pod)
		return p
	}
	return nil
}

func asNode(obj interface{}) *v1.Node {
	switch t := obj.(type) {
	case *v1.Node:
		return t
	case cache.DeletedFinalStateUnknown:
		n, _ := t.Obj.(*v1.Node)
		return n
	}
	return nil
}

// addHandler registers h on informer and keeps its registration, which Run waits on
// before scheduling.
func (s *Scheduler) addHandler(informer cache.SharedIndexInformer, h cache.ResourceEventHandler) error {
	reg, err := informer.AddEventHandler(h)
	if err == nil {
		s.handlers = append(s.handlers, reg)
	}
	return err
}

// addEventHandlers wires informers to the cache and queue. Pods split into assigned ones
// (cache) and pending ones of our profiles (queue); a pod moves between the two when bound.
func (s *Scheduler) addEventHandlers(pluginEvents map[string][]framework.ClusterEventWithHint) error {
	podInformer := s.factory.Core().V1().Pods().Informer()
	if err := s.addHandler(podInformer, cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) {
			pod := asPod(obj)
			if pod == nil {
				return
			}
			pod = s.priority.resolve(pod)
			if pod.Spec.NodeName != "" {
				s.assignedPodAdded(pod)
			} else if s.responsibleFor(pod) && pod.DeletionTimestamp == nil {
				s.queue.Add(pod)
			}
		},
		UpdateFunc: func(oldObj, newObj interface{}) {
			oldPod, newPod := asPod(oldObj), asPod(newObj)
			if oldPod == nil || newPod == nil {
				return
			}
			oldPod, newPod = s.priority.resolve(oldPod), s.priority.resolve(newPod)
			switch {
			case oldPod.Spec.NodeName == "" && newPod.Spec.NodeName != "":
				s.queue.Delete(newPod)
				s.assignedPodAdded(newPod)
			case newPod.Spec.NodeName != "":
				s.assignedPodUpdated(oldPod, newPod)
			case s.responsibleFor(newPod):
				if newPod.DeletionTimestamp != nil {
					s.queue.Delete(newPod)
					return
				}
				s.queue.Update(oldPod, newPod)
			}
		},
		DeleteFunc: func(obj interface{}) {
			pod := asPod(obj)
			if pod == nil {
				return
			}
			if pod.Spec.NodeName != "" {
				s.assignedPodDeleted(pod)
				return
			}
			s.queue.Delete(pod)
			// A deleted pending pod may have been a nominated preemptor holding room.
			s.queue.MoveAllToActiveOrBackoffQueue(framework.ClusterEvent{Resource: framework.Pod, ActionType: framework.Delete}, pod, nil, nil)
		},
	}); err != nil {
		return err
	}

	nodeInformer := s.factory.Core().V1().Nodes().Informer()
	if err := s.addHandler(nodeInformer, cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) {
			node := asNode(obj)
			if node == nil {
				return
			}
			s.cache.AddNode(node)
			s.queue.MoveAllToActiveOrBackoffQueue(framework.ClusterEvent{Resource: framework.Node, ActionType: framework.Add}, nil, node, nil)
		},
		UpdateFunc: func(oldObj, newObj interface{}) {
			oldNode, newNode := asNode(oldObj), asNode(newObj)
			if oldNode == nil || newNode == nil {
				return
			}
			s.cache.UpdateNode(oldNode, newNode)
			if actions := framework.NodeUpdateActions(oldNode, newNode); actions != 0 {
				s.queue.MoveAllToActiveOrBackoffQueue(framework.ClusterEvent{Resource: framework.Node, ActionType: actions}, oldNode, newNode, nil)
			}
		},
		DeleteFunc: func(obj interface{}) {
			if node := asNode(obj); node != nil {
				s.cache.RemoveNode(node)
			}
		},
	}); err != nil {
		return err
	}

	// Other resources only matter when some plugin registered events for them.
	wanted := map[framework.EventResource]bool{}
	for _, evs := range pluginEvents {
		for _, ev := range evs {
			wanted[ev.Event.Resource] = true
		}
	}
	if wanted[framework.WildCard] {
		for _, r := range []framework.EventResource{framework.PersistentVolume, framework.PersistentVolumeClaim, framework.StorageClass, framework.Namespace} {
			wanted[r] = true
		}
	}
	add := func(res framework.EventResource, informer cache.SharedIndexInformer) error {
		if !wanted[res] {
			return nil
		}
		return s.addHandler(informer, s.moveOnEvent(res))
	}
	if err := add(framework.PersistentVolume, s.factory.Core().V1().PersistentVolumes().Informer()); err != nil {
		return err
	}
	if err := add(framework.PersistentVolumeClaim, s.factory.Core().V1().PersistentVolumeClaims().Informer()); err != nil {
		return err
	}
	if err := add(framework.StorageClass, s.factory.Storage().V1().StorageClasses().Informer()); err != nil {
		return err
	}
	if err := add(framework.Namespace, s.factory.Core().V1().Namespaces().Informer()); err != nil {
		return err
	}
	return nil
}

// moveOnEvent turns add/update/delete of a resource into queue moves.
func (s *Scheduler) moveOnEvent(res framework.EventResource) cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) {
			s.queue.MoveAllToActiveOrBackoffQueue(framework.ClusterEvent{Resource: res, ActionType: framework.Add}, nil, obj, nil)
		},
		UpdateFunc: func(oldObj, newObj interface{}) {
			if sc, ok := newObj.(*storagev1.StorageClass); ok && equality.Semantic.DeepEqual(oldObj, sc) {
				return
			}
			s.queue.MoveAllToActiveOrBackoffQueue(framework.ClusterEvent{Resource: res, ActionType: framework.Update}, oldObj, newObj, nil)
		},
		DeleteFunc: func(obj interface{}) {
			s.queue.MoveAllToActiveOrBackoffQueue(framework.ClusterEvent{Resource: res, ActionType: framework.Delete}, obj, nil, nil)
		},
	}
}

func (s *Scheduler) assignedPodAdded(pod *v1.Pod) {
	if podIsTerminated(pod) {
		return
	}
	s.cache.AddPod(pod)
	s.queue.MoveAllToActiveOrBackoffQueue(framework.ClusterEvent{Resource: framework.AssignedPod, ActionType: framework.Add}, nil, pod, nil)
}

func (s *Scheduler) assignedPodUpdated(oldPod, newPod *v1.Pod) {
	if podIsTerminated(newPod) {
		// A finished pod frees its resources like a deleted one.
		if _, ok := s.cache.GetPod(newPod); ok {
			s.assignedPodDeleted(newPod)
		}
		return
	}
	s.cache.UpdatePod(oldPod, newPod)
	var actions framework.ActionType
	if !equality.Semantic.DeepEqual(oldPod.Labels, newPod.Labels) {
		actions |= framework.UpdatePodLabel
	}
	if framework.NewPodInfo(newPod).Requests.MilliCPU < framework.NewPodInfo(oldPod).Requests.MilliCPU ||
		framework.NewPodInfo(newPod).Requests.Memory < framework.NewPodInfo(oldPod).Requests.Memory {
		actions |= framework.UpdatePodScaleDown
	}
	if actions != 0 {
		s.queue.MoveAllToActiveOrBackoffQueue(framework.ClusterEvent{Resource: framework.AssignedPod, ActionType: actions}, oldPod, newPod, nil)
	}
}

func (s *Scheduler) assignedPodDeleted(pod *v1.Pod) {
	s.cache.RemovePod(pod)
	s.queue.MoveAllToActiveOrBackoffQueue(framework.ClusterEvent{Resource: framework.AssignedPod, ActionType: framework.Delete}, pod, nil, nil)
}
