// Package scheduling describes the scheduling.k8s.io/v1 priorityclasses resource and
// the two system priority classes every cluster has.
package scheduling

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"mizzen/internal/registry"
)

const (
	// HighestUserDefinablePriority is the largest value a user's priority class may have.
	HighestUserDefinablePriority = int32(1000000000)
	// SystemCriticalPriority is the value of system-cluster-critical; system-node-critical
	// is 1000 above it.
	SystemCriticalPriority = 2 * HighestUserDefinablePriority

	// SystemPriorityClassPrefix starts the names reserved for the system classes.
	SystemPriorityClassPrefix = "system-"
	// SystemClusterCritical and SystemNodeCritical name the two system classes.
	SystemClusterCritical = SystemPriorityClassPrefix + "cluster-critical"
	SystemNodeCritical    = SystemPriorityClassPrefix + "node-critical"
)

// SystemPriorityClasses returns the priority classes every cluster has, as the server
// creates them at first start (before defaulting, like upstream's).
func SystemPriorityClasses() []*schedulingv1.PriorityClass {
	return []*schedulingv1.PriorityClass{
		{
			ObjectMeta:  metav1.ObjectMeta{Name: SystemNodeCritical},
			Value:       SystemCriticalPriority + 1000,
			Description: "Used for system critical pods that must not be moved from their current node.",
		},
		{
			ObjectMeta:  metav1.ObjectMeta{Name: SystemClusterCritical},
			Value:       SystemCriticalPriority,
			Description: "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary.",
		},
	}
}

// Resources returns the scheduling.k8s.io/v1 resources.
func Resources() []*registry.Resource {
	doc := schedulingv1.PriorityClass{}.SwaggerDoc()
	return []*registry.Resource{{
		GroupVersion: schedulingv1.SchemeGroupVersion,
		Resource:     "priorityclasses",
		Kind:         "PriorityClass",
		SingularName: "priorityclass",
		ShortNames:   []string{"pc"},
		New:          func() runtime.Object { return &schedulingv1.PriorityClass{} },
		NewList:      func() runtime.Object { return &schedulingv1.PriorityClassList{} },
		Strategy:     priorityClassStrategy{},
		Printer: &registry.Printer{
			Columns: []metav1.TableColumnDefinition{
				registry.NameColumn,
				{Name: "Value", Type: "integer", Description: doc["value"]},
				{Name: "Global-Default", Type: "boolean", Description: doc["globalDefault"]},
				registry.AgeColumn,
				{Name: "PreemptionPolicy", Type: "string", Description: doc["preemptionPolicy"]},
			},
			Row: func(obj runtime.Object) []interface{} {
				pc := obj.(*schedulingv1.PriorityClass)
				policy := ""
				if pc.PreemptionPolicy != nil {
					policy = string(*pc.PreemptionPolicy)
				}
				return []interface{}{pc.Name, int64(pc.Value), pc.GlobalDefault, registry.Age(pc.CreationTimestamp), policy}
			},
		},
	}}
}

type priorityClassStrategy struct{ registry.BaseStrategy }

func (priorityClassStrategy) Default(obj runtime.Object) {
	pc := obj.(*schedulingv1.PriorityClass)
	if pc.PreemptionPolicy == nil {
		policy := corev1.PreemptLowerPriority
		pc.PreemptionPolicy = &policy
	}
}

var supportedPreemptionPolicies = []string{string(corev1.PreemptLowerPriority), string(corev1.PreemptNever)}

func (priorityClassStrategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	pc := obj.(*schedulingv1.PriorityClass)
	var allErrs field.ErrorList
	if strings.HasPrefix(pc.Name, SystemPriorityClassPrefix) {
		if err := checkSystemPriorityClass(pc); err != nil {
			allErrs = append(allErrs, field.Forbidden(field.NewPath("metadata", "name"),
				"priority class names with '"+SystemPriorityClassPrefix+"' prefix are reserved for system use only. error: "+err.Error()))
		}
	} else if pc.Value > HighestUserDefinablePriority {
		allErrs = append(allErrs, field.Forbidden(field.NewPath("value"),
			fmt.Sprintf("maximum allowed value of a user defined priority is %v", HighestUserDefinablePriority)))
	}
	if p := pc.PreemptionPolicy; p != nil {
		switch *p {
		case corev1.PreemptLowerPriority, corev1.PreemptNever:
		case "":
			allErrs = append(allErrs, field.Required(field.NewPath("preemptionPolicy"), ""))
		default:
			allErrs = append(allErrs, field.NotSupported(field.NewPath("preemptionPolicy"), *p, supportedPreemptionPolicies))
		}
	}
	return allErrs
}

// ValidateUpdate checks only what may not change, as upstream does: a stored class
// was validated when it was created.
func (priorityClassStrategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	pc, oldPC := obj.(*schedulingv1.PriorityClass), old.(*schedulingv1.PriorityClass)
	var allErrs field.ErrorList
	if pc.Value != oldPC.Value {
		allErrs = append(allErrs, field.Forbidden(field.NewPath("value"), "may not be changed in an update."))
	}
	return append(allErrs, apimachineryvalidation.ValidateImmutableField(pc.PreemptionPolicy, oldPC.PreemptionPolicy, field.NewPath("preemptionPolicy"))...)
}

// checkSystemPriorityClass accepts a class with a reserved name only when it is
// exactly one of the system classes.
func checkSystemPriorityClass(pc *schedulingv1.PriorityClass) error {
	for _, system := range SystemPriorityClasses() {
		if system.Name != pc.Name {
			continue
		}
		if system.Value != pc.Value {
			return fmt.Errorf("value of %v PriorityClass must be %v", system.Name, system.Value)
		}
		if system.GlobalDefault != pc.GlobalDefault {
			return fmt.Errorf("globalDefault of %v PriorityClass must be %v", system.Name, system.GlobalDefault)
		}
		return nil
	}
	return fmt.Errorf("%v is not a known system priority class", pc.Name)
}
