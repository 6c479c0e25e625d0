package apiserver

import (
	"context"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var ingressClassesGVR = schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "ingressclasses"}

// defaultIngressClassAdmission is upstream's DefaultIngressClass admission plugin: an
// Ingress created with neither spec.ingressClassName nor the legacy
// kubernetes.io/ingress.class annotation gets the IngressClass annotated
// ingressclass.kubernetes.io/is-default-class "true" (the newest, if several are).
type defaultIngressClassAdmission struct{ s *Server }

func (a *defaultIngressClassAdmission) Admit(ctx context.Context, operation, resource, _ string, obj, _ runtime.Object) error {
	ing, ok := obj.(*networkingv1.Ingress)
	if !ok || resource != "ingresses" || operation != "create" || ing.Spec.IngressClassName != nil {
		return nil
	}
	if _, legacy := ing.Annotations["kubernetes.io/ingress.class"]; legacy {
		return nil
	}
	h := a.s.handlers[ingressClassesGVR]
	if h == nil {
		return nil
	}
	entries, _, err := a.s.cache.List(h.segment, h.listPrefix(""), nil)
	if err != nil {
		return err
	}
	var chosen *networkingv1.IngressClass
	for _, e := range entries {
		obj, err := h.present(e.Object)
		if err != nil {
			return err
		}
		c, ok := obj.(*networkingv1.IngressClass)
		if !ok || c.Annotations["ingressclass.kubernetes.io/is-default-class"] != "true" {
			continue
		}
		if chosen == nil || chosen.CreationTimestamp.Before(&c.CreationTimestamp) ||
			(chosen.CreationTimestamp.Equal(&c.CreationTimestamp) && c.Name < chosen.Name) {
			chosen = c
		}
	}
	if chosen != nil {
		name := chosen.Name
		ing.Spec.IngressClassName = &name
	}
	return nil
}
