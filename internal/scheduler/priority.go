package scheduler

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	schedulinglisters "k8s.io/client-go/listers/scheduling/v1"
)

// priorityResolver fills spec.priority from the pod's PriorityClass (or the global
// default class) when admission has not, so queue order and preemption still follow
// priority classes. Informer objects are never modified: a copy is returned.
type priorityResolver struct {
	classes schedulinglisters.PriorityClassLister
}

func (r priorityResolver) resolve(pod *v1.Pod) *v1.Pod {
	if pod.Spec.Priority != nil || r.classes == nil {
		return pod
	}
	var value *int32
	if name := pod.Spec.PriorityClassName; name != "" {
		if pc, err := r.classes.Get(name); err == nil {
			value = &pc.Value
		}
	} else if all, err := r.classes.List(labels.Everything()); err == nil {
		for _, pc := range all {
			if pc.GlobalDefault {
				value = &pc.Value
				break
			}
		}
	}
	if value == nil {
		return pod
	}
	out := pod.DeepCopy()
	v := *value
	out.Spec.Priority = &v
	return out
}
