package core

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/kubectl/pkg/util/qos"
	netutils "k8s.io/utils/net"

	"mizzen/internal/podrestart"
	"mizzen/internal/registry"
	"mizzen/internal/registry/validname"
)

func podsResource() *registry.Resource {
	return &registry.Resource{
		GroupVersion: corev1.SchemeGroupVersion,
		Resource:     "pods",
		Kind:         "Pod",
		SingularName: "pod",
		Namespaced:   true,
		ShortNames:   []string{"po"},
		Categories:   []string{"all"},
		New:          func() runtime.Object { return &corev1.Pod{} },
		NewList:      func() runtime.Object { return &corev1.PodList{} },
		Strategy: statusStrategy[*corev1.Pod]{
			strategy: strategy[*corev1.Pod]{
				defaults: func(pod *corev1.Pod) {
					defaultPod(pod)
					normalizePodIPs(&pod.Status)
				},
				prepareCreate:  preparePodForCreate,
				prepareUpdate:  preparePodForUpdate,
				validate:       validatePod,
				validateCreate: validatePodCreate,
				validateUpdate: validatePodUpdate,
			},
			validateStatus: validatePodStatusUpdate,
		},
		Fields:    podFields,
		Printer:   podPrinter(),
		HasStatus: true,
	}
}

// preparePodForCreate resets the status a client sent: a new pod is Pending with its
// QoS class computed from the requests and limits, as upstream does.
func preparePodForCreate(_ context.Context, pod *corev1.Pod) {
	pod.Status = corev1.PodStatus{Phase: corev1.PodPending}
	pod.Status.QOSClass = qos.ComputePodQOS(pod)
	if len(pod.Spec.SchedulingGates) > 0 {
		pod.Status.Conditions = []corev1.PodCondition{{
			Type:    corev1.PodScheduled,
			Status:  corev1.ConditionFalse,
			Reason:  corev1.PodReasonSchedulingGated,
			Message: "Scheduling is blocked due to non-empty scheduling gates",
		}}
	}
}

// preparePodForUpdate makes the IP fields consistent (status updates skip Default)
// and, as upstream does for old kubelets that dropped it, keeps the QoS class computed
// at creation when a status write leaves it out.
func preparePodForUpdate(_ context.Context, pod, old *corev1.Pod) {
	normalizePodIPs(&pod.Status)
	if pod.Status.QOSClass == "" {
		pod.Status.QOSClass = old.Status.QOSClass
	}
}

// normalizePodIPs keeps podIP and podIPs (and hostIP and hostIPs) consistent, as
// upstream's v1 conversion does: the single field wins when both are set and differ,
// and each fills the other when only one is set.
func normalizePodIPs(status *corev1.PodStatus) {
	switch {
	case status.PodIP != "" && (len(status.PodIPs) == 0 || status.PodIPs[0].IP != status.PodIP):
		status.PodIPs = []corev1.PodIP{{IP: status.PodIP}}
	case status.PodIP == "" && len(status.PodIPs) > 0:
		status.PodIP = status.PodIPs[0].IP
	}
	switch {
	case status.HostIP != "" && (len(status.HostIPs) == 0 || status.HostIPs[0].IP != status.HostIP):
		status.HostIPs = []corev1.HostIP{{IP: status.HostIP}}
	case status.HostIP == "" && len(status.HostIPs) > 0:
		status.HostIP = status.HostIPs[0].IP
	}
}

func validatePod(_ context.Context, pod *corev1.Pod) field.ErrorList {
	specPath := field.NewPath("spec")
	errs := validatePodSpec(&pod.Spec, true, specPath)
	for i, c := range pod.Spec.Containers {
		if c.Image != strings.TrimSpace(c.Image) {
			errs = append(errs, field.Invalid(specPath.Child("containers").Index(i).Child("image"), c.Image, "must not have leading or trailing whitespace"))
		}
	}
	return errs
}

func validatePodCreate(_ context.Context, pod *corev1.Pod) field.ErrorList {
	specPath := field.NewPath("spec")
	var errs field.ErrorList
	if len(pod.Spec.EphemeralContainers) > 0 {
		errs = append(errs, field.Forbidden(specPath.Child("ephemeralContainers"), "cannot be set on create"))
	}
	if pod.Spec.NodeName != "" && len(pod.Spec.SchedulingGates) > 0 {
		errs = append(errs, field.Forbidden(specPath.Child("nodeName"), "cannot be set until all schedulingGates have been cleared"))
	}
	return errs
}

// validatePodStatusUpdate checks a write through pods/status as upstream's
// ValidatePodStatusUpdate does (the parts mizzen implements): the spec is the stored
// one there, so only what a kubelet or scheduler reports is checked.
func validatePodStatusUpdate(_ context.Context, pod, old *corev1.Pod) field.ErrorList {
	fldPath := field.NewPath("status")
	var errs field.ErrorList
	if n := pod.Status.NominatedNodeName; n != old.Status.NominatedNodeName && n != "" {
		for _, msg := range validname.NameIsDNSSubdomain(n, false) {
			errs = append(errs, field.Invalid(fldPath.Child("nominatedNodeName"), n, msg))
		}
		// Binding clears the nomination (ClearingNominatedNodeNameAfterBinding, on
		// since 1.35): a bound pod may not get one again.
		if old.Spec.NodeName != "" {
			errs = append(errs, field.Forbidden(fldPath.Child("nominatedNodeName"), "may not be set on pods that are already bound to a node"))
		}
	}
	errs = append(errs, validatePodConditions(pod.Status.Conditions, fldPath.Child("conditions"))...)
	if pod.Status.ObservedGeneration < 0 {
		errs = append(errs, field.Invalid(fldPath.Child("observedGeneration"), pod.Status.ObservedGeneration, "must be a non-negative integer"))
	}
	errs = append(errs, apivalidation.ValidateImmutableField(pod.Status.QOSClass, old.Status.QOSClass, fldPath.Child("qosClass"))...)
	errs = append(errs, validateStateTransitions(pod.Status.ContainerStatuses, old.Status.ContainerStatuses, fldPath.Child("containerStatuses"), &old.Spec, old.Spec.Containers)...)
	errs = append(errs, validateStateTransitions(pod.Status.InitContainerStatuses, old.Status.InitContainerStatuses, fldPath.Child("initContainerStatuses"), &old.Spec, old.Spec.InitContainers)...)
	errs = append(errs, validateStateTransitions(pod.Status.EphemeralContainerStatuses, old.Status.EphemeralContainerStatuses, fldPath.Child("ephemeralContainerStatuses"), &old.Spec, nil)...)
	errs = append(errs, validatePodIPs(&pod.Status, &old.Status)...)
	errs = append(errs, validateHostIPs(&pod.Status, &old.Status)...)
	return errs
}

// validateStateTransitions refuses a status that takes a terminated container out of
// the terminated state when it would not be restarted, as upstream's
// ValidateContainerStateTransition with container restart rules (on since 1.35);
// specContainers is nil for ephemeral containers.
func validateStateTransitions(statuses, oldStatuses []corev1.ContainerStatus, fldPath *field.Path, spec *corev1.PodSpec, specContainers []corev1.Container) field.ErrorList {
	var errs field.ErrorList
	for i, oldStatus := range oldStatuses {
		if oldStatus.State.Terminated == nil {
			continue
		}
		for _, status := range statuses {
			if status.Name != oldStatus.Name || status.State.Terminated != nil {
				continue
			}
			if !podrestart.MayLeaveTerminated(spec, specContainers, oldStatus.Name, oldStatus.State.Terminated.ExitCode) {
				errs = append(errs, field.Forbidden(fldPath.Index(i).Child("state"), "may not be transitioned to non-terminated state"))
			}
			break
		}
	}
	return errs
}

// validatePodConditions is upstream's: a condition's observedGeneration is not
// negative, and a type other than the system's is a qualified name (the path's
// "Type" is upstream's spelling).
func validatePodConditions(conditions []corev1.PodCondition, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, c := range conditions {
		if c.ObservedGeneration < 0 {
			errs = append(errs, field.Invalid(fldPath.Index(i).Child("observedGeneration"), c.ObservedGeneration, "must be a non-negative integer"))
		}
		switch c.Type {
		case corev1.PodScheduled, corev1.PodReady, corev1.PodInitialized:
			continue
		}
		for _, msg := range validname.IsQualifiedName(string(c.Type)) {
			errs = append(errs, field.Invalid(fldPath.Index(i).Child("Type"), string(c.Type), msg))
		}
	}
	return errs
}

// validatePodIPs is upstream's: new addresses must be valid (ones already stored may
// stay), at most one of each family, and podIP must be podIPs[0].
func validatePodIPs(status, old *corev1.PodStatus) field.ErrorList {
	fldPath := field.NewPath("status", "podIPs")
	errs := validateIPList(fldPath, addresses(status.PodIPs), addresses(old.PodIPs), status.PodIPs)
	switch {
	case (status.PodIP != "") != (len(status.PodIPs) > 0):
		errs = append(errs, field.Invalid(fldPath, status.PodIPs, "podIP and podIPs must either both be set or both be unset"))
	case len(status.PodIPs) > 0 && status.PodIP != status.PodIPs[0].IP:
		errs = append(errs, field.Invalid(fldPath.Index(0).Child("ip"), status.PodIPs[0].IP, "must be equal to `podIP`"))
	}
	return errs
}

// validateHostIPs is validatePodIPs for the node's addresses.
func validateHostIPs(status, old *corev1.PodStatus) field.ErrorList {
	if len(status.HostIPs) == 0 {
		return nil
	}
	fldPath := field.NewPath("status", "hostIPs")
	var errs field.ErrorList
	if status.HostIP != status.HostIPs[0].IP {
		errs = append(errs, field.Invalid(fldPath.Index(0).Child("ip"), status.HostIPs[0].IP, "must be equal to `hostIP`"))
	}
	return append(errs, validateIPList(fldPath, addresses(status.HostIPs), addresses(old.HostIPs), status.HostIPs)...)
}

// addresses are the IP strings of a pod's or its node's address list.
func addresses[T corev1.PodIP | corev1.HostIP](list []T) []string {
	ips := make([]string, len(list))
	for i, ip := range list {
		ips[i] = corev1.PodIP(ip).IP
	}
	return ips
}

// validateIPList requires each of ips to be a valid address or one of oldIPs, and
// more than one to be a dual-stack pair; list is the field's value for the message.
func validateIPList(fldPath *field.Path, ips, oldIPs []string, list any) field.ErrorList {
	var errs field.ErrorList
	for i, ip := range ips {
		errs = append(errs, validation.IsValidIPForLegacyField(fldPath.Index(i), ip, true, oldIPs)...)
	}
	if len(ips) > 1 {
		dualStack, err := netutils.IsDualStackIPStrings(ips)
		if err != nil {
			errs = append(errs, field.InternalError(fldPath, fmt.Errorf("failed to check for dual stack with error:%v", err)))
		}
		if !dualStack || len(ips) > 2 {
			errs = append(errs, field.Invalid(fldPath, list, "may specify no more than one IP for each IP family"))
		}
	}
	return errs
}

// podUpdatableFields is how upstream's error lists what a pod update may change.
const podUpdatableFields = "`spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)"

// validatePodUpdate allows only the spec changes upstream allows on a running pod:
// images, a shorter active deadline, added tolerations, removed scheduling gates.
func validatePodUpdate(_ context.Context, pod, old *corev1.Pod) field.ErrorList {
	specPath := field.NewPath("spec")
	var errs field.ErrorList

	if pod.Spec.ActiveDeadlineSeconds != nil {
		v := *pod.Spec.ActiveDeadlineSeconds
		if v < 0 || v > math.MaxInt32 {
			return append(errs, field.Invalid(specPath.Child("activeDeadlineSeconds"), v, validation.InclusiveRangeError(0, math.MaxInt32)))
		}
		if old.Spec.ActiveDeadlineSeconds != nil && *old.Spec.ActiveDeadlineSeconds < v {
			return append(errs, field.Invalid(specPath.Child("activeDeadlineSeconds"), v, "must be less than or equal to previous value"))
		}
	} else if old.Spec.ActiveDeadlineSeconds != nil {
		errs = append(errs, field.Invalid(specPath.Child("activeDeadlineSeconds"), pod.Spec.ActiveDeadlineSeconds, "must not update from a positive integer to nil value"))
	}
	errs = append(errs, validateTolerationsUpdate(pod.Spec.Tolerations, old.Spec.Tolerations, specPath.Child("tolerations"))...)
	errs = append(errs, validateSchedulingGatesUpdate(pod.Spec.SchedulingGates, old.Spec.SchedulingGates, specPath.Child("schedulingGates"))...)

	// Carry the allowed changes over to a copy of the old spec; anything else that
	// differs is a forbidden change.
	allowed := old.Spec.DeepCopy()
	copyImages(allowed.Containers, pod.Spec.Containers)
	copyImages(allowed.InitContainers, pod.Spec.InitContainers)
	allowed.ActiveDeadlineSeconds = pod.Spec.ActiveDeadlineSeconds
	allowed.Tolerations = pod.Spec.Tolerations
	allowed.SchedulingGates = pod.Spec.SchedulingGates
	if g := old.Spec.TerminationGracePeriodSeconds; g != nil && *g < 0 &&
		pod.Spec.TerminationGracePeriodSeconds != nil && *pod.Spec.TerminationGracePeriodSeconds == 1 {
		allowed.TerminationGracePeriodSeconds = pod.Spec.TerminationGracePeriodSeconds
	}
	if !equality.Semantic.DeepEqual(*allowed, pod.Spec) {
		errs = append(errs, field.Forbidden(specPath, "pod updates may not change fields other than "+podUpdatableFields))
	}
	return errs
}

// copyImages copies each container's image from src to dst when the lists line up.
func copyImages(dst, src []corev1.Container) {
	if len(dst) != len(src) {
		return
	}
	for i := range dst {
		dst[i].Image = src[i].Image
	}
}

// validateTolerationsUpdate requires every old toleration to survive, except that
// its tolerationSeconds may change.
func validateTolerationsUpdate(tolerations, old []corev1.Toleration, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, o := range old {
		found := false
		for _, t := range tolerations {
			if t.Key == o.Key && t.Operator == o.Operator && t.Value == o.Value && t.Effect == o.Effect {
				found = true
				break
			}
		}
		if !found {
			errs = append(errs, field.Forbidden(fldPath, "existing toleration can not be modified except its tolerationSeconds"))
			break
		}
	}
	return errs
}

// validateSchedulingGatesUpdate allows removing scheduling gates but not adding them.
func validateSchedulingGatesUpdate(gates, old []corev1.PodSchedulingGate, fldPath *field.Path) field.ErrorList {
	had := map[string]bool{}
	for _, g := range old {
		had[g.Name] = true
	}
	for _, g := range gates {
		if !had[g.Name] {
			return field.ErrorList{field.Forbidden(fldPath, "only deletion is allowed, but found new scheduling gate '"+g.Name+"'")}
		}
	}
	return nil
}

func podFields(obj runtime.Object) fields.Set {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil
	}
	podIP := ""
	if len(pod.Status.PodIPs) > 0 {
		podIP = pod.Status.PodIPs[0].IP
	}
	return fields.Set{
		"spec.nodeName":            pod.Spec.NodeName,
		"spec.restartPolicy":       string(pod.Spec.RestartPolicy),
		"spec.schedulerName":       pod.Spec.SchedulerName,
		"spec.serviceAccountName":  pod.Spec.ServiceAccountName,
		"spec.hostNetwork":         strconv.FormatBool(pod.Spec.HostNetwork),
		"status.phase":             string(pod.Status.Phase),
		"status.podIP":             podIP,
		"status.nominatedNodeName": pod.Status.NominatedNodeName,
	}
}

func podPrinter() *registry.Printer {
	return printerFor([]metav1.TableColumnDefinition{
		registry.NameColumn,
		column("Ready", "string", "The aggregate readiness state of this pod for accepting traffic."),
		column("Status", "string", "The aggregate status of the containers in this pod."),
		column("Restarts", "string", "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted."),
		registry.AgeColumn,
		wideColumn("IP", "string", corev1.PodStatus{}.SwaggerDoc()["podIP"]),
		wideColumn("Node", "string", corev1.PodSpec{}.SwaggerDoc()["nodeName"]),
		wideColumn("Nominated Node", "string", corev1.PodStatus{}.SwaggerDoc()["nominatedNodeName"]),
		wideColumn("Readiness Gates", "string", corev1.PodSpec{}.SwaggerDoc()["readinessGates"]),
	}, podRow)
}

func isSidecar(c *corev1.Container) bool {
	return c != nil && c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

func podConditionTrue(status *corev1.PodStatus, t corev1.PodConditionType) bool {
	for _, c := range status.Conditions {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podRow computes READY, STATUS and RESTARTS the way upstream's pod printer does:
// init containers first (Init:N/M, Init:<reason>), then app containers from last to
// first, then Terminating/Unknown for pods being deleted.
func podRow(pod *corev1.Pod) []interface{} {
	total := len(pod.Spec.Containers)
	ready := 0
	restarts, sidecarRestarts := 0, 0
	var lastRestart, lastSidecarRestart metav1.Time

	reason := string(pod.Status.Phase)
	if pod.Status.Reason != "" {
		reason = pod.Status.Reason
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Reason == corev1.PodReasonSchedulingGated {
			reason = corev1.PodReasonSchedulingGated
		}
	}

	initSpecs := map[string]*corev1.Container{}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		initSpecs[c.Name] = c
		if isSidecar(c) {
			total++
		}
	}
	later := func(t *metav1.Time, cs corev1.ContainerStatus) {
		if term := cs.LastTerminationState.Terminated; term != nil && t.Before(&term.FinishedAt) {
			*t = term.FinishedAt
		}
	}

	initializing := false
	for i, cs := range pod.Status.InitContainerStatuses {
		restarts += int(cs.RestartCount)
		later(&lastRestart, cs)
		sidecar := isSidecar(initSpecs[cs.Name])
		if sidecar {
			sidecarRestarts += int(cs.RestartCount)
			later(&lastSidecarRestart, cs)
		}
		term, wait := cs.State.Terminated, cs.State.Waiting
		switch {
		case term != nil && term.ExitCode == 0:
			continue
		case sidecar && cs.Started != nil && *cs.Started:
			if cs.Ready {
				ready++
			}
			continue
		case term != nil:
			switch {
			case term.Reason != "":
				reason = "Init:" + term.Reason
			case term.Signal != 0:
				reason = fmt.Sprintf("Init:Signal:%d", term.Signal)
			default:
				reason = fmt.Sprintf("Init:ExitCode:%d", term.ExitCode)
			}
		case wait != nil && wait.Reason != "" && wait.Reason != "PodInitializing":
			reason = "Init:" + wait.Reason
		default:
			reason = fmt.Sprintf("Init:%d/%d", i, len(pod.Spec.InitContainers))
		}
		initializing = true
		break
	}

	if !initializing || podConditionTrue(&pod.Status, corev1.PodInitialized) {
		restarts, lastRestart = sidecarRestarts, lastSidecarRestart
		hasRunning := false
		for i := len(pod.Status.ContainerStatuses) - 1; i >= 0; i-- {
			cs := pod.Status.ContainerStatuses[i]
			restarts += int(cs.RestartCount)
			later(&lastRestart, cs)
			term, wait := cs.State.Terminated, cs.State.Waiting
			switch {
			case wait != nil && wait.Reason != "":
				reason = wait.Reason
			case term != nil && term.Reason != "":
				reason = term.Reason
			case term != nil && term.Signal != 0:
				reason = fmt.Sprintf("Signal:%d", term.Signal)
			case term != nil:
				reason = fmt.Sprintf("ExitCode:%d", term.ExitCode)
			case cs.Ready && cs.State.Running != nil:
				hasRunning = true
				ready++
			}
		}
		// A pod whose last container completed but another still runs is not done.
		if reason == "Completed" && hasRunning {
			if podConditionTrue(&pod.Status, corev1.PodReady) {
				reason = "Running"
			} else {
				reason = "NotReady"
			}
		}
	}

	terminal := pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
	if pod.DeletionTimestamp != nil && pod.Status.Reason == "NodeLost" {
		reason = "Unknown"
	} else if pod.DeletionTimestamp != nil && !terminal {
		reason = "Terminating"
	}

	restartCell := strconv.Itoa(restarts)
	if restarts != 0 && !lastRestart.IsZero() {
		restartCell = fmt.Sprintf("%d (%s ago)", restarts, registry.Age(lastRestart))
	}

	podIP := ""
	if len(pod.Status.PodIPs) > 0 {
		podIP = pod.Status.PodIPs[0].IP
	}
	gates := "<none>"
	if n := len(pod.Spec.ReadinessGates); n > 0 {
		trueGates := 0
		for _, g := range pod.Spec.ReadinessGates {
			if podConditionTrue(&pod.Status, g.ConditionType) {
				trueGates++
			}
		}
		gates = fmt.Sprintf("%d/%d", trueGates, n)
	}
	return []interface{}{
		pod.Name, fmt.Sprintf("%d/%d", ready, total), reason, restartCell, registry.Age(pod.CreationTimestamp),
		noneIfEmpty(podIP), noneIfEmpty(pod.Spec.NodeName), noneIfEmpty(pod.Status.NominatedNodeName), gates,
	}
}
