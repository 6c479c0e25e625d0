package core

import (
	"strings"

	"github.com/distribution/reference"
	corev1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"

	"mizzen/internal/registry/validname"
)

// DefaultPodSpec applies upstream's v1 defaulting of a PodSpec in place: the defaults
// every pod template gets (Deployments, Jobs, ...). Defaults that upstream applies only
// to Pod objects (requests from limits, enableServiceLinks, host ports on the host
// network) are in defaultPod.
func DefaultPodSpec(spec *corev1.PodSpec) {
	if spec.DNSPolicy == "" {
		spec.DNSPolicy = corev1.DNSClusterFirst
	}
	if spec.RestartPolicy == "" {
		spec.RestartPolicy = corev1.RestartPolicyAlways
	}
	if spec.SecurityContext == nil {
		spec.SecurityContext = &corev1.PodSecurityContext{}
	}
	if spec.TerminationGracePeriodSeconds == nil {
		spec.TerminationGracePeriodSeconds = ptrTo(int64(corev1.DefaultTerminationGracePeriodSeconds))
	}
	if spec.SchedulerName == "" {
		spec.SchedulerName = corev1.DefaultSchedulerName
	}
	// The deprecated serviceAccount field mirrors serviceAccountName, as upstream's
	// v1 conversion keeps it; an old client may set only the deprecated one.
	if spec.ServiceAccountName == "" {
		spec.ServiceAccountName = spec.DeprecatedServiceAccount
	}
	spec.DeprecatedServiceAccount = spec.ServiceAccountName
	for i := range spec.Volumes {
		defaultVolume(&spec.Volumes[i])
	}
	for i := range spec.InitContainers {
		defaultContainer(&spec.InitContainers[i])
	}
	for i := range spec.Containers {
		defaultContainer(&spec.Containers[i])
	}
	for i := range spec.EphemeralContainers {
		defaultContainer((*corev1.Container)(&spec.EphemeralContainers[i].EphemeralContainerCommon))
	}
	if spec.Resources != nil {
		roundResourceList(spec.Resources.Limits)
		roundResourceList(spec.Resources.Requests)
	}
	if spec.Overhead != nil {
		roundResourceList(spec.Overhead)
	}
}

// defaultPod applies the defaults upstream gives Pod objects only, then the PodSpec ones.
func defaultPod(pod *corev1.Pod) {
	spec := &pod.Spec
	// Upstream accepts a negative grace period (with a warning) and defaults it to 1,
	// in a create or an update alike.
	if g := spec.TerminationGracePeriodSeconds; g != nil && *g < 0 {
		spec.TerminationGracePeriodSeconds = ptrTo(int64(1))
	}
	DefaultPodSpec(spec)
	for i := range spec.InitContainers {
		defaultRequestsFromLimits(&spec.InitContainers[i].Resources)
	}
	for i := range spec.Containers {
		defaultRequestsFromLimits(&spec.Containers[i].Resources)
	}
	defaultPodLevelResources(pod)
	if spec.EnableServiceLinks == nil {
		spec.EnableServiceLinks = ptrTo(corev1.DefaultEnableServiceLinks)
	}
	if spec.HostNetwork {
		// On the host network a container port is a host port.
		defaultHostPorts(spec.InitContainers)
		defaultHostPorts(spec.Containers)
	}
}

// defaultRequestsFromLimits sets each request a container leaves out to its limit.
func defaultRequestsFromLimits(r *corev1.ResourceRequirements) {
	if r.Limits == nil {
		return
	}
	if r.Requests == nil {
		r.Requests = corev1.ResourceList{}
	}
	for name, limit := range r.Limits {
		if _, ok := r.Requests[name]; !ok {
			r.Requests[name] = limit.DeepCopy()
		}
	}
}

// defaultPodLevelResources completes pod-level resources a pod sets in part, after
// the containers' own defaults: huge page limits from the containers' limits, then
// requests from the containers' requests (or else the pod's limits), then cpu and
// memory limits from the containers' when every container has one.
func defaultPodLevelResources(pod *corev1.Pod) {
	r := pod.Spec.Resources
	if r == nil || (len(r.Limits) == 0 && len(r.Requests) == 0) {
		return
	}
	containerLimits := resourcehelper.AggregateContainerLimits(pod, resourcehelper.PodResourcesOptions{})
	for name, q := range containerLimits {
		if !resourcehelper.IsSupportedPodLevelResource(name) || !isHugePages(name) {
			continue
		}
		_, requested := r.Requests[name]
		if _, limited := r.Limits[name]; !requested && !limited {
			if r.Limits == nil {
				r.Limits = corev1.ResourceList{}
			}
			r.Limits[name] = q.DeepCopy()
		}
	}

	if len(r.Limits) > 0 {
		requests := r.Requests
		if requests == nil {
			requests = corev1.ResourceList{}
		}
		for name, q := range resourcehelper.AggregateContainerRequests(pod, resourcehelper.PodResourcesOptions{}) {
			if _, set := requests[name]; !set && resourcehelper.IsSupportedPodLevelResource(name) && !isHugePages(name) {
				requests[name] = q.DeepCopy()
			}
		}
		for name, q := range r.Limits {
			if _, set := requests[name]; !set && resourcehelper.IsSupportedPodLevelResource(name) {
				requests[name] = q.DeepCopy()
			}
		}
		if len(requests) > 0 {
			r.Requests = requests
		}
	}

	if len(r.Requests) > 0 && len(r.Limits) == 0 {
		limits := corev1.ResourceList{}
		for name, q := range containerLimits {
			if resourcehelper.IsSupportedPodLevelResource(name) && !isHugePages(name) && allContainersLimit(pod, name) {
				limits[name] = q.DeepCopy()
			}
		}
		if len(limits) > 0 {
			r.Limits = limits
		}
	}
}

func isHugePages(name corev1.ResourceName) bool {
	return strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix)
}

// allContainersLimit reports whether every container, init ones included, has a
// limit for the resource.
func allContainersLimit(pod *corev1.Pod, name corev1.ResourceName) bool {
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range list {
			if _, ok := c.Resources.Limits[name]; !ok {
				return false
			}
		}
	}
	return true
}

func defaultHostPorts(containers []corev1.Container) {
	for i := range containers {
		for j := range containers[i].Ports {
			p := &containers[i].Ports[j]
			if p.HostPort == 0 {
				p.HostPort = p.ContainerPort
			}
		}
	}
}

func defaultContainer(c *corev1.Container) {
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = defaultPullPolicy(c.Image)
	}
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = corev1.TerminationMessagePathDefault
	}
	if c.TerminationMessagePolicy == "" {
		c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
	}
	for i := range c.Ports {
		if c.Ports[i].Protocol == "" {
			c.Ports[i].Protocol = corev1.ProtocolTCP
		}
	}
	for i := range c.Env {
		if vf := c.Env[i].ValueFrom; vf != nil && vf.FieldRef != nil && vf.FieldRef.APIVersion == "" {
			vf.FieldRef.APIVersion = "v1"
		}
	}
	roundResourceList(c.Resources.Limits)
	roundResourceList(c.Resources.Requests)
	defaultProbe(c.LivenessProbe)
	defaultProbe(c.ReadinessProbe)
	defaultProbe(c.StartupProbe)
	if c.Lifecycle != nil {
		defaultLifecycleHandler(c.Lifecycle.PostStart)
		defaultLifecycleHandler(c.Lifecycle.PreStop)
	}
}

// defaultPullPolicy is Always for an image without a tag or with tag "latest", and
// IfNotPresent otherwise (also for a digest, or a name that does not parse).
func defaultPullPolicy(image string) corev1.PullPolicy {
	if tag, ok := plainImageTag(image); ok {
		if tag == "" || tag == "latest" {
			return corev1.PullAlways
		}
		return corev1.PullIfNotPresent
	}
	return parsedPullPolicy(image)
}

// parsedPullPolicy is defaultPullPolicy by the reference parser alone, for the names
// plainImageTag leaves to it.
func parsedPullPolicy(image string) corev1.PullPolicy {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return corev1.PullIfNotPresent
	}
	tag := ""
	if t, ok := named.(reference.Tagged); ok {
		tag = t.Tag()
	}
	_, digested := named.(reference.Digested)
	if tag == "latest" || (tag == "" && !digested) {
		return corev1.PullAlways
	}
	return corev1.PullIfNotPresent
}

// plainImageTag is the tag of image ("" for none) when image is a plain reference
// the parser would accept, and false for anything else (a digest, a port, upper
// case, an odd length, any character or shape not checked here), which is then left
// to the parser. The parser's regular expressions cost a create more than the rest
// of its defaulting; a plain name is checked here by hand, by the same grammar: an
// optional domain of dot-separated alphanumeric labels with inner dashes, path
// components of lower-case alphanumerics joined by ".", "_", "__" or dashes, and a
// tag of word characters, dots and dashes, not starting with either, at most 128.
func plainImageTag(image string) (string, bool) {
	// Longer names may pass 255 once the parser adds "docker.io/library/"; a
	// 64-character string may be an image ID, which it rejects.
	if len(image) == 0 || len(image) > 200 || len(image) == 64 {
		return "", false
	}
	name, tag := image, ""
	slash := strings.LastIndexByte(image, '/')
	if colon := strings.LastIndexByte(image, ':'); colon > slash {
		name, tag = image[:colon], image[colon+1:]
		if !validTag(tag) {
			return "", false
		}
	}
	parts := strings.Split(name, "/")
	if len(parts) > 1 && (strings.ContainsAny(parts[0], ".:") || parts[0] == "localhost") {
		if !validDomain(parts[0]) {
			return "", false
		}
		parts = parts[1:]
	}
	for _, p := range parts {
		if !validPathComponent(p) {
			return "", false
		}
	}
	return tag, true
}

// validTag is [\w][\w.-]{0,127}.
func validTag(tag string) bool {
	if len(tag) == 0 || len(tag) > 128 {
		return false
	}
	for i := 0; i < len(tag); i++ {
		c := tag[i]
		if !(validname.IsAlnum(c) || c == '_' || i > 0 && (c == '.' || c == '-')) {
			return false
		}
	}
	return true
}

// validDomain is labels of alphanumerics with inner dashes joined by single dots, no
// port (a port is left to the parser).
func validDomain(d string) bool {
	for _, label := range strings.Split(d, ".") {
		if len(label) == 0 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			if !validname.IsAlnum(label[i]) && label[i] != '-' {
				return false
			}
		}
	}
	return true
}

// validPathComponent is [a-z0-9]+ joined by ".", "_", "__" or one or more "-".
func validPathComponent(p string) bool {
	if len(p) == 0 || !validname.IsLowerAlnum(p[0]) || !validname.IsLowerAlnum(p[len(p)-1]) {
		return false
	}
	for i := 1; i < len(p); {
		if validname.IsLowerAlnum(p[i]) {
			i++
			continue
		}
		j := i
		for j < len(p) && !validname.IsLowerAlnum(p[j]) {
			j++
		}
		sep := p[i:j]
		if sep != "." && sep != "_" && sep != "__" && strings.Trim(sep, "-") != "" {
			return false
		}
		i = j
	}
	return true
}

func defaultProbe(p *corev1.Probe) {
	if p == nil {
		return
	}
	if p.TimeoutSeconds == 0 {
		p.TimeoutSeconds = 1
	}
	if p.PeriodSeconds == 0 {
		p.PeriodSeconds = 10
	}
	if p.SuccessThreshold == 0 {
		p.SuccessThreshold = 1
	}
	if p.FailureThreshold == 0 {
		p.FailureThreshold = 3
	}
	defaultHTTPGet(p.HTTPGet)
	if p.GRPC != nil && p.GRPC.Service == nil {
		p.GRPC.Service = ptrTo("")
	}
}

func defaultLifecycleHandler(h *corev1.LifecycleHandler) {
	if h != nil {
		defaultHTTPGet(h.HTTPGet)
	}
}

func defaultHTTPGet(a *corev1.HTTPGetAction) {
	if a == nil {
		return
	}
	if a.Path == "" {
		a.Path = "/"
	}
	if a.Scheme == "" {
		a.Scheme = corev1.URISchemeHTTP
	}
}

func defaultVolume(v *corev1.Volume) {
	if isEmptyVolumeSource(&v.VolumeSource) {
		v.VolumeSource = corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}
	}
	src := &v.VolumeSource
	switch {
	case src.Secret != nil:
		if src.Secret.DefaultMode == nil {
			src.Secret.DefaultMode = ptrTo(corev1.SecretVolumeSourceDefaultMode)
		}
	case src.ConfigMap != nil:
		if src.ConfigMap.DefaultMode == nil {
			src.ConfigMap.DefaultMode = ptrTo(corev1.ConfigMapVolumeSourceDefaultMode)
		}
	case src.DownwardAPI != nil:
		if src.DownwardAPI.DefaultMode == nil {
			src.DownwardAPI.DefaultMode = ptrTo(corev1.DownwardAPIVolumeSourceDefaultMode)
		}
		defaultDownwardAPIFiles(src.DownwardAPI.Items)
	case src.Projected != nil:
		if src.Projected.DefaultMode == nil {
			src.Projected.DefaultMode = ptrTo(corev1.ProjectedVolumeSourceDefaultMode)
		}
		for i := range src.Projected.Sources {
			p := &src.Projected.Sources[i]
			if p.ServiceAccountToken != nil && p.ServiceAccountToken.ExpirationSeconds == nil {
				p.ServiceAccountToken.ExpirationSeconds = ptrTo(int64(3600))
			}
			if p.DownwardAPI != nil {
				defaultDownwardAPIFiles(p.DownwardAPI.Items)
			}
		}
	case src.HostPath != nil:
		if src.HostPath.Type == nil {
			src.HostPath.Type = ptrTo(corev1.HostPathUnset)
		}
	case src.ISCSI != nil:
		if src.ISCSI.ISCSIInterface == "" {
			src.ISCSI.ISCSIInterface = "default"
		}
	case src.RBD != nil:
		if src.RBD.RBDPool == "" {
			src.RBD.RBDPool = "rbd"
		}
		if src.RBD.RadosUser == "" {
			src.RBD.RadosUser = "admin"
		}
		if src.RBD.Keyring == "" {
			src.RBD.Keyring = "/etc/ceph/keyring"
		}
	case src.AzureDisk != nil:
		d := src.AzureDisk
		if d.CachingMode == nil {
			d.CachingMode = ptrTo(corev1.AzureDataDiskCachingReadWrite)
		}
		if d.Kind == nil {
			d.Kind = ptrTo(corev1.AzureSharedBlobDisk)
		}
		if d.FSType == nil {
			d.FSType = ptrTo("ext4")
		}
		if d.ReadOnly == nil {
			d.ReadOnly = ptrTo(false)
		}
	case src.ScaleIO != nil:
		if src.ScaleIO.StorageMode == "" {
			src.ScaleIO.StorageMode = "ThinProvisioned"
		}
		if src.ScaleIO.FSType == "" {
			src.ScaleIO.FSType = "xfs"
		}
	case src.Image != nil:
		if src.Image.PullPolicy == "" {
			src.Image.PullPolicy = defaultPullPolicy(src.Image.Reference)
		}
	case src.Ephemeral != nil:
		if t := src.Ephemeral.VolumeClaimTemplate; t != nil {
			defaultPVCSpec(&t.Spec)
		}
	}
}

func defaultDownwardAPIFiles(items []corev1.DownwardAPIVolumeFile) {
	for i := range items {
		if items[i].FieldRef != nil && items[i].FieldRef.APIVersion == "" {
			items[i].FieldRef.APIVersion = "v1"
		}
	}
}

// isEmptyVolumeSource reports whether no volume source is set; upstream then picks emptyDir.
func isEmptyVolumeSource(s *corev1.VolumeSource) bool {
	return s.HostPath == nil && s.EmptyDir == nil && s.GCEPersistentDisk == nil &&
		s.AWSElasticBlockStore == nil && s.GitRepo == nil && s.Secret == nil && s.NFS == nil &&
		s.ISCSI == nil && s.Glusterfs == nil && s.PersistentVolumeClaim == nil && s.RBD == nil &&
		s.FlexVolume == nil && s.Cinder == nil && s.CephFS == nil && s.Flocker == nil &&
		s.DownwardAPI == nil && s.FC == nil && s.AzureFile == nil && s.ConfigMap == nil &&
		s.VsphereVolume == nil && s.Quobyte == nil && s.AzureDisk == nil &&
		s.PhotonPersistentDisk == nil && s.Projected == nil && s.PortworxVolume == nil &&
		s.ScaleIO == nil && s.StorageOS == nil && s.CSI == nil && s.Ephemeral == nil &&
		s.Image == nil
}

// defaultPVCSpec is shared by PersistentVolumeClaims and ephemeral volume templates.
func defaultPVCSpec(spec *corev1.PersistentVolumeClaimSpec) {
	if spec.VolumeMode == nil {
		spec.VolumeMode = ptrTo(corev1.PersistentVolumeFilesystem)
	}
	roundResourceList(spec.Resources.Limits)
	roundResourceList(spec.Resources.Requests)
}

// roundResourceList rounds every quantity up to milli precision, as upstream does on decode.
func roundResourceList(list corev1.ResourceList) {
	for name, q := range list {
		q.RoundUp(-3)
		list[name] = q
	}
}

func ptrTo[T any](v T) *T { return &v }
