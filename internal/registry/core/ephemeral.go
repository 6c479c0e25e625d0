package core

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ValidateEphemeralContainersUpdate checks a write through pods/ephemeralcontainers, the
// only way to change spec.ephemeralContainers: existing ones stay as they are, new ones
// are valid containers without the fields an ephemeral container may not have, with
// names unique in the pod. pod and old are defaulted.
func ValidateEphemeralContainersUpdate(pod, old *corev1.Pod) field.ErrorList {
	fldPath := field.NewPath("spec", "ephemeralContainers")
	var errs field.ErrorList
	current := map[string]*corev1.EphemeralContainer{}
	for i := range pod.Spec.EphemeralContainers {
		current[pod.Spec.EphemeralContainers[i].Name] = &pod.Spec.EphemeralContainers[i]
	}
	existing := sets.New[string]()
	for i, oc := range old.Spec.EphemeralContainers {
		existing.Insert(oc.Name)
		nc, ok := current[oc.Name]
		switch {
		case !ok:
			errs = append(errs, field.Forbidden(fldPath, fmt.Sprintf("existing ephemeral containers %q may not be removed", oc.Name)))
		case !equality.Semantic.DeepEqual(oc, *nc):
			errs = append(errs, field.Forbidden(fldPath.Index(i), fmt.Sprintf("existing ephemeral containers %q may not be changed", oc.Name)))
		}
	}
	taken := sets.New[string]()
	regular := sets.New[string]()
	for _, c := range pod.Spec.Containers {
		taken.Insert(c.Name)
		regular.Insert(c.Name)
	}
	for _, c := range pod.Spec.InitContainers {
		taken.Insert(c.Name)
	}
	volumes := sets.New[string]()
	for _, v := range pod.Spec.Volumes {
		volumes.Insert(v.Name)
	}
	for i := range pod.Spec.EphemeralContainers {
		ec := &pod.Spec.EphemeralContainers[i]
		idx := fldPath.Index(i)
		errs = append(errs, validateContainerName(ec.Name, taken, idx.Child("name"))...)
		taken.Insert(ec.Name)
		if existing.Has(ec.Name) {
			continue
		}
		c := corev1.Container(ec.EphemeralContainerCommon)
		errs = append(errs, validateContainer(&c, volumes, idx)...)
		for _, f := range []struct {
			name string
			set  bool
		}{
			{"ports", len(c.Ports) > 0}, {"livenessProbe", c.LivenessProbe != nil}, {"readinessProbe", c.ReadinessProbe != nil},
			{"startupProbe", c.StartupProbe != nil}, {"lifecycle", c.Lifecycle != nil}, {"resizePolicy", len(c.ResizePolicy) > 0},
			{"restartPolicy", c.RestartPolicy != nil},
		} {
			if f.set {
				errs = append(errs, field.Forbidden(idx.Child(f.name), "cannot be set for an Ephemeral Container"))
			}
		}
		if len(c.Resources.Limits)+len(c.Resources.Requests) > 0 {
			errs = append(errs, field.Forbidden(idx.Child("resources"), "cannot be set for an Ephemeral Container"))
		}
		for j, m := range c.VolumeMounts {
			if m.SubPath != "" {
				errs = append(errs, field.Forbidden(idx.Child("volumeMounts").Index(j).Child("subPath"), "cannot be set for an Ephemeral Container"))
			}
		}
		if t := ec.TargetContainerName; t != "" && !regular.Has(t) {
			errs = append(errs, field.NotFound(idx.Child("targetContainerName"), t))
		}
	}
	return errs
}
