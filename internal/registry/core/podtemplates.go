package core

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"mizzen/internal/registry"
)

func podTemplatesResource() *registry.Resource {
	return &registry.Resource{
		GroupVersion: corev1.SchemeGroupVersion,
		Resource:     "podtemplates",
		Kind:         "PodTemplate",
		SingularName: "podtemplate",
		Namespaced:   true,
		New:          func() runtime.Object { return &corev1.PodTemplate{} },
		NewList:      func() runtime.Object { return &corev1.PodTemplateList{} },
		Strategy: strategy[*corev1.PodTemplate]{
			defaults: func(pt *corev1.PodTemplate) { DefaultPodSpec(&pt.Template.Spec) },
			validate: func(_ context.Context, pt *corev1.PodTemplate) field.ErrorList {
				return ValidatePodTemplateSpec(&pt.Template, field.NewPath("template"))
			},
		},
		// Upstream prints no AGE for pod templates.
		Printer: printerFor([]metav1.TableColumnDefinition{
			registry.NameColumn,
			column("Containers", "string", "Names of each container in the template."),
			column("Images", "string", "Images referenced by each container in the template."),
			column("Pod Labels", "string", "The labels for the pod template."),
		}, func(pt *corev1.PodTemplate) []interface{} {
			names, images := containerCells(pt.Template.Spec.Containers)
			return []interface{}{pt.Name, names, images, labels.FormatLabels(pt.Template.Labels)}
		}),
	}
}
