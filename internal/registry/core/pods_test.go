package core

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"mizzen/internal/registry"
)

func TestPodDefaults(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		HostNetwork: true,
		Containers: []corev1.Container{{Name: "c", Image: "nginx:1",
			Ports: []corev1.ContainerPort{{ContainerPort: 8080}},
			Resources: corev1.ResourceRequirements{
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")},
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")},
			}}},
	}}
	podsResource().Strategy.Default(pod)

	c := pod.Spec.Containers[0]
	wantRequests := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("1Gi")}
	if !equality.Semantic.DeepEqual(c.Resources.Requests, wantRequests) {
		t.Errorf("requests = %v, want %v (memory request defaulted from its limit)", c.Resources.Requests, wantRequests)
	}
	if got := c.Ports[0]; got.HostPort != 8080 || got.Protocol != corev1.ProtocolTCP {
		t.Errorf("port = %+v, want hostPort 8080 and protocol TCP on the host network", got)
	}
	if pod.Spec.EnableServiceLinks == nil || !*pod.Spec.EnableServiceLinks {
		t.Errorf("enableServiceLinks = %v, want true", pod.Spec.EnableServiceLinks)
	}
	if pod.Spec.RestartPolicy != corev1.RestartPolicyAlways || pod.Spec.SchedulerName != "default-scheduler" {
		t.Errorf("pod spec defaults missing: %+v", pod.Spec)
	}
}

func TestPodLevelResourceDefaults(t *testing.T) {
	container := func(req, lim corev1.ResourceList) corev1.Container {
		return corev1.Container{Name: "c", Image: "x", Resources: corev1.ResourceRequirements{Requests: req, Limits: lim}}
	}
	tests := []struct {
		name       string
		pod        corev1.ResourceRequirements
		containers []corev1.Container
		want       corev1.ResourceRequirements
	}{{
		name:       "limits only: requests from the containers, else the limits",
		pod:        corev1.ResourceRequirements{Limits: rl("cpu", "2", "memory", "1Gi")},
		containers: []corev1.Container{container(rl("cpu", "500m"), nil)},
		want:       corev1.ResourceRequirements{Limits: rl("cpu", "2", "memory", "1Gi"), Requests: rl("cpu", "500m", "memory", "1Gi")},
	}, {
		name:       "requests only: limits when every container has one",
		pod:        corev1.ResourceRequirements{Requests: rl("cpu", "1")},
		containers: []corev1.Container{container(nil, rl("cpu", "1", "memory", "512Mi"))},
		want:       corev1.ResourceRequirements{Requests: rl("cpu", "1"), Limits: rl("cpu", "1", "memory", "512Mi")},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{Spec: corev1.PodSpec{Resources: tc.pod.DeepCopy(), Containers: tc.containers}}
			defaultPod(pod)
			if !equality.Semantic.DeepEqual(*pod.Spec.Resources, tc.want) {
				t.Errorf("pod resources = %+v, want %+v", *pod.Spec.Resources, tc.want)
			}
		})
	}
}

func TestPodTemplateSpecGetsNoPodOnlyDefaults(t *testing.T) {
	spec := &corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x",
		Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}}
	DefaultPodSpec(spec)
	if spec.EnableServiceLinks != nil {
		t.Errorf("enableServiceLinks = %v in a template, want unset", *spec.EnableServiceLinks)
	}
	if spec.Containers[0].Resources.Requests != nil {
		t.Errorf("requests = %v in a template, want unset", spec.Containers[0].Resources.Requests)
	}
}

func TestPodPrepareForCreate(t *testing.T) {
	res := func(cpuReq, cpuLim, memReq, memLim string) corev1.ResourceRequirements {
		r := corev1.ResourceRequirements{Requests: corev1.ResourceList{}, Limits: corev1.ResourceList{}}
		set := func(l corev1.ResourceList, n corev1.ResourceName, v string) {
			if v != "" {
				l[n] = resource.MustParse(v)
			}
		}
		set(r.Requests, corev1.ResourceCPU, cpuReq)
		set(r.Limits, corev1.ResourceCPU, cpuLim)
		set(r.Requests, corev1.ResourceMemory, memReq)
		set(r.Limits, corev1.ResourceMemory, memLim)
		return r
	}
	tests := []struct {
		name      string
		resources []corev1.ResourceRequirements
		want      corev1.PodQOSClass
	}{
		{"no resources", []corev1.ResourceRequirements{{}}, corev1.PodQOSBestEffort},
		{"limits equal requests", []corev1.ResourceRequirements{res("1", "1", "1Gi", "1Gi")}, corev1.PodQOSGuaranteed},
		{"request only", []corev1.ResourceRequirements{res("100m", "", "", "")}, corev1.PodQOSBurstable},
		{"one guaranteed one best effort", []corev1.ResourceRequirements{res("1", "1", "1Gi", "1Gi"), {}}, corev1.PodQOSBurstable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1"}}
			for i, r := range tc.resources {
				pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: string(rune('a' + i)), Image: "x", Resources: r})
			}
			podsResource().Strategy.PrepareForCreate(context.Background(), pod)
			if pod.Status.Phase != corev1.PodPending || pod.Status.PodIP != "" {
				t.Errorf("status = %+v, want a fresh Pending status", pod.Status)
			}
			if pod.Status.QOSClass != tc.want {
				t.Errorf("qosClass = %q, want %q", pod.Status.QOSClass, tc.want)
			}
		})
	}
}

func newPod(name string) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx:1.25"}}},
	}
	defaultPod(pod)
	return pod
}

func TestPodValidateCreate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*corev1.Pod)
		want   []string
	}{
		{"valid", func(*corev1.Pod) {}, nil},
		{"image with whitespace", func(p *corev1.Pod) { p.Spec.Containers[0].Image = " nginx" },
			[]string{`spec.containers[0].image: Invalid value: " nginx": must not have leading or trailing whitespace`}},
		{"ephemeral containers on create", func(p *corev1.Pod) {
			p.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
				Name: "dbg", Image: "busybox", ImagePullPolicy: "Always", TerminationMessagePolicy: "File"}}}
		}, []string{"spec.ephemeralContainers: Forbidden: cannot be set on create"}},
		{"node name with scheduling gates", func(p *corev1.Pod) {
			p.Spec.NodeName = "n1"
			p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "wait"}}
		}, []string{"spec.nodeName: Forbidden: cannot be set until all schedulingGates have been cleared"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := newPod("p")
			tc.mutate(pod)
			assertErrors(t, podsResource().Strategy.Validate(context.Background(), pod), tc.want)
		})
	}
}

func TestPodValidateUpdate(t *testing.T) {
	forbidden := "spec: Forbidden: pod updates may not change fields other than " + podUpdatableFields
	tests := []struct {
		name   string
		mutate func(*corev1.Pod)
		want   []string
	}{
		{"no change", func(*corev1.Pod) {}, nil},
		{"image change", func(p *corev1.Pod) { p.Spec.Containers[0].Image = "nginx:1.26" }, nil},
		{"add toleration", func(p *corev1.Pod) {
			p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: "k", Operator: corev1.TolerationOpExists})
		}, nil},
		{"shorter deadline", func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = ptrTo(int64(30)) }, nil},
		{"longer deadline", func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = ptrTo(int64(120)) },
			[]string{"spec.activeDeadlineSeconds: Invalid value: 120: must be less than or equal to previous value"}},
		{"port change", func(p *corev1.Pod) {
			p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, Protocol: corev1.ProtocolTCP}}
		}, []string{forbidden}},
		{"node name change", func(p *corev1.Pod) { p.Spec.NodeName = "other" }, []string{forbidden}},
		{"ephemeral container added", func(p *corev1.Pod) {
			p.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
				Name: "debug", Image: "busybox", ImagePullPolicy: "Always", TerminationMessagePolicy: "File"}}}
		}, []string{forbidden}},
		{"remove toleration", func(p *corev1.Pod) { p.Spec.Tolerations = nil },
			[]string{"spec.tolerations: Forbidden: existing toleration can not be modified except its tolerationSeconds"}},
		{"image removed", func(p *corev1.Pod) { p.Spec.Containers[0].Image = "" },
			[]string{"spec.containers[0].image: Required value"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			old := newPod("p")
			old.Spec.ActiveDeadlineSeconds = ptrTo(int64(60))
			old.Spec.Tolerations = []corev1.Toleration{{Key: "a", Operator: corev1.TolerationOpExists}}
			pod := old.DeepCopy()
			tc.mutate(pod)
			assertErrors(t, podsResource().Strategy.ValidateUpdate(context.Background(), pod, old), tc.want)
		})
	}
}

// TestNegativeGracePeriodIsOne: a negative terminationGracePeriodSeconds is defaulted
// to 1, in a create and in an update alike, as upstream's defaulting: an update sending
// -1 for a pod created with -1 (stored as 1) changes nothing and is allowed (upstream's
// e2e "pod with negative grace period").
func TestNegativeGracePeriodIsOne(t *testing.T) {
	strategy := podsResource().Strategy
	old := newPod("p")
	old.Spec.TerminationGracePeriodSeconds = ptrTo(int64(-1))
	strategy.Default(old)
	if g := *old.Spec.TerminationGracePeriodSeconds; g != 1 {
		t.Fatalf("created with -1: terminationGracePeriodSeconds = %d, want 1", g)
	}
	pod := old.DeepCopy()
	pod.Spec.TerminationGracePeriodSeconds = ptrTo(int64(-1))
	strategy.Default(pod)
	if g := *pod.Spec.TerminationGracePeriodSeconds; g != 1 {
		t.Errorf("updated with -1: terminationGracePeriodSeconds = %d, want 1", g)
	}
	assertErrors(t, strategy.ValidateUpdate(context.Background(), pod, old), nil)
}

func TestPodFields(t *testing.T) {
	pod := newPod("p")
	pod.Spec.NodeName = "node-1"
	pod.Spec.ServiceAccountName = "sa"
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIPs: []corev1.PodIP{{IP: "10.1.0.5"}, {IP: "fd00::5"}}, NominatedNodeName: "node-2"}
	want := fields.Set{
		"spec.nodeName": "node-1", "spec.restartPolicy": "Always", "spec.schedulerName": "default-scheduler",
		"spec.serviceAccountName": "sa", "spec.hostNetwork": "false", "status.phase": "Running",
		"status.podIP": "10.1.0.5", "status.nominatedNodeName": "node-2",
	}
	if got := podFields(pod); !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("fields = %v, want %v", got, want)
	}
}

func TestPodPrinter(t *testing.T) {
	now := time.Now()
	ago := func(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-d)) }
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	tests := []struct {
		name   string
		mutate func(*corev1.Pod)
		want   []interface{} // NAME, READY, STATUS, RESTARTS, AGE, IP, NODE, NOMINATED NODE, READINESS GATES
	}{{
		name:   "pending unscheduled",
		mutate: func(p *corev1.Pod) { p.Status.Phase = corev1.PodPending },
		want:   []interface{}{"web", "0/1", "Pending", "0", "15m", "<none>", "<none>", "<none>", "<none>"},
	}, {
		name: "running and ready with restarts",
		mutate: func(p *corev1.Pod) {
			p.Spec.NodeName = "node-1"
			p.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIPs: []corev1.PodIP{{IP: "10.1.0.5"}},
				ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Ready: true, State: running, RestartCount: 3,
					LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{FinishedAt: ago(20 * time.Minute)}}}}}
		},
		want: []interface{}{"web", "1/1", "Running", "3 (20m ago)", "15m", "10.1.0.5", "node-1", "<none>", "<none>"},
	}, {
		name: "crash loop",
		mutate: func(p *corev1.Pod) {
			p.Status = corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: "app",
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}, RestartCount: 4}}}
		},
		want: []interface{}{"web", "0/1", "CrashLoopBackOff", "4", "15m", "<none>", "<none>", "<none>", "<none>"},
	}, {
		name: "completed",
		mutate: func(p *corev1.Pod) {
			p.Status = corev1.PodStatus{Phase: corev1.PodSucceeded, ContainerStatuses: []corev1.ContainerStatus{{Name: "app",
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed"}}}}}
		},
		want: []interface{}{"web", "0/1", "Completed", "0", "15m", "<none>", "<none>", "<none>", "<none>"},
	}, {
		name: "error exit without reason",
		mutate: func(p *corev1.Pod) {
			p.Status = corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{Name: "app",
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 2}}}}}
		},
		want: []interface{}{"web", "0/1", "ExitCode:2", "0", "15m", "<none>", "<none>", "<none>", "<none>"},
	}, {
		name: "waiting for first init container",
		mutate: func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "busybox"}}
			p.Status = corev1.PodStatus{Phase: corev1.PodPending,
				InitContainerStatuses: []corev1.ContainerStatus{{Name: "init", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}}},
				ContainerStatuses:     []corev1.ContainerStatus{{Name: "app", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}}}}
		},
		want: []interface{}{"web", "0/1", "Init:0/1", "0", "15m", "<none>", "<none>", "<none>", "<none>"},
	}, {
		name: "init container failed",
		mutate: func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "busybox"}}
			p.Status = corev1.PodStatus{Phase: corev1.PodPending,
				InitContainerStatuses: []corev1.ContainerStatus{{Name: "init", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}}}}}
		},
		want: []interface{}{"web", "0/1", "Init:Error", "0", "15m", "<none>", "<none>", "<none>", "<none>"},
	}, {
		name: "init done, app initializing",
		mutate: func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "busybox"}}
			p.Status = corev1.PodStatus{Phase: corev1.PodPending,
				InitContainerStatuses: []corev1.ContainerStatus{{Name: "init", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed"}}}},
				ContainerStatuses:     []corev1.ContainerStatus{{Name: "app", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}}}}
		},
		want: []interface{}{"web", "0/1", "PodInitializing", "0", "15m", "<none>", "<none>", "<none>", "<none>"},
	}, {
		name: "sidecar counts toward ready",
		mutate: func(p *corev1.Pod) {
			always := corev1.ContainerRestartPolicyAlways
			p.Spec.InitContainers = []corev1.Container{{Name: "proxy", Image: "envoy", RestartPolicy: &always}}
			p.Status = corev1.PodStatus{Phase: corev1.PodRunning,
				Conditions:            []corev1.PodCondition{{Type: corev1.PodInitialized, Status: corev1.ConditionTrue}},
				InitContainerStatuses: []corev1.ContainerStatus{{Name: "proxy", Started: ptrTo(true), Ready: true, State: running}},
				ContainerStatuses:     []corev1.ContainerStatus{{Name: "app", Ready: true, State: running}}}
		},
		want: []interface{}{"web", "2/2", "Running", "0", "15m", "<none>", "<none>", "<none>", "<none>"},
	}, {
		name: "terminating",
		mutate: func(p *corev1.Pod) {
			p.DeletionTimestamp = &metav1.Time{Time: now}
			p.Status = corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Ready: true, State: running}}}
		},
		want: []interface{}{"web", "1/1", "Terminating", "0", "15m", "<none>", "<none>", "<none>", "<none>"},
	}, {
		name: "scheduling gated with readiness gates",
		mutate: func(p *corev1.Pod) {
			p.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: "a"}, {ConditionType: "b"}}
			p.Status = corev1.PodStatus{Phase: corev1.PodPending, NominatedNodeName: "n2", Conditions: []corev1.PodCondition{
				{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonSchedulingGated},
				{Type: "a", Status: corev1.ConditionTrue}}}
		},
		want: []interface{}{"web", "0/1", "SchedulingGated", "0", "15m", "<none>", "<none>", "n2", "1/2"},
	}}
	printer := podsResource().Printer
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := newPod("web")
			pod.CreationTimestamp = ago(15 * time.Minute)
			tc.mutate(pod)
			assertRow(t, printer.Row(pod), tc.want)
		})
	}
	if len(printer.Columns) != 9 || printer.Columns[5].Name != "IP" || printer.Columns[5].Priority != 1 || printer.Columns[1].Priority != 0 {
		t.Errorf("columns = %+v", printer.Columns)
	}
}

func assertRow(t *testing.T, got, want []interface{}) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("row = %#v, want %#v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("cell %d = %#v, want %#v (row %#v)", i, got[i], want[i], got)
		}
	}
}

func TestPodIPsNormalizedAndValidated(t *testing.T) {
	tests := []struct {
		name             string
		status           corev1.PodStatus
		wantIP           string
		wantIPs          []corev1.PodIP
		wantErrs         []string
		wantHostIP       string
		wantHostIPsCount int
	}{
		{"podIP fills podIPs", corev1.PodStatus{PodIP: "10.1.0.5", HostIP: "192.168.1.2"}, "10.1.0.5", []corev1.PodIP{{IP: "10.1.0.5"}}, nil, "192.168.1.2", 1},
		{"podIPs fill podIP", corev1.PodStatus{PodIPs: []corev1.PodIP{{IP: "10.1.0.5"}, {IP: "fd00::5"}}}, "10.1.0.5", []corev1.PodIP{{IP: "10.1.0.5"}, {IP: "fd00::5"}}, nil, "", 0},
		{"podIP wins a disagreement", corev1.PodStatus{PodIP: "10.1.0.6", PodIPs: []corev1.PodIP{{IP: "10.1.0.5"}}}, "10.1.0.6", []corev1.PodIP{{IP: "10.1.0.6"}}, nil, "", 0},
		{"two IPv4 addresses", corev1.PodStatus{PodIPs: []corev1.PodIP{{IP: "10.1.0.5"}, {IP: "10.1.0.6"}}}, "10.1.0.5", []corev1.PodIP{{IP: "10.1.0.5"}, {IP: "10.1.0.6"}},
			[]string{`status.podIPs: Invalid value: [{"ip":"10.1.0.5"},{"ip":"10.1.0.6"}]: may specify no more than one IP for each IP family`}, "", 0},
		{"not an IP", corev1.PodStatus{PodIP: "pod"}, "pod", []corev1.PodIP{{IP: "pod"}},
			[]string{`status.podIPs[0]: Invalid value: "pod": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)`}, "", 0},
		{"host IPs of one family", corev1.PodStatus{HostIPs: []corev1.HostIP{{IP: "192.168.1.2"}, {IP: "192.168.1.3"}}}, "", nil,
			[]string{`status.hostIPs: Invalid value: [{"ip":"192.168.1.2"},{"ip":"192.168.1.3"}]: may specify no more than one IP for each IP family`}, "192.168.1.2", 2},
		{"negative observedGeneration", corev1.PodStatus{ObservedGeneration: -1}, "", nil,
			[]string{`status.observedGeneration: Invalid value: -1: must be a non-negative integer`}, "", 0},
		{"a nominated node that is no name", corev1.PodStatus{NominatedNodeName: "Node_1"}, "", nil,
			[]string{`status.nominatedNodeName: Invalid value: "Node_1": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`}, "", 0},
		{"a condition type that is no qualified name", corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}, {Type: "example.com/Ok", Status: corev1.ConditionTrue}, {Type: "not ok", Status: corev1.ConditionTrue, ObservedGeneration: -2}}}, "", nil,
			[]string{`status.conditions[2].observedGeneration: Invalid value: -2: must be a non-negative integer`,
				`status.conditions[2].Type: Invalid value: "not ok": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`}, "", 0},
		{"another QoS class", corev1.PodStatus{QOSClass: corev1.PodQOSGuaranteed}, "", nil,
			[]string{`status.qosClass: Invalid value: "Guaranteed": field is immutable`}, "", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			old := newPod("p")
			pod := old.DeepCopy()
			pod.Status = tc.status
			r := podsResource()
			// The kubelet writes status through the status subresource, which skips Default.
			r.Strategy.PrepareForUpdate(context.Background(), pod, old)
			if pod.Status.PodIP != tc.wantIP || !equality.Semantic.DeepEqual(pod.Status.PodIPs, tc.wantIPs) {
				t.Errorf("podIP %q podIPs %v, want %q %v", pod.Status.PodIP, pod.Status.PodIPs, tc.wantIP, tc.wantIPs)
			}
			if pod.Status.HostIP != tc.wantHostIP || len(pod.Status.HostIPs) != tc.wantHostIPsCount {
				t.Errorf("hostIP %q hostIPs %v", pod.Status.HostIP, pod.Status.HostIPs)
			}
			assertErrors(t, r.Strategy.(registry.StatusStrategy).ValidateStatusUpdate(context.Background(), pod, old), tc.wantErrs)
		})
	}
}

// TestPodStatusStateTransitions walks the restart policies through upstream's rule:
// a terminated container may leave the terminated state only if it would be restarted.
func TestPodStatusStateTransitions(t *testing.T) {
	terminated := func(name string, code int32) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code}}}
	}
	running := func(name string) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
	}
	always, never := corev1.ContainerRestartPolicyAlways, corev1.ContainerRestartPolicyNever
	forbidden := `status.containerStatuses[0].state: Forbidden: may not be transitioned to non-terminated state`
	tests := []struct {
		name   string
		spec   func(*corev1.PodSpec)
		code   int32
		init   bool
		wantOK bool
	}{
		{"pod Always", func(s *corev1.PodSpec) { s.RestartPolicy = corev1.RestartPolicyAlways }, 0, false, true},
		{"pod Never", func(s *corev1.PodSpec) { s.RestartPolicy = corev1.RestartPolicyNever }, 1, false, false},
		{"pod OnFailure, failed", func(s *corev1.PodSpec) { s.RestartPolicy = corev1.RestartPolicyOnFailure }, 1, false, true},
		{"pod OnFailure, succeeded", func(s *corev1.PodSpec) { s.RestartPolicy = corev1.RestartPolicyOnFailure }, 0, false, false},
		{"pod Never, container Always", func(s *corev1.PodSpec) {
			s.RestartPolicy = corev1.RestartPolicyNever
			s.Containers[0].RestartPolicy = &always
		}, 0, false, true},
		{"pod Always, container Never", func(s *corev1.PodSpec) { s.Containers[0].RestartPolicy = &never }, 0, false, false},
		{"container Never with a rule restarting exit code 42", func(s *corev1.PodSpec) {
			s.Containers[0].RestartPolicy = &never
			s.Containers[0].RestartPolicyRules = []corev1.ContainerRestartRule{{Action: corev1.ContainerRestartRuleActionRestart,
				ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: corev1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}}}}
		}, 42, false, true},
		{"the same rule, another exit code", func(s *corev1.PodSpec) {
			s.Containers[0].RestartPolicy = &never
			s.Containers[0].RestartPolicyRules = []corev1.ContainerRestartRule{{Action: corev1.ContainerRestartRuleActionRestart,
				ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: corev1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}}}}
		}, 1, false, false},
		{"pod Never, another container restarts them all", func(s *corev1.PodSpec) {
			s.RestartPolicy = corev1.RestartPolicyNever
			s.Containers = append(s.Containers, corev1.Container{Name: "side", Image: "busybox", RestartPolicy: &never,
				RestartPolicyRules: []corev1.ContainerRestartRule{{Action: corev1.ContainerRestartRuleActionRestartAllContainers,
					ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: corev1.ContainerRestartRuleOnExitCodesOpNotIn, Values: []int32{0}}}}})
		}, 0, false, true},
		{"pod Never, a sidecar init container", func(s *corev1.PodSpec) {
			s.RestartPolicy = corev1.RestartPolicyNever
			s.InitContainers = []corev1.Container{{Name: "app", Image: "busybox", RestartPolicy: &always}}
		}, 0, true, true},
		{"pod Never, a plain init container", func(s *corev1.PodSpec) {
			s.RestartPolicy = corev1.RestartPolicyNever
			s.InitContainers = []corev1.Container{{Name: "app", Image: "busybox"}}
		}, 0, true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			old := newPod("p")
			tc.spec(&old.Spec)
			if tc.init {
				old.Status.InitContainerStatuses = []corev1.ContainerStatus{terminated("app", tc.code)}
			} else {
				old.Status.ContainerStatuses = []corev1.ContainerStatus{terminated("app", tc.code)}
			}
			pod := old.DeepCopy()
			pod.Status.ContainerStatuses, pod.Status.InitContainerStatuses = nil, nil
			if tc.init {
				pod.Status.InitContainerStatuses = []corev1.ContainerStatus{running("app")}
			} else {
				pod.Status.ContainerStatuses = []corev1.ContainerStatus{running("app")}
			}
			var want []string
			if !tc.wantOK {
				want = []string{forbidden}
				if tc.init {
					want = []string{strings.Replace(forbidden, "containerStatuses", "initContainerStatuses", 1)}
				}
			}
			assertErrors(t, podsResource().Strategy.(registry.StatusStrategy).ValidateStatusUpdate(context.Background(), pod, old), want)
		})
	}
	t.Run("an ephemeral container never restarts", func(t *testing.T) {
		old := newPod("p")
		old.Status.EphemeralContainerStatuses = []corev1.ContainerStatus{terminated("dbg", 0)}
		pod := old.DeepCopy()
		pod.Status.EphemeralContainerStatuses = []corev1.ContainerStatus{running("dbg")}
		assertErrors(t, podsResource().Strategy.(registry.StatusStrategy).ValidateStatusUpdate(context.Background(), pod, old),
			[]string{`status.ephemeralContainerStatuses[0].state: Forbidden: may not be transitioned to non-terminated state`})
	})
	t.Run("a nomination for a bound pod", func(t *testing.T) {
		old := newPod("p")
		old.Spec.NodeName = "n1"
		pod := old.DeepCopy()
		pod.Status.NominatedNodeName = "n2"
		assertErrors(t, podsResource().Strategy.(registry.StatusStrategy).ValidateStatusUpdate(context.Background(), pod, old),
			[]string{`status.nominatedNodeName: Forbidden: may not be set on pods that are already bound to a node`})
	})
}
