package core

import (
	"fmt"
	"math"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"mizzen/internal/registry/validname"
)

// ValidatePodTemplateSpec checks a pod template embedded in another object (a
// Deployment's spec.template, ...): its labels and annotations, and its pod spec.
// fldPath is the template's path, e.g. field.NewPath("spec", "template").
func ValidatePodTemplateSpec(t *corev1.PodTemplateSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	metaPath := fldPath.Child("metadata")
	errs = append(errs, validname.ValidateLabels(t.Labels, metaPath.Child("labels"))...)
	errs = append(errs, apivalidation.ValidateAnnotations(t.Annotations, metaPath.Child("annotations"))...)
	specPath := fldPath.Child("spec")
	errs = append(errs, ValidatePodSpec(&t.Spec, specPath)...)
	if len(t.Spec.EphemeralContainers) > 0 {
		errs = append(errs, field.Forbidden(specPath.Child("ephemeralContainers"), "ephemeral containers not allowed in pod template"))
	}
	return errs
}

// ValidatePodSpec checks a defaulted pod template's spec with upstream's most commonly
// hit rules, worded as upstream words them. fldPath is the spec's path, e.g.
// field.NewPath("spec", "template", "spec"). Pods get the same rules and a few more.
func ValidatePodSpec(spec *corev1.PodSpec, fldPath *field.Path) field.ErrorList {
	return validatePodSpec(spec, false, fldPath)
}

// validatePodSpec is ValidatePodSpec for a pod (isPod) or a template, which may leave
// out what pod defaulting fills in.
func validatePodSpec(spec *corev1.PodSpec, isPod bool, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	volumes, volErrs := validateVolumes(spec.Volumes, fldPath.Child("volumes"))
	errs = append(errs, volErrs...)

	containerNames := sets.New[string]()
	for _, c := range spec.Containers {
		containerNames.Insert(c.Name)
	}
	errs = append(errs, validateInitContainers(spec.InitContainers, containerNames, volumes, spec, fldPath.Child("initContainers"))...)
	errs = append(errs, validateContainers(spec.Containers, volumes, spec, fldPath.Child("containers"))...)
	errs = append(errs, validateHostPorts(spec, fldPath)...)
	errs = append(errs, validateHostNetworkPorts(spec, isPod, fldPath)...)

	errs = append(errs, validateRestartPolicy(spec.RestartPolicy, fldPath.Child("restartPolicy"))...)
	errs = append(errs, validateDNSPolicy(spec, fldPath)...)
	errs = append(errs, validname.ValidateLabels(spec.NodeSelector, fldPath.Child("nodeSelector"))...)
	if spec.NodeName != "" {
		for _, msg := range validname.IsDNS1123Subdomain(spec.NodeName) {
			errs = append(errs, field.Invalid(fldPath.Child("nodeName"), spec.NodeName, msg))
		}
	}
	if spec.ServiceAccountName != "" {
		for _, msg := range validname.IsDNS1123Subdomain(spec.ServiceAccountName) {
			errs = append(errs, field.Invalid(fldPath.Child("serviceAccountName"), spec.ServiceAccountName, msg))
		}
	}
	if spec.Hostname != "" {
		for _, msg := range validname.IsDNS1123Label(spec.Hostname) {
			errs = append(errs, field.Invalid(fldPath.Child("hostname"), spec.Hostname, msg))
		}
	}
	if spec.Subdomain != "" {
		for _, msg := range validname.IsDNS1123Label(spec.Subdomain) {
			errs = append(errs, field.Invalid(fldPath.Child("subdomain"), spec.Subdomain, msg))
		}
	}
	if o := spec.HostnameOverride; o != nil {
		// The pod's hostname, as given: not with a name the kubelet makes fully
		// qualified, nor on the node's network, whose hostname it shares.
		p := fldPath.Child("hostnameOverride")
		if spec.SetHostnameAsFQDN != nil && *spec.SetHostnameAsFQDN {
			errs = append(errs, field.Forbidden(p, "may not be specified when setHostnameAsFQDN is true"))
		}
		if spec.HostNetwork {
			errs = append(errs, field.Forbidden(p, "may not be specified when hostNetwork is true"))
		}
		if len(*o) > 64 {
			errs = append(errs, field.TooLong(p, "", 64))
		}
		for _, msg := range validname.IsDNS1123Subdomain(*o) {
			errs = append(errs, field.Invalid(p, *o, msg))
		}
	}
	if spec.ActiveDeadlineSeconds != nil {
		v := *spec.ActiveDeadlineSeconds
		if v < 1 || v > math.MaxInt32 {
			errs = append(errs, field.Invalid(fldPath.Child("activeDeadlineSeconds"), v, validation.InclusiveRangeError(1, math.MaxInt32)))
		}
	}
	errs = append(errs, validateTolerations(spec.Tolerations, fldPath.Child("tolerations"))...)
	for i, s := range spec.ImagePullSecrets {
		if s.Name == "" {
			errs = append(errs, field.Required(fldPath.Child("imagePullSecrets").Index(i).Child("name"), ""))
		}
	}
	if spec.Resources != nil {
		errs = append(errs, validateResources(spec.Resources, fldPath.Child("resources"))...)
	}
	errs = append(errs, validatePodSpecExtras(spec, fldPath)...)
	return errs
}

func validateContainerName(name string, taken sets.Set[string], fldPath *field.Path) field.ErrorList {
	switch {
	case name == "":
		return field.ErrorList{field.Required(fldPath, "")}
	case taken.Has(name):
		return field.ErrorList{field.Duplicate(fldPath, name)}
	}
	var errs field.ErrorList
	for _, msg := range validname.IsDNS1123Label(name) {
		errs = append(errs, field.Invalid(fldPath, name, msg))
	}
	return errs
}

func validateInitContainers(containers []corev1.Container, appNames, volumes sets.Set[string], spec *corev1.PodSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	taken := appNames.Clone()
	for i := range containers {
		c := &containers[i]
		idxPath := fldPath.Index(i)
		errs = append(errs, validateContainerName(c.Name, taken, idxPath.Child("name"))...)
		taken.Insert(c.Name)
		errs = append(errs, validateContainer(c, volumes, idxPath)...)
		errs = append(errs, validateContainerRestartRules(c, idxPath)...)
		sidecar := c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
		if !sidecar {
			// Only sidecars run alongside the app; a plain init container must finish.
			if c.Lifecycle != nil {
				errs = append(errs, field.Forbidden(idxPath.Child("lifecycle"), "may not be set for init containers without restartPolicy=Always"))
			}
			if c.LivenessProbe != nil {
				errs = append(errs, field.Forbidden(idxPath.Child("livenessProbe"), "may not be set for init containers without restartPolicy=Always"))
			}
			if c.ReadinessProbe != nil {
				errs = append(errs, field.Forbidden(idxPath.Child("readinessProbe"), "may not be set for init containers without restartPolicy=Always"))
			}
			if c.StartupProbe != nil {
				errs = append(errs, field.Forbidden(idxPath.Child("startupProbe"), "may not be set for init containers without restartPolicy=Always"))
			}
		} else {
			errs = append(errs, validateProbes(c, idxPath)...)
		}
	}
	return errs
}

func validateContainers(containers []corev1.Container, volumes sets.Set[string], spec *corev1.PodSpec, fldPath *field.Path) field.ErrorList {
	if len(containers) == 0 {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	var errs field.ErrorList
	taken := sets.New[string]()
	for i := range containers {
		c := &containers[i]
		idxPath := fldPath.Index(i)
		errs = append(errs, validateContainerName(c.Name, taken, idxPath.Child("name"))...)
		taken.Insert(c.Name)
		errs = append(errs, validateContainer(c, volumes, idxPath)...)
		errs = append(errs, validateProbes(c, idxPath)...)
		errs = append(errs, validateContainerRestartRules(c, idxPath)...)
	}
	return errs
}

// The restart policies and rule actions and operators a container may name, as
// upstream's with ContainerRestartRules and RestartAllContainersOnContainerExits on (their
// default since 1.35 and 1.36).
var (
	containerRestartPolicies    = []corev1.ContainerRestartPolicy{corev1.ContainerRestartPolicyAlways, corev1.ContainerRestartPolicyNever, corev1.ContainerRestartPolicyOnFailure}
	containerRestartRuleActions = []corev1.ContainerRestartRuleAction{corev1.ContainerRestartRuleActionRestart, corev1.ContainerRestartRuleActionRestartAllContainers}
	containerRestartOperators   = []corev1.ContainerRestartRuleOnExitCodesOperator{corev1.ContainerRestartRuleOnExitCodesOpIn, corev1.ContainerRestartRuleOnExitCodesOpNotIn}
)

// validateContainerRestartRules checks a container's own restart policy and its rules
// (an init or app container's; an init container whose policy is Always is a sidecar):
// rules need a policy, at most 20 of them, each with an action and its exit codes.
func validateContainerRestartRules(c *corev1.Container, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch {
	case c.RestartPolicy == nil:
		if len(c.RestartPolicyRules) > 0 {
			errs = append(errs, field.Required(fldPath.Child("restartPolicy"), "must specify restartPolicy when restart rules are used"))
		}
	case !slices.Contains(containerRestartPolicies, *c.RestartPolicy):
		errs = append(errs, field.NotSupported(fldPath.Child("restartPolicy"), *c.RestartPolicy, containerRestartPolicies))
	}
	if len(c.RestartPolicyRules) > 20 {
		errs = append(errs, field.TooMany(fldPath.Child("restartPolicyRules"), len(c.RestartPolicyRules), 20))
	}
	for i, rule := range c.RestartPolicyRules {
		rulePath := fldPath.Child("restartPolicyRules").Index(i)
		if !slices.Contains(containerRestartRuleActions, rule.Action) {
			errs = append(errs, field.NotSupported(rulePath.Child("action"), rule.Action, containerRestartRuleActions))
		}
		if rule.ExitCodes == nil {
			errs = append(errs, field.Required(rulePath.Child("exitCodes"), "must be specified"))
			continue
		}
		if !slices.Contains(containerRestartOperators, rule.ExitCodes.Operator) {
			errs = append(errs, field.NotSupported(rulePath.Child("exitCodes", "operator"), rule.ExitCodes.Operator, containerRestartOperators))
		}
		if len(rule.ExitCodes.Values) > 255 {
			errs = append(errs, field.TooMany(rulePath.Child("exitCodes", "values"), len(rule.ExitCodes.Values), 255))
		}
	}
	return errs
}

// validateContainer checks what init and app containers have in common.
func validateContainer(c *corev1.Container, volumes sets.Set[string], fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if c.Image == "" {
		errs = append(errs, field.Required(fldPath.Child("image"), ""))
	}
	switch c.ImagePullPolicy {
	case corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
	case "":
		errs = append(errs, field.Required(fldPath.Child("imagePullPolicy"), ""))
	default:
		errs = append(errs, field.NotSupported(fldPath.Child("imagePullPolicy"), c.ImagePullPolicy,
			[]corev1.PullPolicy{corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever}))
	}
	switch c.TerminationMessagePolicy {
	case corev1.TerminationMessageReadFile, corev1.TerminationMessageFallbackToLogsOnError:
	case "":
		errs = append(errs, field.Required(fldPath.Child("terminationMessagePolicy"), "must be 'File' or 'FallbackToLogsOnError'"))
	default:
		errs = append(errs, field.Invalid(fldPath.Child("terminationMessagePolicy"), c.TerminationMessagePolicy, "must be 'File' or 'FallbackToLogsOnError'"))
	}
	errs = append(errs, validateContainerPorts(c.Ports, fldPath.Child("ports"))...)
	errs = append(errs, validateEnv(c.Env, fldPath.Child("env"))...)
	errs = append(errs, validateEnvFrom(c.EnvFrom, fldPath.Child("envFrom"))...)
	errs = append(errs, validateVolumeMounts(c.VolumeMounts, volumes, fldPath.Child("volumeMounts"))...)
	errs = append(errs, validateVolumeDevices(c.VolumeDevices, c.VolumeMounts, volumes, fldPath.Child("volumeDevices"))...)
	errs = append(errs, validateResources(&c.Resources, fldPath.Child("resources"))...)
	if c.Lifecycle != nil {
		errs = append(errs, validateLifecycleHandler(c.Lifecycle.PostStart, fldPath.Child("lifecycle", "postStart"))...)
		errs = append(errs, validateLifecycleHandler(c.Lifecycle.PreStop, fldPath.Child("lifecycle", "preStop"))...)
	}
	return errs
}

var supportedPortProtocols = []corev1.Protocol{corev1.ProtocolSCTP, corev1.ProtocolTCP, corev1.ProtocolUDP}

func validateContainerPorts(ports []corev1.ContainerPort, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := sets.New[string]()
	for i, p := range ports {
		idxPath := fldPath.Index(i)
		if p.Name != "" {
			for _, msg := range validation.IsValidPortName(p.Name) {
				errs = append(errs, field.Invalid(idxPath.Child("name"), p.Name, msg))
			}
			if names.Has(p.Name) {
				errs = append(errs, field.Duplicate(idxPath.Child("name"), p.Name))
			}
			names.Insert(p.Name)
		}
		if p.ContainerPort == 0 {
			errs = append(errs, field.Required(idxPath.Child("containerPort"), ""))
		} else {
			for _, msg := range validation.IsValidPortNum(int(p.ContainerPort)) {
				errs = append(errs, field.Invalid(idxPath.Child("containerPort"), p.ContainerPort, msg))
			}
		}
		if p.HostPort != 0 {
			for _, msg := range validation.IsValidPortNum(int(p.HostPort)) {
				errs = append(errs, field.Invalid(idxPath.Child("hostPort"), p.HostPort, msg))
			}
		}
		errs = append(errs, validateProtocol(p.Protocol, idxPath.Child("protocol"))...)
	}
	return errs
}

func validateProtocol(p corev1.Protocol, fldPath *field.Path) field.ErrorList {
	switch p {
	case corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP:
		return nil
	case "":
		return field.ErrorList{field.Required(fldPath, "")}
	}
	return field.ErrorList{field.NotSupported(fldPath, p, supportedPortProtocols)}
}

// validateHostPorts rejects two containers of a pod asking for the same host port.
func validateHostPorts(spec *corev1.PodSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := sets.New[string]()
	check := func(containers []corev1.Container, path *field.Path) {
		for i, c := range containers {
			for j, p := range c.Ports {
				if p.HostPort == 0 {
					continue
				}
				key := fmt.Sprintf("%s/%s/%d", p.HostIP, p.Protocol, p.HostPort)
				if seen.Has(key) {
					errs = append(errs, field.Duplicate(path.Index(i).Child("ports").Index(j).Child("hostPort"), key))
				}
				seen.Insert(key)
			}
		}
	}
	check(spec.InitContainers, fldPath.Child("initContainers"))
	check(spec.Containers, fldPath.Child("containers"))
	return errs
}

// validateHostNetworkPorts requires host ports to equal container ports on the host
// network. A template may leave the host port out (0): it is defaulted when the pod
// is created; a pod may not.
func validateHostNetworkPorts(spec *corev1.PodSpec, isPod bool, fldPath *field.Path) field.ErrorList {
	if !spec.HostNetwork {
		return nil
	}
	var errs field.ErrorList
	for i, c := range spec.Containers {
		for j, p := range c.Ports {
			if (isPod || p.HostPort != 0) && p.HostPort != p.ContainerPort {
				errs = append(errs, field.Invalid(fldPath.Child("containers").Index(i).Child("ports").Index(j).Child("hostPort"),
					p.HostPort, "must match `containerPort` when `hostNetwork` is true"))
			}
		}
	}
	return errs
}

// standardContainerResources are the unprefixed resource names a container may ask for.
var standardContainerResources = sets.New(string(corev1.ResourceCPU), string(corev1.ResourceMemory), string(corev1.ResourceEphemeralStorage))

func validateResourceName(name corev1.ResourceName, fldPath *field.Path) field.ErrorList {
	s := string(name)
	var errs field.ErrorList
	for _, msg := range validname.IsQualifiedName(s) {
		errs = append(errs, field.Invalid(fldPath, s, msg))
	}
	if len(errs) > 0 {
		return errs
	}
	if !strings.Contains(s, "/") && !standardContainerResources.Has(s) && !strings.HasPrefix(s, corev1.ResourceHugePagesPrefix) {
		errs = append(errs, field.Invalid(fldPath, s, "must be a standard resource for containers"))
	}
	return errs
}

func validateResources(r *corev1.ResourceRequirements, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	limPath, reqPath := fldPath.Child("limits"), fldPath.Child("requests")
	for _, name := range sortedResourceNames(r.Limits) {
		q := r.Limits[name]
		p := limPath.Key(string(name))
		errs = append(errs, validateResourceName(name, p)...)
		errs = append(errs, validateNonNegativeQuantity(q, p)...)
	}
	for _, name := range sortedResourceNames(r.Requests) {
		q := r.Requests[name]
		p := reqPath.Key(string(name))
		errs = append(errs, validateResourceName(name, p)...)
		errs = append(errs, validateNonNegativeQuantity(q, p)...)
		limit, hasLimit := r.Limits[name]
		switch {
		case !isOvercommitable(name) && !hasLimit:
			errs = append(errs, field.Required(limPath, "Limit must be set for non overcommitable resources"))
		case !isOvercommitable(name) && q.Cmp(limit) != 0:
			errs = append(errs, field.Invalid(p, q.String(), fmt.Sprintf("must be equal to %s limit of %s", name, limit.String())))
		case hasLimit && q.Cmp(limit) > 0:
			errs = append(errs, field.Invalid(p, q.String(), fmt.Sprintf("must be less than or equal to %s limit of %s", name, limit.String())))
		}
	}
	return errs
}

// isOvercommitable: extended resources (a domain other than kubernetes.io) and huge
// pages cannot be overcommitted, so their request must equal their limit.
func isOvercommitable(name corev1.ResourceName) bool {
	s := string(name)
	if strings.HasPrefix(s, corev1.ResourceHugePagesPrefix) {
		return false
	}
	domain, _, qualified := strings.Cut(s, "/")
	return !qualified || domain == "kubernetes.io" || strings.HasSuffix(domain, ".kubernetes.io") || strings.HasPrefix(s, "requests.")
}

func validateNonNegativeQuantity(q resource.Quantity, fldPath *field.Path) field.ErrorList {
	if q.Sign() < 0 {
		return field.ErrorList{field.Invalid(fldPath, q.String(), "must be greater than or equal to 0")}
	}
	return nil
}

func validateProbes(c *corev1.Container, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateProbe(c.LivenessProbe, fldPath.Child("livenessProbe"), true)...)
	errs = append(errs, validateProbe(c.ReadinessProbe, fldPath.Child("readinessProbe"), false)...)
	errs = append(errs, validateProbe(c.StartupProbe, fldPath.Child("startupProbe"), true)...)
	return errs
}

// validateProbe checks a probe; liveness and startup probes need successThreshold 1.
func validateProbe(p *corev1.Probe, fldPath *field.Path, successMustBeOne bool) field.ErrorList {
	if p == nil {
		return nil
	}
	var errs field.ErrorList
	errs = append(errs, validateProbeHandler(&p.ProbeHandler, fldPath)...)
	errs = append(errs, apivalidation.ValidateNonnegativeField(int64(p.InitialDelaySeconds), fldPath.Child("initialDelaySeconds"))...)
	errs = append(errs, apivalidation.ValidateNonnegativeField(int64(p.TimeoutSeconds), fldPath.Child("timeoutSeconds"))...)
	errs = append(errs, apivalidation.ValidateNonnegativeField(int64(p.PeriodSeconds), fldPath.Child("periodSeconds"))...)
	errs = append(errs, apivalidation.ValidateNonnegativeField(int64(p.SuccessThreshold), fldPath.Child("successThreshold"))...)
	errs = append(errs, apivalidation.ValidateNonnegativeField(int64(p.FailureThreshold), fldPath.Child("failureThreshold"))...)
	if successMustBeOne && p.SuccessThreshold != 1 {
		errs = append(errs, field.Invalid(fldPath.Child("successThreshold"), p.SuccessThreshold, "must be 1"))
	}
	if p.TerminationGracePeriodSeconds != nil && *p.TerminationGracePeriodSeconds <= 0 {
		errs = append(errs, field.Invalid(fldPath.Child("terminationGracePeriodSeconds"), *p.TerminationGracePeriodSeconds, "must be greater than 0"))
	}
	return errs
}

func validateProbeHandler(h *corev1.ProbeHandler, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	n := 0
	count := func(name string) {
		n++
		if n > 1 {
			errs = append(errs, field.Forbidden(fldPath.Child(name), "may not specify more than 1 handler type"))
		}
	}
	if h.Exec != nil {
		count("exec")
		errs = append(errs, validateExec(h.Exec, fldPath.Child("exec"))...)
	}
	if h.HTTPGet != nil {
		count("httpGet")
		errs = append(errs, validateHTTPGet(h.HTTPGet, fldPath.Child("httpGet"))...)
	}
	if h.TCPSocket != nil {
		count("tcpSocket")
		errs = append(errs, validatePortNumOrName(h.TCPSocket.Port, fldPath.Child("tcpSocket", "port"))...)
	}
	if h.GRPC != nil {
		count("grpc")
		for _, msg := range validation.IsValidPortNum(int(h.GRPC.Port)) {
			errs = append(errs, field.Invalid(fldPath.Child("grpc", "port"), h.GRPC.Port, msg))
		}
	}
	if n == 0 {
		errs = append(errs, field.Required(fldPath, "must specify a handler type"))
	}
	return errs
}

func validateLifecycleHandler(h *corev1.LifecycleHandler, fldPath *field.Path) field.ErrorList {
	if h == nil {
		return nil
	}
	var errs field.ErrorList
	n := 0
	count := func(name string) {
		n++
		if n > 1 {
			errs = append(errs, field.Forbidden(fldPath.Child(name), "may not specify more than 1 handler type"))
		}
	}
	if h.Exec != nil {
		count("exec")
		errs = append(errs, validateExec(h.Exec, fldPath.Child("exec"))...)
	}
	if h.HTTPGet != nil {
		count("httpGet")
		errs = append(errs, validateHTTPGet(h.HTTPGet, fldPath.Child("httpGet"))...)
	}
	if h.TCPSocket != nil {
		count("tcpSocket")
		errs = append(errs, validatePortNumOrName(h.TCPSocket.Port, fldPath.Child("tcpSocket", "port"))...)
	}
	if h.Sleep != nil {
		count("sleep")
		if h.Sleep.Seconds < 0 {
			errs = append(errs, field.Invalid(fldPath.Child("sleep", "seconds"), h.Sleep.Seconds, "must be non-negative"))
		}
	}
	if n == 0 {
		errs = append(errs, field.Required(fldPath, "must specify a handler type"))
	}
	return errs
}

func validateExec(e *corev1.ExecAction, fldPath *field.Path) field.ErrorList {
	if len(e.Command) == 0 {
		return field.ErrorList{field.Required(fldPath.Child("command"), "")}
	}
	return nil
}

func validateHTTPGet(a *corev1.HTTPGetAction, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if a.Path == "" {
		errs = append(errs, field.Required(fldPath.Child("path"), ""))
	}
	errs = append(errs, validatePortNumOrName(a.Port, fldPath.Child("port"))...)
	if a.Scheme != corev1.URISchemeHTTP && a.Scheme != corev1.URISchemeHTTPS {
		errs = append(errs, field.NotSupported(fldPath.Child("scheme"), a.Scheme, []corev1.URIScheme{corev1.URISchemeHTTP, corev1.URISchemeHTTPS}))
	}
	for i, h := range a.HTTPHeaders {
		for _, msg := range validation.IsHTTPHeaderName(h.Name) {
			errs = append(errs, field.Invalid(fldPath.Child("httpHeaders").Index(i).Child("name"), h.Name, msg))
		}
	}
	return errs
}

func validatePortNumOrName(port intstr.IntOrString, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch port.Type {
	case intstr.Int:
		for _, msg := range validation.IsValidPortNum(port.IntValue()) {
			errs = append(errs, field.Invalid(fldPath, port.IntValue(), msg))
		}
	case intstr.String:
		for _, msg := range validation.IsValidPortName(port.StrVal) {
			errs = append(errs, field.Invalid(fldPath, port.StrVal, msg))
		}
	default:
		errs = append(errs, field.InternalError(fldPath, fmt.Errorf("unknown type: %v", port.Type)))
	}
	return errs
}

func validateRestartPolicy(p corev1.RestartPolicy, fldPath *field.Path) field.ErrorList {
	switch p {
	case corev1.RestartPolicyAlways, corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever:
		return nil
	case "":
		return field.ErrorList{field.Required(fldPath, "")}
	}
	return field.ErrorList{field.NotSupported(fldPath, p,
		[]corev1.RestartPolicy{corev1.RestartPolicyAlways, corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever})}
}

func validateDNSPolicy(spec *corev1.PodSpec, fldPath *field.Path) field.ErrorList {
	p := fldPath.Child("dnsPolicy")
	switch spec.DNSPolicy {
	case corev1.DNSClusterFirst, corev1.DNSClusterFirstWithHostNet, corev1.DNSDefault:
		return nil
	case corev1.DNSNone:
		if spec.DNSConfig == nil {
			return field.ErrorList{field.Required(fldPath.Child("dnsConfig"), "must provide `dnsConfig` when `dnsPolicy` is None")}
		}
		return nil
	case "":
		return field.ErrorList{field.Required(p, "")}
	}
	return field.ErrorList{field.NotSupported(p, spec.DNSPolicy,
		[]corev1.DNSPolicy{corev1.DNSClusterFirst, corev1.DNSClusterFirstWithHostNet, corev1.DNSDefault, corev1.DNSNone})}
}

func validateTolerations(tolerations []corev1.Toleration, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, t := range tolerations {
		// Paths are built for errors only (see pathOnError): every pod has tolerations.
		at := func(name string) *field.Path { return fldPath.Index(i).Child(name) }
		if t.Key != "" {
			errs = append(errs, pathOnError(func(p *field.Path) field.ErrorList { return validname.ValidateLabelName(t.Key, p) }, func() *field.Path { return at("key") })...)
		} else if t.Operator != corev1.TolerationOpExists {
			errs = append(errs, field.Invalid(at("operator"), t.Operator,
				"operator must be Exists when `key` is empty, which means \"match all values and all keys\""))
		}
		if t.TolerationSeconds != nil && t.Effect != corev1.TaintEffectNoExecute {
			errs = append(errs, field.Invalid(at("effect"), t.Effect,
				"effect must be 'NoExecute' when `tolerationSeconds` is set"))
		}
		switch t.Operator {
		case corev1.TolerationOpEqual, "":
			for _, msg := range validation.IsValidLabelValue(t.Value) {
				errs = append(errs, field.Invalid(at("value"), t.Value, msg))
			}
		case corev1.TolerationOpExists:
			if t.Value != "" {
				errs = append(errs, field.Invalid(at("operator"), t,
					"value must be empty when `operator` is 'Exists'"))
			}
		default:
			errs = append(errs, field.NotSupported(at("operator"), t.Operator,
				[]corev1.TolerationOperator{corev1.TolerationOpEqual, corev1.TolerationOpExists}))
		}
		if t.Effect != "" {
			errs = append(errs, pathOnError(func(p *field.Path) field.ErrorList { return validateTaintEffect(t.Effect, true, p) }, func() *field.Path { return at("effect") })...)
		}
	}
	return errs
}

// validateTaintEffect checks a taint (allowEmpty false) or toleration effect.
func validateTaintEffect(effect corev1.TaintEffect, allowEmpty bool, fldPath *field.Path) field.ErrorList {
	if effect == "" && !allowEmpty {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	switch effect {
	case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		return nil
	}
	return field.ErrorList{field.NotSupported(fldPath, effect, []corev1.TaintEffect{
		corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute})}
}
