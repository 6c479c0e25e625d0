package core

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
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
