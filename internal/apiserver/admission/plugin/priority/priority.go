// Package priority is upstream's Priority plugin: a new pod's priorityClassName
// resolves to its priority and preemption policy (the global default class, or 0, when
// it names none), and at most one PriorityClass may be the global default.
package priority

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"mizzen/internal/apiserver/admission"
)

// PluginName is upstream's name.
const PluginName = "Priority"

var priorityClassesGVR = schedulingv1.SchemeGroupVersion.WithResource("priorityclasses")

// Plugin is Priority.
type Plugin struct {
	admission.Ops
	reader admission.Reader

	// The global default class found in the list of the stamp (see
	// admission.ListVersioner; "" until a list was read), so a pod create need not
	// decode every class.
	mu       sync.Mutex
	defStamp string
	defClass *schedulingv1.PriorityClass
}

// New returns the plugin reading PriorityClasses through r.
func New(r admission.Reader) *Plugin {
	return &Plugin{Ops: admission.Ops{admission.Create, admission.Update}, reader: r}
}

var (
	_ admission.Mutator   = (*Plugin)(nil)
	_ admission.Validator = (*Plugin)(nil)
)

// Admit sets a pod's priority from its class.
func (p *Plugin) Admit(ctx context.Context, a *admission.Attributes) error {
	pod, ok := a.Object.(*corev1.Pod)
	if !ok || a.Resource.GroupResource().String() != "pods" || a.Subresource != "" {
		return nil
	}
	if a.Operation == admission.Update {
		// The priority was set at create; an update that leaves it out keeps it.
		if old, ok := a.OldObject.(*corev1.Pod); ok {
			if pod.Spec.Priority == nil {
				pod.Spec.Priority = old.Spec.Priority
			}
			if pod.Spec.PreemptionPolicy == nil {
				pod.Spec.PreemptionPolicy = old.Spec.PreemptionPolicy
			}
		}
		return nil
	}
	var priority int32
	var policy *corev1.PreemptionPolicy
	if pod.Spec.PriorityClassName == "" {
		def, err := p.defaultClass(ctx)
		if err != nil {
			return fmt.Errorf("failed to get default priority class: %v", err)
		}
		if def != nil {
			pod.Spec.PriorityClassName, priority, policy = def.Name, def.Value, def.PreemptionPolicy
		}
	} else {
		obj, err := p.reader.Get(ctx, priorityClassesGVR, "", pod.Spec.PriorityClassName)
		if apierrors.IsNotFound(err) {
			return admission.Forbiddenf(a, "no PriorityClass with name %v was found", pod.Spec.PriorityClassName)
		}
		if err != nil {
			return fmt.Errorf("failed to get PriorityClass with name %s: %v", pod.Spec.PriorityClassName, err)
		}
		pc := obj.(*schedulingv1.PriorityClass)
		priority, policy = pc.Value, pc.PreemptionPolicy
	}
	if pod.Spec.Priority != nil && *pod.Spec.Priority != priority {
		return admission.Forbiddenf(a, "the integer value of priority (%d) must not be provided in pod spec; priority admission controller computed %d from the given PriorityClass name", *pod.Spec.Priority, priority)
	}
	pod.Spec.Priority = &priority
	if policy != nil {
		if pod.Spec.PreemptionPolicy != nil && *pod.Spec.PreemptionPolicy != *policy {
			return admission.Forbiddenf(a, "the string value of PreemptionPolicy (%s) must not be provided in pod spec; priority admission controller computed %s from the given PriorityClass name", *pod.Spec.PreemptionPolicy, *policy)
		}
		pol := *policy
		pod.Spec.PreemptionPolicy = &pol
	}
	return nil
}

// Validate keeps a second PriorityClass from becoming the global default.
func (p *Plugin) Validate(ctx context.Context, a *admission.Attributes) error {
	pc, ok := a.Object.(*schedulingv1.PriorityClass)
	if !ok || a.Resource.GroupResource() != priorityClassesGVR.GroupResource() || a.Subresource != "" || !pc.GlobalDefault {
		return nil
	}
	def, err := p.defaultClass(ctx)
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	if def != nil && (a.Operation == admission.Create || def.Name != pc.Name) {
		return admission.Forbiddenf(a, "PriorityClass %v is already marked as default. Only one default can exist", def.Name)
	}
	return nil
}

// defaultClass is the global default PriorityClass with the highest value, or nil.
// Callers must not change it.
func (p *Plugin) defaultClass(ctx context.Context) (*schedulingv1.PriorityClass, error) {
	lv, versioned := p.reader.(admission.ListVersioner)
	var stamp string
	if versioned {
		var err error
		if stamp, err = lv.ListVersion(ctx, priorityClassesGVR, ""); err != nil {
			return nil, err
		}
		p.mu.Lock()
		def, known := p.defClass, stamp != "" && p.defStamp == stamp
		p.mu.Unlock()
		if known {
			return def, nil
		}
	}
	objs, err := p.reader.List(ctx, priorityClassesGVR, "")
	if err != nil {
		return nil, err
	}
	var def *schedulingv1.PriorityClass
	for _, o := range objs {
		pc := o.(*schedulingv1.PriorityClass)
		if pc.GlobalDefault && (def == nil || def.Value < pc.Value) {
			def = pc
		}
	}
	if versioned {
		// The list may be newer than the stamp; it is then still a valid answer for
		// it, and the stamp of the older list never comes back.
		p.mu.Lock()
		p.defStamp, p.defClass = stamp, def
		p.mu.Unlock()
	}
	return def, nil
}
