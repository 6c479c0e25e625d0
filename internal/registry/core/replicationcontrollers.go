package core

import (
	"context"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"mizzen/internal/registry"
	"mizzen/internal/registry/validname"
)

func replicationControllersResource() *registry.Resource {
	spec, status := corev1.ReplicationControllerSpec{}.SwaggerDoc(), corev1.ReplicationControllerStatus{}.SwaggerDoc()
	return &registry.Resource{
		GroupVersion: corev1.SchemeGroupVersion,
		Resource:     "replicationcontrollers",
		Kind:         "ReplicationController",
		SingularName: "replicationcontroller",
		Namespaced:   true,
		ShortNames:   []string{"rc"},
		Categories:   []string{"all"},
		New:          func() runtime.Object { return &corev1.ReplicationController{} },
		NewList:      func() runtime.Object { return &corev1.ReplicationControllerList{} },
		Strategy: strategy[*corev1.ReplicationController]{
			defaults: defaultReplicationController,
			prepareCreate: func(_ context.Context, rc *corev1.ReplicationController) {
				rc.Status = corev1.ReplicationControllerStatus{}
			},
			validate: validateReplicationController,
		},
		Fields: func(obj runtime.Object) fields.Set {
			rc, ok := obj.(*corev1.ReplicationController)
			if !ok {
				return nil
			}
			return fields.Set{"status.replicas": strconv.Itoa(int(rc.Status.Replicas))}
		},
		Printer: printerFor([]metav1.TableColumnDefinition{
			registry.NameColumn,
			column("Desired", "integer", spec["replicas"]),
			column("Current", "integer", status["replicas"]),
			column("Ready", "integer", status["readyReplicas"]),
			registry.AgeColumn,
			wideColumn("Containers", "string", "Names of each container in the template."),
			wideColumn("Images", "string", "Images referenced by each container in the template."),
			wideColumn("Selector", "string", spec["selector"]),
		}, replicationControllerRow),
		HasStatus: true,
		Scale: &registry.ScaleAdapter{
			Get: func(obj runtime.Object) (int32, int32, string) {
				rc, ok := obj.(*corev1.ReplicationController)
				if !ok {
					return 0, 0, ""
				}
				return replicasOf(rc), rc.Status.Replicas, labels.SelectorFromSet(rc.Spec.Selector).String()
			},
			Set: func(obj runtime.Object, replicas int32) {
				if rc, ok := obj.(*corev1.ReplicationController); ok {
					rc.Spec.Replicas = &replicas
				}
			},
		},
	}
}

func replicasOf(rc *corev1.ReplicationController) int32 {
	if rc.Spec.Replicas == nil {
		return 1
	}
	return *rc.Spec.Replicas
}

// defaultReplicationController takes the selector, and the controller's labels when
// it has none, from the pod template's labels, and defaults replicas to 1.
func defaultReplicationController(rc *corev1.ReplicationController) {
	if t := rc.Spec.Template; t != nil {
		if len(t.Labels) > 0 {
			if len(rc.Spec.Selector) == 0 {
				rc.Spec.Selector = t.Labels
			}
			if len(rc.Labels) == 0 {
				rc.Labels = t.Labels
			}
		}
		DefaultPodSpec(&t.Spec)
	}
	if rc.Spec.Replicas == nil {
		rc.Spec.Replicas = ptrTo(int32(1))
	}
}

func validateReplicationController(_ context.Context, rc *corev1.ReplicationController) field.ErrorList {
	specPath := field.NewPath("spec")
	spec := &rc.Spec
	var errs field.ErrorList
	errs = append(errs, apivalidation.ValidateNonnegativeField(int64(replicasOf(rc)), specPath.Child("replicas"))...)
	errs = append(errs, apivalidation.ValidateNonnegativeField(int64(spec.MinReadySeconds), specPath.Child("minReadySeconds"))...)

	selectorPath := specPath.Child("selector")
	if len(spec.Selector) == 0 {
		errs = append(errs, field.Required(selectorPath, ""))
	} else {
		errs = append(errs, validname.ValidateLabels(spec.Selector, selectorPath)...)
	}

	templatePath := specPath.Child("template")
	t := spec.Template
	if t == nil {
		return append(errs, field.Required(templatePath, ""))
	}
	if len(spec.Selector) > 0 && !labels.SelectorFromSet(spec.Selector).Matches(labels.Set(t.Labels)) {
		errs = append(errs, field.Invalid(templatePath.Child("metadata", "labels"), t.Labels, "`selector` does not match template `labels`"))
	}
	errs = append(errs, ValidatePodTemplateSpec(t, templatePath)...)
	if t.Spec.RestartPolicy != corev1.RestartPolicyAlways {
		errs = append(errs, field.NotSupported(templatePath.Child("spec", "restartPolicy"), t.Spec.RestartPolicy, []corev1.RestartPolicy{corev1.RestartPolicyAlways}))
	}
	if t.Spec.ActiveDeadlineSeconds != nil {
		errs = append(errs, field.Forbidden(templatePath.Child("spec", "activeDeadlineSeconds"), "activeDeadlineSeconds in ReplicationController is not Supported"))
	}
	return errs
}

func replicationControllerRow(rc *corev1.ReplicationController) []interface{} {
	var containers []corev1.Container
	if rc.Spec.Template != nil {
		containers = rc.Spec.Template.Spec.Containers
	}
	names, images := containerCells(containers)
	return []interface{}{rc.Name, int64(replicasOf(rc)), int64(rc.Status.Replicas), int64(rc.Status.ReadyReplicas),
		registry.Age(rc.CreationTimestamp), names, images, labels.FormatLabels(rc.Spec.Selector)}
}
