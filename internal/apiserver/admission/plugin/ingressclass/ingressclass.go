// Package ingressclass is upstream's DefaultIngressClass plugin: a new Ingress naming
// no class (neither ingressClassName nor the legacy annotation) gets the default
// IngressClass.
package ingressclass

import (
	"context"

	networkingv1 "k8s.io/api/networking/v1"

	"mizzen/internal/apiserver/admission"
)

// PluginName is upstream's name.
const PluginName = "DefaultIngressClass"

const legacyClassAnnotation = "kubernetes.io/ingress.class"

var ingressClassesGVR = networkingv1.SchemeGroupVersion.WithResource("ingressclasses")

// Plugin is DefaultIngressClass.
type Plugin struct {
	admission.Ops
	reader admission.Reader
}

// New returns the plugin reading IngressClasses through r.
func New(r admission.Reader) *Plugin {
	return &Plugin{Ops: admission.Ops{admission.Create}, reader: r}
}

var _ admission.Mutator = (*Plugin)(nil)

// Admit sets the default class on an Ingress without one.
func (p *Plugin) Admit(ctx context.Context, a *admission.Attributes) error {
	ing, ok := a.Object.(*networkingv1.Ingress)
	if !ok || a.Subresource != "" || ing.Spec.IngressClassName != nil {
		return nil
	}
	if _, legacy := ing.Annotations[legacyClassAnnotation]; legacy {
		return nil
	}
	objs, err := p.reader.List(ctx, ingressClassesGVR, "")
	if err != nil {
		return err
	}
	var def *networkingv1.IngressClass
	for _, o := range objs {
		ic := o.(*networkingv1.IngressClass)
		if ic.Annotations[networkingv1.AnnotationIsDefaultIngressClass] != "true" {
			continue
		}
		if def == nil || ic.CreationTimestamp.After(def.CreationTimestamp.Time) ||
			(ic.CreationTimestamp.Equal(&def.CreationTimestamp) && ic.Name < def.Name) {
			def = ic
		}
	}
	if def != nil {
		name := def.Name
		ing.Spec.IngressClassName = &name
	}
	return nil
}
