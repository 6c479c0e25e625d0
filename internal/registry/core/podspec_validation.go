package core

import (
	"fmt"
	"math"
	"path"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ValidatePodTemplateSpec checks a pod template embedded in another object (a
// Deployment's spec.template, ...): its labels and annotations, and its pod spec.
// fldPath is the template's path, e.g. field.NewPath("spec", "template").
func ValidatePodTemplateSpec(t *corev1.PodTemplateSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	metaPath := fldPath.Child("metadata")
	errs = append(errs, metav1validation.ValidateLabels(t.Labels, metaPath.Child("labels"))...)
	errs = append(errs, apivalidation.ValidateAnnotations(t.Annotations, metaPath.Child("annotations"))...)
	specPath := fldPath.Child("spec")
	errs = append(errs, ValidatePodSpec(&t.Spec, specPath)...)
	if len(t.Spec.EphemeralContainers) > 0 {
		errs = append(errs, field.Forbidden(specPath.Child("ephemeralContainers"), "ephemeral containers not allowed in pod template"))
	}
	return errs
}

// ValidatePodSpec checks a defaulted pod spec with upstream's most commonly hit rules,
// worded as upstream words them. fldPath is the spec's path, e.g. field.NewPath("spec").
func ValidatePodSpec(spec *corev1.PodSpec, fldPath *field.Path) field.ErrorList {
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
	errs = append(errs, validateHostNetworkPorts(spec, false, fldPath)...)

	errs = append(errs, validateRestartPolicy(spec.RestartPolicy, fldPath.Child("restartPolicy"))...)
	errs = append(errs, validateDNSPolicy(spec, fldPath)...)
	errs = append(errs, metav1validation.ValidateLabels(spec.NodeSelector, fldPath.Child("nodeSelector"))...)
	if spec.NodeName != "" {
		for _, msg := range validation.IsDNS1123Subdomain(spec.NodeName) {
			errs = append(errs, field.Invalid(fldPath.Child("nodeName"), spec.NodeName, msg))
		}
	}
	if spec.ServiceAccountName != "" {
		for _, msg := range validation.IsDNS1123Subdomain(spec.ServiceAccountName) {
			errs = append(errs, field.Invalid(fldPath.Child("serviceAccountName"), spec.ServiceAccountName, msg))
		}
	}
	if spec.Hostname != "" {
		for _, msg := range validation.IsDNS1123Label(spec.Hostname) {
			errs = append(errs, field.Invalid(fldPath.Child("hostname"), spec.Hostname, msg))
		}
	}
	if spec.Subdomain != "" {
		for _, msg := range validation.IsDNS1123Label(spec.Subdomain) {
			errs = append(errs, field.Invalid(fldPath.Child("subdomain"), spec.Subdomain, msg))
		}
	}
	if spec.ActiveDeadlineSeconds != nil {
		v := *spec.ActiveDeadlineSeconds
		if v < 1 || v > math.MaxInt32 {
			errs = append(errs, field.Invalid(fldPath.Child("activeDeadlineSeconds"), v, validation.InclusiveRangeError(1, math.MaxInt32)))
		}
	}
	if spec.TerminationGracePeriodSeconds != nil && *spec.TerminationGracePeriodSeconds < 0 {
		errs = append(errs, apivalidation.ValidateNonnegativeField(*spec.TerminationGracePeriodSeconds, fldPath.Child("terminationGracePeriodSeconds"))...)
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

// validateVolumes checks names and sources and returns the set of valid volume names.
func validateVolumes(volumes []corev1.Volume, fldPath *field.Path) (sets.Set[string], field.ErrorList) {
	var errs field.ErrorList
	names := sets.New[string]()
	for i, v := range volumes {
		idxPath := fldPath.Index(i)
		namePath := idxPath.Child("name")
		switch {
		case v.Name == "":
			errs = append(errs, field.Required(namePath, ""))
		case names.Has(v.Name):
			errs = append(errs, field.Duplicate(namePath, v.Name))
		default:
			msgs := validation.IsDNS1123Label(v.Name)
			for _, msg := range msgs {
				errs = append(errs, field.Invalid(namePath, v.Name, msg))
			}
			if len(msgs) == 0 {
				names.Insert(v.Name)
			}
		}
		errs = append(errs, validateVolumeSource(&v.VolumeSource, idxPath)...)
	}
	return names, errs
}

// validateVolumeSource checks that exactly one source is given and the fields of the
// common ones that are required.
func validateVolumeSource(src *corev1.VolumeSource, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	set := 0
	more := func(name string) {
		set++
		if set > 1 {
			errs = append(errs, field.Forbidden(fldPath.Child(name), "may not specify more than 1 volume type"))
		}
	}
	if src.HostPath != nil {
		more("hostPath")
		if src.HostPath.Path == "" {
			errs = append(errs, field.Required(fldPath.Child("hostPath", "path"), ""))
		}
		if t := src.HostPath.Type; t != nil && !validHostPathTypes.Has(*t) {
			errs = append(errs, field.NotSupported(fldPath.Child("hostPath", "type"), *t, sets.List(validHostPathTypes)))
		}
	}
	if src.EmptyDir != nil {
		more("emptyDir")
		if m := src.EmptyDir.Medium; m != corev1.StorageMediumDefault && m != corev1.StorageMediumMemory && m != corev1.StorageMediumHugePages && !strings.HasPrefix(string(m), "HugePages-") {
			errs = append(errs, field.NotSupported(fldPath.Child("emptyDir", "medium"), m, []string{"", "Memory", "HugePages"}))
		}
		if q := src.EmptyDir.SizeLimit; q != nil && q.Sign() < 0 {
			errs = append(errs, field.Invalid(fldPath.Child("emptyDir", "sizeLimit"), q.String(), "must be greater than or equal to 0"))
		}
	}
	if src.Secret != nil {
		more("secret")
		if src.Secret.SecretName == "" {
			errs = append(errs, field.Required(fldPath.Child("secret", "secretName"), ""))
		}
		errs = append(errs, validateFileMode(src.Secret.DefaultMode, fldPath.Child("secret", "defaultMode"))...)
		errs = append(errs, validateKeyToPaths(src.Secret.Items, fldPath.Child("secret", "items"))...)
	}
	if src.ConfigMap != nil {
		more("configMap")
		if src.ConfigMap.Name == "" {
			errs = append(errs, field.Required(fldPath.Child("configMap", "name"), ""))
		}
		errs = append(errs, validateFileMode(src.ConfigMap.DefaultMode, fldPath.Child("configMap", "defaultMode"))...)
		errs = append(errs, validateKeyToPaths(src.ConfigMap.Items, fldPath.Child("configMap", "items"))...)
	}
	if src.PersistentVolumeClaim != nil {
		more("persistentVolumeClaim")
		if src.PersistentVolumeClaim.ClaimName == "" {
			errs = append(errs, field.Required(fldPath.Child("persistentVolumeClaim", "claimName"), ""))
		}
	}
	if src.NFS != nil {
		more("nfs")
		if src.NFS.Server == "" {
			errs = append(errs, field.Required(fldPath.Child("nfs", "server"), ""))
		}
		if src.NFS.Path == "" {
			errs = append(errs, field.Required(fldPath.Child("nfs", "path"), ""))
		} else if !path.IsAbs(src.NFS.Path) {
			errs = append(errs, field.Invalid(fldPath.Child("nfs", "path"), src.NFS.Path, "must be an absolute path"))
		}
	}
	if src.DownwardAPI != nil {
		more("downwardAPI")
		errs = append(errs, validateFileMode(src.DownwardAPI.DefaultMode, fldPath.Child("downwardAPI", "defaultMode"))...)
	}
	if src.Projected != nil {
		more("projected")
		errs = append(errs, validateFileMode(src.Projected.DefaultMode, fldPath.Child("projected", "defaultMode"))...)
	}
	if src.CSI != nil {
		more("csi")
		if src.CSI.Driver == "" {
			errs = append(errs, field.Required(fldPath.Child("csi", "driver"), ""))
		}
	}
	if src.Ephemeral != nil {
		more("ephemeral")
		if src.Ephemeral.VolumeClaimTemplate == nil {
			errs = append(errs, field.Required(fldPath.Child("ephemeral", "volumeClaimTemplate"), ""))
		}
	}
	if src.Image != nil {
		more("image")
	}
	// The remaining in-tree sources are only counted.
	for _, other := range []struct {
		name string
		set  bool
	}{
		{"gcePersistentDisk", src.GCEPersistentDisk != nil}, {"awsElasticBlockStore", src.AWSElasticBlockStore != nil},
		{"gitRepo", src.GitRepo != nil}, {"iscsi", src.ISCSI != nil}, {"glusterfs", src.Glusterfs != nil},
		{"rbd", src.RBD != nil}, {"flexVolume", src.FlexVolume != nil}, {"cinder", src.Cinder != nil},
		{"cephfs", src.CephFS != nil}, {"flocker", src.Flocker != nil}, {"fc", src.FC != nil},
		{"azureFile", src.AzureFile != nil}, {"vsphereVolume", src.VsphereVolume != nil},
		{"quobyte", src.Quobyte != nil}, {"azureDisk", src.AzureDisk != nil},
		{"photonPersistentDisk", src.PhotonPersistentDisk != nil}, {"portworxVolume", src.PortworxVolume != nil},
		{"scaleIO", src.ScaleIO != nil}, {"storageos", src.StorageOS != nil},
	} {
		if other.set {
			more(other.name)
		}
	}
	if set == 0 {
		errs = append(errs, field.Required(fldPath, "must specify a volume type"))
	}
	return errs
}

var validHostPathTypes = sets.New(corev1.HostPathUnset, corev1.HostPathDirectoryOrCreate,
	corev1.HostPathDirectory, corev1.HostPathFileOrCreate, corev1.HostPathFile,
	corev1.HostPathSocket, corev1.HostPathCharDev, corev1.HostPathBlockDev)

func validateFileMode(mode *int32, fldPath *field.Path) field.ErrorList {
	if mode != nil && (*mode < 0 || *mode > 0777) {
		return field.ErrorList{field.Invalid(fldPath, *mode, "must be a number between 0 and 0777 (octal), both inclusive")}
	}
	return nil
}

func validateKeyToPaths(items []corev1.KeyToPath, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, kp := range items {
		idxPath := fldPath.Index(i)
		if kp.Key == "" {
			errs = append(errs, field.Required(idxPath.Child("key"), ""))
		}
		errs = append(errs, validateLocalRelativePath(kp.Path, idxPath.Child("path"))...)
		errs = append(errs, validateFileMode(kp.Mode, idxPath.Child("mode"))...)
	}
	return errs
}

// validateLocalRelativePath requires a relative path that does not step out with "..".
func validateLocalRelativePath(p string, fldPath *field.Path) field.ErrorList {
	if p == "" {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	var errs field.ErrorList
	if path.IsAbs(p) {
		errs = append(errs, field.Invalid(fldPath, p, "must be a relative path"))
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			errs = append(errs, field.Invalid(fldPath, p, "must not contain '..'"))
			break
		}
	}
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
	for _, msg := range validation.IsDNS1123Label(name) {
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
		if c.RestartPolicy != nil && *c.RestartPolicy != corev1.ContainerRestartPolicyAlways {
			errs = append(errs, field.NotSupported(idxPath.Child("restartPolicy"), *c.RestartPolicy, []corev1.ContainerRestartPolicy{corev1.ContainerRestartPolicyAlways}))
		}
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

func validateEnv(env []corev1.EnvVar, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, e := range env {
		idxPath := fldPath.Index(i)
		if e.Name == "" {
			errs = append(errs, field.Required(idxPath.Child("name"), ""))
		} else {
			for _, msg := range validation.IsRelaxedEnvVarName(e.Name) {
				errs = append(errs, field.Invalid(idxPath.Child("name"), e.Name, msg))
			}
		}
		errs = append(errs, validateEnvValueFrom(e, idxPath.Child("valueFrom"))...)
	}
	return errs
}

// envFieldPaths are the pod fields an environment variable may read.
var envFieldPaths = []string{"metadata.name", "metadata.namespace", "metadata.uid", "spec.nodeName",
	"spec.serviceAccountName", "status.hostIP", "status.hostIPs", "status.podIP", "status.podIPs"}

// envResourceFields are the container resources an environment variable may read.
var envResourceFields = []string{"limits.cpu", "limits.ephemeral-storage", "limits.memory",
	"requests.cpu", "requests.ephemeral-storage", "requests.memory"}

func validateEnvValueFrom(e corev1.EnvVar, fldPath *field.Path) field.ErrorList {
	vf := e.ValueFrom
	if vf == nil {
		return nil
	}
	var errs field.ErrorList
	n := 0
	if vf.FieldRef != nil {
		n++
		errs = append(errs, validateEnvFieldRef(vf.FieldRef, fldPath.Child("fieldRef"))...)
	}
	if vf.ResourceFieldRef != nil {
		n++
		p := fldPath.Child("resourceFieldRef")
		r := vf.ResourceFieldRef.Resource
		switch {
		case r == "":
			errs = append(errs, field.Required(p.Child("resource"), ""))
		case !slices.Contains(envResourceFields, r) && !strings.HasPrefix(r, "requests.hugepages-") && !strings.HasPrefix(r, "limits.hugepages-"):
			errs = append(errs, field.NotSupported(p.Child("resource"), r, envResourceFields))
		}
	}
	if vf.ConfigMapKeyRef != nil {
		n++
		errs = append(errs, validateKeySelector(vf.ConfigMapKeyRef.Name, vf.ConfigMapKeyRef.Key, fldPath.Child("configMapKeyRef"))...)
	}
	if vf.SecretKeyRef != nil {
		n++
		errs = append(errs, validateKeySelector(vf.SecretKeyRef.Name, vf.SecretKeyRef.Key, fldPath.Child("secretKeyRef"))...)
	}
	if vf.FileKeyRef != nil {
		n++
	}
	switch {
	case n == 0:
		errs = append(errs, field.Invalid(fldPath, "", "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`"))
	case e.Value != "":
		errs = append(errs, field.Invalid(fldPath, "", "may not be specified when `value` is not empty"))
	case n > 1:
		errs = append(errs, field.Invalid(fldPath, "", "may not have more than one field specified at a time"))
	}
	return errs
}

func validateEnvFieldRef(ref *corev1.ObjectFieldSelector, fldPath *field.Path) field.ErrorList {
	if ref.APIVersion == "" {
		return field.ErrorList{field.Required(fldPath.Child("apiVersion"), "")}
	}
	if ref.FieldPath == "" {
		return field.ErrorList{field.Required(fldPath.Child("fieldPath"), "")}
	}
	if ref.APIVersion != "v1" {
		return field.ErrorList{field.Invalid(fldPath.Child("fieldPath"), ref.FieldPath,
			fmt.Sprintf("error converting fieldPath: unsupported pod version: %s", ref.APIVersion))}
	}
	path, subscript, subscripted := splitSubscript(ref.FieldPath)
	if !subscripted {
		if !slices.Contains(envFieldPaths, path) {
			return field.ErrorList{field.NotSupported(fldPath.Child("fieldPath"), path, envFieldPaths)}
		}
		return nil
	}
	switch path {
	case "metadata.annotations":
		return metav1validation.ValidateLabelName(strings.ToLower(subscript), fldPath)
	case "metadata.labels":
		return metav1validation.ValidateLabelName(subscript, fldPath)
	}
	return field.ErrorList{field.Invalid(fldPath, path, "does not support subscript")}
}

// splitSubscript splits "metadata.labels['app']" into its path and key.
func splitSubscript(fieldPath string) (path, subscript string, ok bool) {
	if !strings.HasSuffix(fieldPath, "']") {
		return fieldPath, "", false
	}
	open := strings.Index(fieldPath, "['")
	if open < 0 {
		return fieldPath, "", false
	}
	return fieldPath[:open], fieldPath[open+2 : len(fieldPath)-2], true
}

// validateKeySelector checks a config map or secret key reference.
func validateKeySelector(name, key string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(name) {
		errs = append(errs, field.Invalid(fldPath.Child("name"), name, msg))
	}
	if key == "" {
		return append(errs, field.Required(fldPath.Child("key"), ""))
	}
	for _, msg := range validation.IsConfigMapKey(key) {
		errs = append(errs, field.Invalid(fldPath.Child("key"), key, msg))
	}
	return errs
}

func validateEnvFrom(sources []corev1.EnvFromSource, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, src := range sources {
		idxPath := fldPath.Index(i)
		if src.Prefix != "" {
			for _, msg := range validation.IsRelaxedEnvVarName(src.Prefix) {
				errs = append(errs, field.Invalid(idxPath.Child("prefix"), src.Prefix, msg))
			}
		}
		n := 0
		check := func(name string, p *field.Path) {
			n++
			if name == "" {
				errs = append(errs, field.Required(p.Child("name"), ""))
				return
			}
			for _, msg := range validation.IsDNS1123Subdomain(name) {
				errs = append(errs, field.Invalid(p.Child("name"), name, msg))
			}
		}
		if src.ConfigMapRef != nil {
			check(src.ConfigMapRef.Name, idxPath.Child("configMapRef"))
		}
		if src.SecretRef != nil {
			check(src.SecretRef.Name, idxPath.Child("secretRef"))
		}
		switch {
		case n == 0:
			errs = append(errs, field.Invalid(fldPath, "", "must specify one of: `configMapRef` or `secretRef`"))
		case n > 1:
			errs = append(errs, field.Invalid(fldPath, "", "may not have more than one field specified at a time"))
		}
	}
	return errs
}

func validateVolumeMounts(mounts []corev1.VolumeMount, volumes sets.Set[string], fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	paths := sets.New[string]()
	for i, m := range mounts {
		idxPath := fldPath.Index(i)
		if m.Name == "" {
			errs = append(errs, field.Required(idxPath.Child("name"), ""))
		} else if !volumes.Has(m.Name) {
			errs = append(errs, field.NotFound(idxPath.Child("name"), m.Name))
		}
		if m.MountPath == "" {
			errs = append(errs, field.Required(idxPath.Child("mountPath"), ""))
		} else if paths.Has(m.MountPath) {
			errs = append(errs, field.Invalid(idxPath.Child("mountPath"), m.MountPath, "must be unique"))
		}
		paths.Insert(m.MountPath)
		if m.SubPath != "" {
			errs = append(errs, validateSubPath(m.SubPath, idxPath.Child("subPath"))...)
		}
		if m.MountPropagation != nil {
			switch *m.MountPropagation {
			case corev1.MountPropagationNone, corev1.MountPropagationHostToContainer, corev1.MountPropagationBidirectional:
			default:
				errs = append(errs, field.NotSupported(idxPath.Child("mountPropagation"), *m.MountPropagation,
					[]corev1.MountPropagationMode{corev1.MountPropagationBidirectional, corev1.MountPropagationHostToContainer, corev1.MountPropagationNone}))
			}
		}
	}
	return errs
}

func validateSubPath(p string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if path.IsAbs(p) {
		errs = append(errs, field.Invalid(fldPath, p, "must be a relative path"))
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			errs = append(errs, field.Invalid(fldPath, p, "must not contain '..'"))
			break
		}
	}
	return errs
}

// standardContainerResources are the unprefixed resource names a container may ask for.
var standardContainerResources = sets.New(string(corev1.ResourceCPU), string(corev1.ResourceMemory), string(corev1.ResourceEphemeralStorage))

func validateResourceName(name corev1.ResourceName, fldPath *field.Path) field.ErrorList {
	s := string(name)
	var errs field.ErrorList
	for _, msg := range validation.IsQualifiedName(s) {
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
		idxPath := fldPath.Index(i)
		if t.Key != "" {
			errs = append(errs, metav1validation.ValidateLabelName(t.Key, idxPath.Child("key"))...)
		} else if t.Operator != corev1.TolerationOpExists {
			errs = append(errs, field.Invalid(idxPath.Child("operator"), t.Operator,
				"operator must be Exists when `key` is empty, which means \"match all values and all keys\""))
		}
		if t.TolerationSeconds != nil && t.Effect != corev1.TaintEffectNoExecute {
			errs = append(errs, field.Invalid(idxPath.Child("effect"), t.Effect,
				"effect must be 'NoExecute' when `tolerationSeconds` is set"))
		}
		switch t.Operator {
		case corev1.TolerationOpEqual, "":
			for _, msg := range validation.IsValidLabelValue(t.Value) {
				errs = append(errs, field.Invalid(idxPath.Child("value"), t.Value, msg))
			}
		case corev1.TolerationOpExists:
			if t.Value != "" {
				errs = append(errs, field.Invalid(idxPath.Child("operator"), t,
					"value must be empty when `operator` is 'Exists'"))
			}
		default:
			errs = append(errs, field.NotSupported(idxPath.Child("operator"), t.Operator,
				[]corev1.TolerationOperator{corev1.TolerationOpEqual, corev1.TolerationOpExists}))
		}
		if t.Effect != "" {
			errs = append(errs, validateTaintEffect(t.Effect, true, idxPath.Child("effect"))...)
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
