package core

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"k8s.io/kubectl/pkg/util/qos"
)

// ApplyResize copies onto current (the stored pod) what a write through pods/resize may
// change: the cpu and memory resources and resize policies of the containers and of the
// restartable init containers (sidecars). Everything else in the request is dropped,
// as upstream's resize strategy drops it. The lists must line up by name.
func ApplyResize(current, requested *corev1.Pod) {
	copyResize := func(dst, src []corev1.Container, onlySidecars bool) {
		byName := map[string]*corev1.Container{}
		for i := range src {
			byName[src[i].Name] = &src[i]
		}
		for i := range dst {
			if onlySidecars && !isRestartableInit(&dst[i]) {
				continue
			}
			if s, ok := byName[dst[i].Name]; ok {
				dst[i].Resources = *s.Resources.DeepCopy()
				dst[i].ResizePolicy = append([]corev1.ContainerResizePolicy(nil), s.ResizePolicy...)
			}
		}
	}
	copyResize(current.Spec.Containers, requested.Spec.Containers, false)
	copyResize(current.Spec.InitContainers, requested.Spec.InitContainers, true)
}

func isRestartableInit(c *corev1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

// ValidatePodResize checks a resize (pod is the stored pod with ApplyResize done, old
// the stored pod before) as upstream does: not a static pod, the QoS class unchanged,
// valid resources, and requests and limits that exist may change but not go away.
func ValidatePodResize(pod, old *corev1.Pod) field.ErrorList {
	if _, ok := old.Annotations[corev1.MirrorPodAnnotationKey]; ok {
		return field.ErrorList{field.Forbidden(field.NewPath(""), "static pods cannot be resized")}
	}
	if old.Spec.OS != nil && old.Spec.OS.Name == corev1.Windows {
		return field.ErrorList{field.Forbidden(field.NewPath(""), "windows pods cannot be resized")}
	}
	specPath := field.NewPath("spec")
	var errs field.ErrorList
	if qos.ComputePodQOS(old) != qos.ComputePodQOS(pod) {
		errs = append(errs, field.Invalid(specPath, pod.Status.QOSClass, "Pod QOS Class may not change as a result of resizing"))
	}
	check := func(list, oldList []corev1.Container, listPath *field.Path) {
		for i := range list {
			if i >= len(oldList) {
				break
			}
			p := listPath.Index(i).Child("resources")
			errs = append(errs, validateResources(&list[i].Resources, p)...)
			errs = append(errs, validateContainerResize(&list[i].Resources, &oldList[i].Resources, p)...)
		}
	}
	check(pod.Spec.Containers, old.Spec.Containers, specPath.Child("containers"))
	check(pod.Spec.InitContainers, old.Spec.InitContainers, specPath.Child("initContainers"))
	return errs
}

// validateContainerResize: only cpu and memory change, and a request or limit a
// container had is not removed.
func validateContainerResize(r, old *corev1.ResourceRequirements, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, kind := range []struct {
		name       string
		list, prev corev1.ResourceList
	}{{"limits", r.Limits, old.Limits}, {"requests", r.Requests, old.Requests}} {
		for name := range kind.prev {
			if _, ok := kind.list[name]; !ok && (name == corev1.ResourceCPU || name == corev1.ResourceMemory) {
				errs = append(errs, field.Forbidden(fldPath.Child(kind.name).Key(string(name)), fmt.Sprintf("resource %s cannot be removed", kind.name)))
			}
		}
		for name, q := range kind.list {
			if name == corev1.ResourceCPU || name == corev1.ResourceMemory {
				continue
			}
			if prev, ok := kind.prev[name]; !ok || !equality.Semantic.DeepEqual(q, prev) {
				errs = append(errs, field.Forbidden(fldPath.Child(kind.name).Key(string(name)), "only cpu and memory resources are mutable"))
			}
		}
	}
	return errs
}
