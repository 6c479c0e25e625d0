package core

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestDefaultPodSpec(t *testing.T) {
	tests := []struct {
		name string
		in   corev1.PodSpec
		want corev1.PodSpec
	}{{
		name: "minimal spec gets pod-level defaults",
		in:   corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx:1.25"}}},
		want: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "c", Image: "nginx:1.25", ImagePullPolicy: corev1.PullIfNotPresent,
				TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: corev1.TerminationMessageReadFile}},
			RestartPolicy: corev1.RestartPolicyAlways, DNSPolicy: corev1.DNSClusterFirst,
			TerminationGracePeriodSeconds: ptrTo(int64(30)), SchedulerName: "default-scheduler",
			SecurityContext: &corev1.PodSecurityContext{},
		},
	}, {
		name: "deprecated service account mirrors the name",
		in:   corev1.PodSpec{DeprecatedServiceAccount: "old-client"},
		want: corev1.PodSpec{ServiceAccountName: "old-client", DeprecatedServiceAccount: "old-client",
			RestartPolicy: corev1.RestartPolicyAlways, DNSPolicy: corev1.DNSClusterFirst,
			TerminationGracePeriodSeconds: ptrTo(int64(30)), SchedulerName: "default-scheduler",
			SecurityContext: &corev1.PodSecurityContext{}},
	}, {
		name: "explicit values are kept",
		in: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, DNSPolicy: corev1.DNSDefault,
			TerminationGracePeriodSeconds: ptrTo(int64(5)), SchedulerName: "mine",
			SecurityContext: &corev1.PodSecurityContext{RunAsUser: ptrTo(int64(1000))}},
		want: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, DNSPolicy: corev1.DNSDefault,
			TerminationGracePeriodSeconds: ptrTo(int64(5)), SchedulerName: "mine",
			SecurityContext: &corev1.PodSecurityContext{RunAsUser: ptrTo(int64(1000))}},
	}, {
		name: "volume sources",
		in: corev1.PodSpec{Volumes: []corev1.Volume{
			{Name: "none"},
			{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "x"}}},
			{Name: "cm", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}},
			{Name: "h", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/x"}}},
			{Name: "p", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}}}}}},
		}},
		want: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyAlways, DNSPolicy: corev1.DNSClusterFirst,
			TerminationGracePeriodSeconds: ptrTo(int64(30)), SchedulerName: "default-scheduler",
			SecurityContext: &corev1.PodSecurityContext{},
			Volumes: []corev1.Volume{
				{Name: "none", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "x", DefaultMode: ptrTo(int32(0644))}}},
				{Name: "cm", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{DefaultMode: ptrTo(int32(0644))}}},
				{Name: "h", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/x", Type: ptrTo(corev1.HostPathUnset)}}},
				{Name: "p", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{DefaultMode: ptrTo(int32(0644)), Sources: []corev1.VolumeProjection{
					{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptrTo(int64(3600))}}}}}},
			},
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.in.DeepCopy()
			DefaultPodSpec(got)
			if !equality.Semantic.DeepEqual(*got, tc.want) {
				t.Errorf("DefaultPodSpec:\n got %+v\nwant %+v", *got, tc.want)
			}
		})
	}
}

func TestDefaultContainer(t *testing.T) {
	tests := []struct {
		name string
		in   corev1.Container
		want corev1.Container
	}{{
		name: "untagged image is pulled always",
		in:   corev1.Container{Image: "nginx"},
		want: corev1.Container{Image: "nginx", ImagePullPolicy: corev1.PullAlways, TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: "File"},
	}, {
		name: "latest tag is pulled always",
		in:   corev1.Container{Image: "registry.local:5000/app:latest"},
		want: corev1.Container{Image: "registry.local:5000/app:latest", ImagePullPolicy: corev1.PullAlways, TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: "File"},
	}, {
		name: "digest is pulled if not present",
		in:   corev1.Container{Image: "app@sha256:0000000000000000000000000000000000000000000000000000000000000000"},
		want: corev1.Container{Image: "app@sha256:0000000000000000000000000000000000000000000000000000000000000000", ImagePullPolicy: corev1.PullIfNotPresent, TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: "File"},
	}, {
		name: "ports, probes, env and quantities",
		in: corev1.Container{Image: "a:1", ImagePullPolicy: corev1.PullNever,
			Ports:          []corev1.ContainerPort{{ContainerPort: 80}, {ContainerPort: 53, Protocol: corev1.ProtocolUDP}},
			LivenessProbe:  &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(80)}}},
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 9}}, PeriodSeconds: 3},
			Env:            []corev1.EnvVar{{Name: "N", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
			Resources:      corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100u")}},
		},
		want: corev1.Container{Image: "a:1", ImagePullPolicy: corev1.PullNever, TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: "File",
			Ports: []corev1.ContainerPort{{ContainerPort: 80, Protocol: corev1.ProtocolTCP}, {ContainerPort: 53, Protocol: corev1.ProtocolUDP}},
			LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(80), Path: "/", Scheme: corev1.URISchemeHTTP}},
				TimeoutSeconds: 1, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 3},
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 9, Service: ptrTo("")}},
				TimeoutSeconds: 1, PeriodSeconds: 3, SuccessThreshold: 1, FailureThreshold: 3},
			Env:       []corev1.EnvVar{{Name: "N", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name", APIVersion: "v1"}}}},
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1m")}},
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.in.DeepCopy()
			defaultContainer(got)
			if !equality.Semantic.DeepEqual(*got, tc.want) {
				t.Errorf("defaultContainer:\n got %+v\nwant %+v", *got, tc.want)
			}
		})
	}
}

// validPodSpec returns a defaulted spec that passes validation; tests break one thing.
func validPodSpec() *corev1.PodSpec {
	s := &corev1.PodSpec{
		Volumes:    []corev1.Volume{{Name: "data"}},
		Containers: []corev1.Container{{Name: "app", Image: "nginx", VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}}},
	}
	DefaultPodSpec(s)
	return s
}

// errorStrings renders errors as clients see them in a Status cause: "path: Type: detail".
func errorStrings(errs field.ErrorList) []string {
	out := make([]string, 0, len(errs))
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

func assertErrors(t *testing.T, errs field.ErrorList, want []string) {
	t.Helper()
	got := errorStrings(errs)
	if len(got) != len(want) {
		t.Fatalf("got %d errors %q, want %q", len(got), got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("error %d:\n got %q\nwant %q", i, got[i], want[i])
		}
	}
}

func TestValidatePodSpec(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(s *corev1.PodSpec)
		want   []string
	}{
		{"valid", func(*corev1.PodSpec) {}, nil},
		{"no containers", func(s *corev1.PodSpec) { s.Containers = nil },
			[]string{"spec.containers: Required value"}},
		{"missing image", func(s *corev1.PodSpec) { s.Containers[0].Image = "" },
			[]string{"spec.containers[0].image: Required value"}},
		{"container port out of range", func(s *corev1.PodSpec) {
			s.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 70000, Protocol: corev1.ProtocolTCP}}
		}, []string{"spec.containers[0].ports[0].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive"}},
		{"bad protocol", func(s *corev1.PodSpec) {
			s.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, Protocol: "HTTP"}}
		}, []string{`spec.containers[0].ports[0].protocol: Unsupported value: "HTTP": supported values: "SCTP", "TCP", "UDP"`}},
		{"duplicate container name across init and app", func(s *corev1.PodSpec) {
			s.InitContainers = []corev1.Container{{Name: "app", Image: "busybox", ImagePullPolicy: "Always", TerminationMessagePolicy: "File"}}
		}, []string{`spec.initContainers[0].name: Duplicate value: "app"`}},
		{"container name not a DNS label", func(s *corev1.PodSpec) { s.Containers[0].Name = "App_1" },
			[]string{`spec.containers[0].name: Invalid value: "App_1": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`}},
		{"mount of unknown volume", func(s *corev1.PodSpec) { s.Containers[0].VolumeMounts[0].Name = "other" },
			[]string{`spec.containers[0].volumeMounts[0].name: Not found: "other"`}},
		{"device of unknown volume", func(s *corev1.PodSpec) {
			s.Containers[0].VolumeDevices = []corev1.VolumeDevice{{Name: "other", DevicePath: "/dev/xvda"}}
		}, []string{`spec.containers[0].volumeDevices[0].name: Not found: "other"`}},
		{"device of a mounted volume, at a mount's path", func(s *corev1.PodSpec) {
			s.Containers[0].VolumeDevices = []corev1.VolumeDevice{{Name: "data", DevicePath: s.Containers[0].VolumeMounts[0].MountPath}}
		}, []string{`spec.containers[0].volumeDevices[0].name: Invalid value: "data": must not already exist in volumeMounts`,
			`spec.containers[0].volumeDevices[0].devicePath: Invalid value: "` + "/data" + `": must not already exist as a path in volumeMounts`}},
		{"duplicate volume", func(s *corev1.PodSpec) { s.Volumes = append(s.Volumes, s.Volumes[0]) },
			[]string{`spec.volumes[1].name: Duplicate value: "data"`}},
		{"restart policy", func(s *corev1.PodSpec) { s.RestartPolicy = "Sometimes" },
			[]string{`spec.restartPolicy: Unsupported value: "Sometimes": supported values: "Always", "OnFailure", "Never"`}},
		{"dns policy", func(s *corev1.PodSpec) { s.DNSPolicy = "Cluster" },
			[]string{`spec.dnsPolicy: Unsupported value: "Cluster": supported values: "ClusterFirst", "ClusterFirstWithHostNet", "Default", "None"`}},
		{"request above limit", func(s *corev1.PodSpec) {
			s.Containers[0].Resources = corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
			}
		}, []string{`spec.containers[0].resources.requests[cpu]: Invalid value: "2": must be less than or equal to cpu limit of 1`}},
		{"probe without handler", func(s *corev1.PodSpec) {
			s.Containers[0].LivenessProbe = &corev1.Probe{TimeoutSeconds: 1, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 3}
		}, []string{`spec.containers[0].livenessProbe: Required value: must specify a handler type`}},
		{"liveness success threshold", func(s *corev1.PodSpec) {
			s.Containers[0].LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(80)}},
				TimeoutSeconds: 1, PeriodSeconds: 10, SuccessThreshold: 2, FailureThreshold: 3}
		}, []string{`spec.containers[0].livenessProbe.successThreshold: Invalid value: 2: must be 1`}},
		{"toleration seconds need NoExecute", func(s *corev1.PodSpec) {
			s.Tolerations = []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule, TolerationSeconds: ptrTo(int64(5))}}
		}, []string{`spec.tolerations[0].effect: Invalid value: "NoSchedule": effect must be 'NoExecute' when ` + "`tolerationSeconds`" + ` is set`}},
		{"an app container's own restart policy and rules", func(s *corev1.PodSpec) {
			never := corev1.ContainerRestartPolicyNever
			s.Containers[0].RestartPolicy = &never
			s.Containers[0].RestartPolicyRules = []corev1.ContainerRestartRule{{Action: corev1.ContainerRestartRuleActionRestart,
				ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: corev1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}}}}
		}, nil},
		{"an unknown restart policy on an app container", func(s *corev1.PodSpec) {
			sometimes := corev1.ContainerRestartPolicy("Sometimes")
			s.Containers[0].RestartPolicy = &sometimes
		}, []string{`spec.containers[0].restartPolicy: Unsupported value: "Sometimes": supported values: "Always", "Never", "OnFailure"`}},
		{"restart rules without a restart policy", func(s *corev1.PodSpec) {
			s.Containers[0].RestartPolicyRules = []corev1.ContainerRestartRule{{Action: corev1.ContainerRestartRuleActionRestart,
				ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: corev1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}}}}
		}, []string{"spec.containers[0].restartPolicy: Required value: must specify restartPolicy when restart rules are used"}},
		{"a restart rule without exit codes, an init container's unknown action", func(s *corev1.PodSpec) {
			never := corev1.ContainerRestartPolicyNever
			s.Containers[0].RestartPolicy = &never
			s.Containers[0].RestartPolicyRules = []corev1.ContainerRestartRule{{Action: corev1.ContainerRestartRuleActionRestart}}
			s.InitContainers = []corev1.Container{{Name: "init", Image: "busybox", RestartPolicy: &never,
				ImagePullPolicy: corev1.PullIfNotPresent, TerminationMessagePolicy: corev1.TerminationMessageReadFile,
				RestartPolicyRules: []corev1.ContainerRestartRule{{Action: "Explode",
					ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: "Between", Values: []int32{1}}}}}}
		}, []string{
			`spec.initContainers[0].restartPolicyRules[0].action: Unsupported value: "Explode": supported values: "Restart", "RestartAllContainers"`,
			`spec.initContainers[0].restartPolicyRules[0].exitCodes.operator: Unsupported value: "Between": supported values: "In", "NotIn"`,
			"spec.containers[0].restartPolicyRules[0].exitCodes: Required value: must be specified",
		}},
		{"hostnameOverride with setHostnameAsFQDN, hostNetwork, not a DNS subdomain", func(s *corev1.PodSpec) {
			s.HostnameOverride, s.SetHostnameAsFQDN = ptrTo("Not_A.Host"), ptrTo(true)
			s.HostNetwork = true
			s.Containers[0].Ports = nil
		}, []string{
			"spec.hostnameOverride: Forbidden: may not be specified when setHostnameAsFQDN is true",
			"spec.hostnameOverride: Forbidden: may not be specified when hostNetwork is true",
			`spec.hostnameOverride: Invalid value: "Not_A.Host": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
		}},
		{"a hostnameOverride over 64 characters", func(s *corev1.PodSpec) {
			s.HostnameOverride = ptrTo(strings.Repeat("a", 30) + "." + strings.Repeat("b", 34))
		}, []string{"spec.hostnameOverride: Too long: may not be more than 64 bytes"}},
		{"two volume sources", func(s *corev1.PodSpec) {
			s.Volumes[0].HostPath = &corev1.HostPathVolumeSource{Path: "/x", Type: ptrTo(corev1.HostPathUnset)}
		}, []string{`spec.volumes[0].emptyDir: Forbidden: may not specify more than 1 volume type`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := validPodSpec()
			tc.mutate(s)
			assertErrors(t, ValidatePodSpec(s, field.NewPath("spec")), tc.want)
		})
	}
}

func TestValidatePodTemplateSpec(t *testing.T) {
	tmpl := &corev1.PodTemplateSpec{Spec: *validPodSpec()}
	tmpl.Labels = map[string]string{"app": "web"}
	tmpl.Spec.Containers[0].Image = ""
	tmpl.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "dbg", Image: "busybox"}}}
	assertErrors(t, ValidatePodTemplateSpec(tmpl, field.NewPath("spec", "template")), []string{
		"spec.template.spec.containers[0].image: Required value",
		"spec.template.spec.ephemeralContainers: Forbidden: ephemeral containers not allowed in pod template",
	})
}

func TestValidatePodSpecScheduling(t *testing.T) {
	nodeAffinity := func(reqs ...corev1.NodeSelectorRequirement) *corev1.Affinity {
		return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: reqs}}}}}
	}
	const reqPath = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0]"
	tests := []struct {
		name   string
		mutate func(s *corev1.PodSpec)
		want   []string
	}{
		{"valid node affinity", func(s *corev1.PodSpec) {
			s.Affinity = nodeAffinity(corev1.NodeSelectorRequirement{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}})
		}, nil},
		{"In without values", func(s *corev1.PodSpec) {
			s.Affinity = nodeAffinity(corev1.NodeSelectorRequirement{Key: "zone", Operator: corev1.NodeSelectorOpIn})
		}, []string{reqPath + ".values: Required value: must be specified when `operator` is 'In' or 'NotIn'"}},
		{"Exists with values", func(s *corev1.PodSpec) {
			s.Affinity = nodeAffinity(corev1.NodeSelectorRequirement{Key: "zone", Operator: corev1.NodeSelectorOpExists, Values: []string{"a"}})
		}, []string{reqPath + ".values: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"}},
		{"no node selector terms", func(s *corev1.PodSpec) {
			s.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{}}}
		}, []string{"spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms: Required value: must have at least one node selector term"}},
		{"anti-affinity without topology key", func(s *corev1.PodSpec) {
			s.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{
				{Weight: 100, PodAffinityTerm: corev1.PodAffinityTerm{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}}}}
		}, []string{"spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm.topologyKey: Required value: can not be empty"}},
		{"weight out of range", func(s *corev1.PodSpec) {
			s.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{
				{Weight: 0, PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: "zone"}}}}}
		}, []string{"spec.affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight: Invalid value: 0: must be in the range 1-100"}},
		{"topology spread", func(s *corev1.PodSpec) {
			s.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 0, TopologyKey: "zone", WhenUnsatisfiable: "Maybe"}}
		}, []string{"spec.topologySpreadConstraints[0].maxSkew: Invalid value: 0: must be greater than zero",
			`spec.topologySpreadConstraints[0].whenUnsatisfiable: Unsupported value: "Maybe": supported values: "DoNotSchedule", "ScheduleAnyway"`}},
		{"dns none without nameservers", func(s *corev1.PodSpec) {
			s.DNSPolicy = corev1.DNSNone
			s.DNSConfig = &corev1.PodDNSConfig{Searches: []string{"svc.cluster.local."}}
		}, []string{"spec.dnsConfig.nameservers: Required value: must provide at least one DNS nameserver when `dnsPolicy` is None"}},
		{"negative run as user", func(s *corev1.PodSpec) { s.SecurityContext.RunAsUser = ptrTo(int64(-1)) },
			[]string{"spec.securityContext.runAsUser: Invalid value: -1: must be between 0 and 2147483647, inclusive"}},
		{"host alias IP", func(s *corev1.PodSpec) { s.HostAliases = []corev1.HostAlias{{IP: "nope", Hostnames: []string{"db"}}} },
			[]string{`spec.hostAliases[0].ip: Invalid value: "nope": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := validPodSpec()
			tc.mutate(s)
			assertErrors(t, ValidatePodSpec(s, field.NewPath("spec")), tc.want)
		})
	}
}

func TestHostNetworkPorts(t *testing.T) {
	spec := validPodSpec()
	spec.HostNetwork = true
	spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, Protocol: "TCP"}}
	// A template may leave the host port to pod defaulting.
	assertErrors(t, ValidatePodSpec(spec, field.NewPath("spec")), nil)

	spec.Containers[0].Ports[0].HostPort = 8080
	assertErrors(t, ValidatePodSpec(spec, field.NewPath("spec")),
		[]string{"spec.containers[0].ports[0].hostPort: Invalid value: 8080: must match `containerPort` when `hostNetwork` is true"})

	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: *spec}
	pod.Spec.Containers[0].Ports[0].HostPort = 0
	assertErrors(t, podsResource().Strategy.Validate(context.Background(), pod),
		[]string{"spec.containers[0].ports[0].hostPort: Invalid value: 0: must match `containerPort` when `hostNetwork` is true"})
	podsResource().Strategy.Default(pod)
	assertErrors(t, podsResource().Strategy.Validate(context.Background(), pod), nil)
}

func TestValidateContainerEnv(t *testing.T) {
	fieldRef := func(path string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: path}}
	}
	tests := []struct {
		name    string
		env     []corev1.EnvVar
		envFrom []corev1.EnvFromSource
		want    []string
	}{
		{"valid", []corev1.EnvVar{
			{Name: "POD", ValueFrom: fieldRef("metadata.name")},
			{Name: "APP", ValueFrom: fieldRef("metadata.labels['app']")},
			{Name: "CPU", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.cpu"}}},
			{Name: "PASS", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "db"}, Key: "password"}}},
		}, []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}}, nil},
		{"unknown field path", []corev1.EnvVar{{Name: "X", ValueFrom: fieldRef("spec.hostname")}}, nil,
			[]string{`spec.containers[0].env[0].valueFrom.fieldRef.fieldPath: Unsupported value: "spec.hostname": supported values: "metadata.name", "metadata.namespace", "metadata.uid", "spec.nodeName", "spec.serviceAccountName", "status.hostIP", "status.hostIPs", "status.podIP", "status.podIPs"`}},
		{"value and valueFrom", []corev1.EnvVar{{Name: "X", Value: "v", ValueFrom: fieldRef("metadata.name")}}, nil,
			[]string{`spec.containers[0].env[0].valueFrom: Invalid value: "": may not be specified when ` + "`value`" + ` is not empty`}},
		{"secret key missing", []corev1.EnvVar{{Name: "X", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "db"}}}}}, nil,
			[]string{"spec.containers[0].env[0].valueFrom.secretKeyRef.key: Required value"}},
		{"unknown resource", []corev1.EnvVar{{Name: "X", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.gpu"}}}}, nil,
			[]string{`spec.containers[0].env[0].valueFrom.resourceFieldRef.resource: Unsupported value: "limits.gpu": supported values: "limits.cpu", "limits.ephemeral-storage", "limits.memory", "requests.cpu", "requests.ephemeral-storage", "requests.memory"`}},
		{"env from nothing", nil, []corev1.EnvFromSource{{Prefix: "P_"}},
			[]string{"spec.containers[0].envFrom: Invalid value: \"\": must specify one of: `configMapRef` or `secretRef`"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := validPodSpec()
			s.Containers[0].Env, s.Containers[0].EnvFrom = tc.env, tc.envFrom
			assertErrors(t, ValidatePodSpec(s, field.NewPath("spec")), tc.want)
		})
	}
}

func TestValidateExtendedResources(t *testing.T) {
	tests := []struct {
		name             string
		requests, limits corev1.ResourceList
		want             []string
	}{
		{"gpu limit only", nil, corev1.ResourceList{"example.com/gpu": resource.MustParse("1")}, nil},
		{"gpu request only", corev1.ResourceList{"example.com/gpu": resource.MustParse("1")}, nil,
			[]string{"spec.containers[0].resources.limits: Required value: Limit must be set for non overcommitable resources"}},
		{"gpu request below limit", corev1.ResourceList{"example.com/gpu": resource.MustParse("1")}, corev1.ResourceList{"example.com/gpu": resource.MustParse("2")},
			[]string{`spec.containers[0].resources.requests[example.com/gpu]: Invalid value: "1": must be equal to example.com/gpu limit of 2`}},
		{"unknown standard resource", corev1.ResourceList{"gpu": resource.MustParse("1")}, nil,
			[]string{`spec.containers[0].resources.requests[gpu]: Invalid value: "gpu": must be a standard resource for containers`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := validPodSpec()
			s.Containers[0].Resources = corev1.ResourceRequirements{Requests: tc.requests, Limits: tc.limits}
			assertErrors(t, ValidatePodSpec(s, field.NewPath("spec")), tc.want)
		})
	}
}

func TestValidateProjectedAndDownwardAPIVolumes(t *testing.T) {
	tests := []struct {
		name   string
		source corev1.VolumeSource
		want   []string
	}{
		{"service account token like the admission plugin's", corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{DefaultMode: ptrTo(int32(0644)),
			Sources: []corev1.VolumeProjection{
				{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{ExpirationSeconds: ptrTo(int64(3607)), Path: "token"}},
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}, Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
				{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
			}}}, nil},
		{"short token", corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{DefaultMode: ptrTo(int32(0644)),
			Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{ExpirationSeconds: ptrTo(int64(60)), Path: "token"}}}}},
			[]string{"spec.volumes[0].projected.sources[0].serviceAccountToken.expirationSeconds: Invalid value: 60: may not specify a duration less than 10 minutes"}},
		{"two kinds in one source", corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{DefaultMode: ptrTo(int32(0644)),
			Sources: []corev1.VolumeProjection{{
				Secret:    &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}},
				ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "c"}}}}}},
			[]string{"spec.volumes[0].projected.sources[0]: Forbidden: may not specify more than 1 volume type per source"}},
		{"pod certificate lifetimes as the conformance specs send them", corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{DefaultMode: ptrTo(int32(0644)),
			Sources: []corev1.VolumeProjection{
				{PodCertificate: &corev1.PodCertificateProjection{SignerName: "e2e.example.com/x", KeyType: "ECDSAP256", CredentialBundlePath: "a.pem", MaxExpirationSeconds: ptrTo(int32(3599))}},
				{PodCertificate: &corev1.PodCertificateProjection{SignerName: "e2e.example.com/x", KeyType: "ECDSAP256", CredentialBundlePath: "b.pem", MaxExpirationSeconds: ptrTo(int32(91*86400 + 1))}},
				{PodCertificate: &corev1.PodCertificateProjection{SignerName: "e2e.example.com/x", KeyType: "DSA", MaxExpirationSeconds: ptrTo(int32(3600))}},
			}}},
			[]string{
				"spec.volumes[0].projected.sources[0].podCertificate.maxExpirationSeconds: Invalid value: 3599: if provided, maxExpirationSeconds must be >= 3600",
				"spec.volumes[0].projected.sources[1].podCertificate.maxExpirationSeconds: Invalid value: 7862401: if provided, maxExpirationSeconds must be <= 7862400",
				`spec.volumes[0].projected.sources[2].podCertificate.keyType: Unsupported value: "DSA": supported values: "RSA3072", "RSA4096", "ECDSAP256", "ECDSAP384", "ECDSAP521", "ED25519"`,
				"spec.volumes[0].projected.sources[2].podCertificate: Required value: At least one of credentialBundlePath, keyPath, and certificateChainPath must be provided",
			}},
		{"cluster trust bundles by name or signer", corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{DefaultMode: ptrTo(int32(0644)),
			Sources: []corev1.VolumeProjection{
				{ClusterTrustBundle: &corev1.ClusterTrustBundleProjection{Name: ptrTo("b"), Path: "a.pem"}},
				{ClusterTrustBundle: &corev1.ClusterTrustBundleProjection{SignerName: ptrTo("example.com/s"), LabelSelector: &metav1.LabelSelector{}, Path: "b.pem"}},
				{ClusterTrustBundle: &corev1.ClusterTrustBundleProjection{Path: "c.pem"}},
			}}},
			[]string{"spec.volumes[0].projected.sources[2].clusterTrustBundle: Required value: either name or signerName must be specified"}},
		{"ephemeral volume without storage", corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{
			Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, VolumeMode: ptrTo(corev1.PersistentVolumeFilesystem)}}}},
			[]string{"spec.volumes[0].ephemeral.volumeClaimTemplate.spec.resources[storage]: Required value"}},
		{"downward API path escapes", corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{DefaultMode: ptrTo(int32(0644)),
			Items: []corev1.DownwardAPIVolumeFile{{Path: "../labels", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.labels"}}}}},
			[]string{`spec.volumes[0].downwardAPI.items[0].path: Invalid value: "../labels": must not contain '..'`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := validPodSpec()
			s.Volumes[0].VolumeSource = tc.source
			assertErrors(t, ValidatePodSpec(s, field.NewPath("spec")), tc.want)
		})
	}
}
