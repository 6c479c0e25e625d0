// Package runtimeclass is upstream's RuntimeClass plugin: a pod naming a RuntimeClass
// gets the class's pod overhead and scheduling constraints (node selector and
// tolerations), and is refused when the class is missing or conflicts with it.
package runtimeclass

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"mizzen/internal/apiserver/admission"
)

// PluginName is upstream's name.
const PluginName = "RuntimeClass"

var runtimeClassesGVR = nodev1.SchemeGroupVersion.WithResource("runtimeclasses")

// Plugin is RuntimeClass.
type Plugin struct {
	admission.Ops
	reader admission.Reader
}

// New returns the plugin reading RuntimeClasses through r.
func New(r admission.Reader) *Plugin {
	return &Plugin{Ops: admission.Ops{admission.Create}, reader: r}
}

var (
	_ admission.Mutator   = (*Plugin)(nil)
	_ admission.Validator = (*Plugin)(nil)
)

func (p *Plugin) class(ctx context.Context, a *admission.Attributes) (*corev1.Pod, *nodev1.RuntimeClass, error) {
	pod, ok := a.Object.(*corev1.Pod)
	if !ok || a.Resource.GroupResource().String() != "pods" || a.Subresource != "" {
		return nil, nil, nil
	}
	if pod.Spec.RuntimeClassName == nil || *pod.Spec.RuntimeClassName == "" {
		return pod, nil, nil
	}
	obj, err := p.reader.Get(ctx, runtimeClassesGVR, "", *pod.Spec.RuntimeClassName)
	if apierrors.IsNotFound(err) {
		return nil, nil, admission.Forbiddenf(a, "pod rejected: RuntimeClass %q not found", *pod.Spec.RuntimeClassName)
	}
	if err != nil {
		return nil, nil, apierrors.NewInternalError(err)
	}
	return pod, obj.(*nodev1.RuntimeClass), nil
}

// Admit applies the class's overhead and scheduling to a new pod.
func (p *Plugin) Admit(ctx context.Context, a *admission.Attributes) error {
	pod, rc, err := p.class(ctx, a)
	if err != nil || rc == nil {
		return err
	}
	if rc.Overhead != nil {
		if pod.Spec.Overhead != nil && !apiequality.Semantic.DeepEqual(pod.Spec.Overhead, rc.Overhead.PodFixed) {
			return admission.Forbiddenf(a, "pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead")
		}
		pod.Spec.Overhead = rc.Overhead.PodFixed.DeepCopy()
	}
	if rc.Scheduling == nil {
		return nil
	}
	if sel := rc.Scheduling.NodeSelector; len(sel) > 0 {
		if pod.Spec.NodeSelector == nil {
			pod.Spec.NodeSelector = map[string]string{}
		}
		for k, v := range sel {
			if cur, ok := pod.Spec.NodeSelector[k]; ok && cur != v {
				return admission.Forbiddenf(a, "conflict: runtimeClass.scheduling.nodeSelector[%s] = %s; pod.spec.nodeSelector[%s] = %s", k, v, k, cur)
			}
			pod.Spec.NodeSelector[k] = v
		}
	}
	for _, t := range rc.Scheduling.Tolerations {
		dup := false
		for _, have := range pod.Spec.Tolerations {
			if apiequality.Semantic.DeepEqual(have, t) {
				dup = true
				break
			}
		}
		if !dup {
			pod.Spec.Tolerations = append(pod.Spec.Tolerations, t)
		}
	}
	return nil
}

// Validate checks a pod's overhead against its class once mutation is done.
func (p *Plugin) Validate(ctx context.Context, a *admission.Attributes) error {
	pod, rc, err := p.class(ctx, a)
	if err != nil || pod == nil {
		return err
	}
	if rc != nil && rc.Overhead != nil {
		if !apiequality.Semantic.DeepEqual(pod.Spec.Overhead, rc.Overhead.PodFixed) {
			return admission.Forbiddenf(a, "pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead")
		}
		return nil
	}
	if pod.Spec.Overhead != nil {
		return admission.NewForbidden(a, fmt.Errorf("pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead"))
	}
	return nil
}
