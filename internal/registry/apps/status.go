package apps

import (
	appsv1 "k8s.io/api/apps/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The status checks run when an update changes the status (the controllers' writes
// through <resource>/status): counts are never negative and never exceed the counts
// they are part of, as upstream's status validation words it.

// counts is a list of named status counts, checked in order.
type counts []struct {
	name  string
	value int64
}

func (c counts) nonnegative(fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for _, n := range c {
		allErrs = append(allErrs, validateNonnegative64(n.value, fldPath.Child(n.name))...)
	}
	return allErrs
}

func validateNonnegative64(v int64, fldPath *field.Path) field.ErrorList {
	if v < 0 {
		return field.ErrorList{field.Invalid(fldPath, v, "must be greater than or equal to 0")}
	}
	return nil
}

// notAbove reports count (named name) exceeding limit (named limitName).
func notAbove(value, limit int32, name, limitName string, fldPath *field.Path) field.ErrorList {
	if value > limit {
		return field.ErrorList{field.Invalid(fldPath.Child(name), value, "cannot be greater than "+limitName)}
	}
	return nil
}

func optional32(p *int32) int64 {
	if p == nil {
		return 0
	}
	return int64(*p)
}

func validateDeploymentStatus(s *appsv1.DeploymentStatus, old *appsv1.DeploymentStatus) field.ErrorList {
	if apiequality.Semantic.DeepEqual(s, old) {
		return nil
	}
	p := field.NewPath("status")
	allErrs := counts{
		{"observedGeneration", s.ObservedGeneration}, {"replicas", int64(s.Replicas)},
		{"updatedReplicas", int64(s.UpdatedReplicas)}, {"availableReplicas", int64(s.AvailableReplicas)},
		{"unavailableReplicas", int64(s.UnavailableReplicas)}, {"readyReplicas", int64(s.ReadyReplicas)},
	}.nonnegative(p)
	if s.TerminatingReplicas != nil {
		allErrs = append(allErrs, validateNonnegative64(int64(*s.TerminatingReplicas), p.Child("terminatingReplicas"))...)
	}
	if s.CollisionCount != nil {
		allErrs = append(allErrs, validateNonnegative64(int64(*s.CollisionCount), p.Child("collisionCount"))...)
	}
	allErrs = append(allErrs, notAbove(s.UpdatedReplicas, s.Replicas, "updatedReplicas", "status.replicas", p)...)
	allErrs = append(allErrs, notAbove(s.ReadyReplicas, s.Replicas, "readyReplicas", "status.replicas", p)...)
	allErrs = append(allErrs, notAbove(s.AvailableReplicas, s.Replicas, "availableReplicas", "status.replicas", p)...)
	allErrs = append(allErrs, notAbove(s.AvailableReplicas, s.ReadyReplicas, "availableReplicas", "readyReplicas", p)...)
	if old.CollisionCount != nil && optional32(s.CollisionCount) < int64(*old.CollisionCount) {
		allErrs = append(allErrs, field.Invalid(p.Child("collisionCount"), optional32(s.CollisionCount), "cannot be decremented"))
	}
	return allErrs
}

func validateReplicaSetStatus(s *appsv1.ReplicaSetStatus, old *appsv1.ReplicaSetStatus) field.ErrorList {
	if apiequality.Semantic.DeepEqual(s, old) {
		return nil
	}
	p := field.NewPath("status")
	allErrs := counts{
		{"replicas", int64(s.Replicas)}, {"fullyLabeledReplicas", int64(s.FullyLabeledReplicas)},
		{"readyReplicas", int64(s.ReadyReplicas)}, {"availableReplicas", int64(s.AvailableReplicas)},
		{"observedGeneration", s.ObservedGeneration},
	}.nonnegative(p)
	if s.TerminatingReplicas != nil {
		allErrs = append(allErrs, validateNonnegative64(int64(*s.TerminatingReplicas), p.Child("terminatingReplicas"))...)
	}
	allErrs = append(allErrs, notAbove(s.FullyLabeledReplicas, s.Replicas, "fullyLabeledReplicas", "status.replicas", p)...)
	allErrs = append(allErrs, notAbove(s.ReadyReplicas, s.Replicas, "readyReplicas", "status.replicas", p)...)
	allErrs = append(allErrs, notAbove(s.AvailableReplicas, s.Replicas, "availableReplicas", "status.replicas", p)...)
	allErrs = append(allErrs, notAbove(s.AvailableReplicas, s.ReadyReplicas, "availableReplicas", "readyReplicas", p)...)
	return allErrs
}

func validateStatefulSetStatus(s *appsv1.StatefulSetStatus, old *appsv1.StatefulSetStatus) field.ErrorList {
	if apiequality.Semantic.DeepEqual(s, old) {
		return nil
	}
	p := field.NewPath("status")
	allErrs := counts{
		{"replicas", int64(s.Replicas)}, {"readyReplicas", int64(s.ReadyReplicas)},
		{"currentReplicas", int64(s.CurrentReplicas)}, {"updatedReplicas", int64(s.UpdatedReplicas)},
		{"availableReplicas", int64(s.AvailableReplicas)}, {"observedGeneration", s.ObservedGeneration},
	}.nonnegative(p)
	if s.CollisionCount != nil {
		allErrs = append(allErrs, validateNonnegative64(int64(*s.CollisionCount), p.Child("collisionCount"))...)
	}
	allErrs = append(allErrs, notAbove(s.ReadyReplicas, s.Replicas, "readyReplicas", "status.replicas", p)...)
	allErrs = append(allErrs, notAbove(s.CurrentReplicas, s.Replicas, "currentReplicas", "status.replicas", p)...)
	allErrs = append(allErrs, notAbove(s.UpdatedReplicas, s.Replicas, "updatedReplicas", "status.replicas", p)...)
	allErrs = append(allErrs, notAbove(s.AvailableReplicas, s.Replicas, "availableReplicas", "status.replicas", p)...)
	allErrs = append(allErrs, notAbove(s.AvailableReplicas, s.ReadyReplicas, "availableReplicas", "readyReplicas", p)...)
	if old.CollisionCount != nil && optional32(s.CollisionCount) < int64(*old.CollisionCount) {
		allErrs = append(allErrs, field.Invalid(p.Child("collisionCount"), optional32(s.CollisionCount), "cannot be decremented"))
	}
	return allErrs
}

func validateDaemonSetStatus(s *appsv1.DaemonSetStatus, old *appsv1.DaemonSetStatus) field.ErrorList {
	if apiequality.Semantic.DeepEqual(s, old) {
		return nil
	}
	p := field.NewPath("status")
	allErrs := counts{
		{"currentNumberScheduled", int64(s.CurrentNumberScheduled)}, {"numberMisscheduled", int64(s.NumberMisscheduled)},
		{"desiredNumberScheduled", int64(s.DesiredNumberScheduled)}, {"numberReady", int64(s.NumberReady)},
		{"observedGeneration", s.ObservedGeneration}, {"updatedNumberScheduled", int64(s.UpdatedNumberScheduled)},
		{"numberAvailable", int64(s.NumberAvailable)}, {"numberUnavailable", int64(s.NumberUnavailable)},
	}.nonnegative(p)
	if s.CollisionCount != nil {
		allErrs = append(allErrs, validateNonnegative64(int64(*s.CollisionCount), p.Child("collisionCount"))...)
	}
	if old.CollisionCount != nil && optional32(s.CollisionCount) < int64(*old.CollisionCount) {
		allErrs = append(allErrs, field.Invalid(p.Child("collisionCount"), optional32(s.CollisionCount), "cannot be decremented"))
	}
	return allErrs
}
