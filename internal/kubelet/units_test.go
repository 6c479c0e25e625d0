package kubelet

import (
	"context"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	testclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

func TestBackoffDoublesToCap(t *testing.T) {
	clk := testclock.NewFakeClock(epoch)
	b := newBackoff(clk, 10*time.Second, 5*time.Minute)
	// Each crash: the container ran and exited at "now"; the restart waits the back-off.
	wantWaits := []time.Duration{0, 10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second,
		160 * time.Second, 300 * time.Second, 300 * time.Second}
	for i, want := range wantWaits {
		finished := clk.Now()
		wait, left := b.inBackoffSince("k", finished)
		if (want > 0) != wait || wait && left != want {
			t.Fatalf("crash %d: wait=%v left=%v, want %v", i, wait, left, want)
		}
		clk.Step(want)
		if wait, _ := b.inBackoffSince("k", finished); wait {
			t.Fatalf("crash %d: still in back-off after %v", i, want)
		}
		b.next("k", finished)
	}
	// A long quiet run forgets the history.
	clk.Step(11 * time.Minute)
	if wait, _ := b.inBackoffSince("k", clk.Now()); wait {
		t.Fatal("back-off survived 11 quiet minutes")
	}
}

func TestExpandVars(t *testing.T) {
	vars := map[string]string{"A": "1", "B": "two"}
	for in, want := range map[string]string{
		"plain":        "plain",
		"$(A)":         "1",
		"x$(A)y$(B)z":  "x1ytwoz",
		"$(MISSING)":   "$(MISSING)",
		"$$(A)":        "$(A)",
		"cost $5":      "cost $5",
		"$(A":          "$(A",
		"trailing $":   "trailing $",
		"$(A)$(A)$$$$": "11$$",
	} {
		if got := expandVars(in, vars); got != want {
			t.Errorf("expandVars(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestMakeEnv(t *testing.T) {
	client := k8sfake.NewSimpleClientset(
		&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg", Namespace: "ns"}, Data: map[string]string{"LEVEL": "debug", "MODE": "fast"}},
		&v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sec", Namespace: "ns"}, Data: map[string][]byte{"TOKEN": []byte("s3cret")}},
	)
	kl := &Kubelet{client: client, opts: Options{NodeIP: "10.0.0.5", MaxPods: 110,
		Machine: &MachineInfo{CPUCores: 4, MemoryBytes: 8 << 30}}}
	kl.volumeSources = volumeSources{kl: kl} // no cache: every read is a GET
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u-1", Labels: map[string]string{"app": "web"}},
		Spec:       v1.PodSpec{NodeName: "node-1", ServiceAccountName: "sa"},
	}
	c := &v1.Container{
		Name: "app",
		Resources: v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceMemory: resource.MustParse("64Mi")},
			Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("1500m")},
		},
		EnvFrom: []v1.EnvFromSource{
			{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}, Prefix: "CFG_"},
			{SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "missing"}, Optional: ptr.To(true)}},
		},
		Env: []v1.EnvVar{
			{Name: "CFG_MODE", Value: "slow"}, // overrides envFrom
			{Name: "NAME", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			{Name: "APP", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels['app']"}}},
			{Name: "NODE", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
			{Name: "POD_IP", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
			{Name: "HOST_IP", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "status.hostIP"}}},
			{Name: "CPU_LIMIT", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "limits.cpu"}}},
			{Name: "CPU_MILLIS", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "limits.cpu", Divisor: resource.MustParse("1m")}}},
			{Name: "MEM_LIMIT", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "limits.memory"}}},
			{Name: "MEM_REQ_MI", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "requests.memory", Divisor: resource.MustParse("1Mi")}}},
			{Name: "LEVEL", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}, Key: "LEVEL"}}},
			{Name: "TOKEN", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "sec"}, Key: "TOKEN"}}},
			{Name: "OPT", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}, Key: "nope", Optional: ptr.To(true)}}},
			{Name: "URL", Value: "http://$(NODE):80/$(UNDEFINED)"},
		},
	}
	env, err := kl.makeEnv(context.Background(), pod, c, []string{"10.88.0.7"})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	var order []string
	for _, kv := range env {
		got[kv.Key] = string(kv.Value)
		order = append(order, kv.Key)
	}
	want := map[string]string{
		"CFG_LEVEL": "debug", "CFG_MODE": "slow", "NAME": "p", "APP": "web", "NODE": "node-1",
		"POD_IP": "10.88.0.7", "HOST_IP": "10.0.0.5", "CPU_LIMIT": "2", "CPU_MILLIS": "1500",
		"MEM_LIMIT": "8589934592", "MEM_REQ_MI": "64", "LEVEL": "debug", "TOKEN": "s3cret",
		"URL": "http://node-1:80/$(UNDEFINED)",
	}
	if len(got) != len(want) {
		t.Errorf("got %d variables %v, want %d", len(got), order, len(want))
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if order[0] != "CFG_LEVEL" || order[1] != "CFG_MODE" {
		t.Errorf("envFrom variables not first: %v", order)
	}

	for _, bad := range []v1.EnvVar{
		{Name: "X", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "absent"}, Key: "k"}}},
		{Name: "X", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "sec"}, Key: "absent"}}},
		{Name: "X", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "spec.bogus"}}},
	} {
		if _, err := kl.makeEnv(context.Background(), pod, &v1.Container{Name: "c", Env: []v1.EnvVar{bad}}, nil); err == nil {
			t.Errorf("env %+v resolved without error", bad.ValueFrom)
		}
	}
}

func resources(cpuReq, memReq, cpuLim, memLim string) v1.ResourceRequirements {
	r := v1.ResourceRequirements{Requests: v1.ResourceList{}, Limits: v1.ResourceList{}}
	set := func(l v1.ResourceList, n v1.ResourceName, v string) {
		if v != "" {
			l[n] = resource.MustParse(v)
		}
	}
	set(r.Requests, v1.ResourceCPU, cpuReq)
	set(r.Requests, v1.ResourceMemory, memReq)
	set(r.Limits, v1.ResourceCPU, cpuLim)
	set(r.Limits, v1.ResourceMemory, memLim)
	return r
}

func TestResourcesAndQoS(t *testing.T) {
	const memCap = 8 << 30
	kl := &Kubelet{opts: Options{Machine: &MachineInfo{MemoryBytes: memCap}}}
	tests := []struct {
		name string
		res  v1.ResourceRequirements
		qos  v1.PodQOSClass
		want *runtimeapi.LinuxContainerResources
	}{
		{"best effort", resources("", "", "", ""), v1.PodQOSBestEffort,
			&runtimeapi.LinuxContainerResources{CpuShares: 2, OomScoreAdj: 1000}},
		{"guaranteed", resources("500m", "1Gi", "500m", "1Gi"), v1.PodQOSGuaranteed,
			&runtimeapi.LinuxContainerResources{CpuShares: 512, CpuPeriod: 100000, CpuQuota: 50000, MemoryLimitInBytes: 1 << 30, OomScoreAdj: -997}},
		{"limits only are guaranteed", resources("", "", "2", "2Gi"), v1.PodQOSGuaranteed,
			&runtimeapi.LinuxContainerResources{CpuShares: 2048, CpuPeriod: 100000, CpuQuota: 200000, MemoryLimitInBytes: 2 << 30, OomScoreAdj: -997}},
		{"burstable scales with memory request", resources("100m", "2Gi", "", ""), v1.PodQOSBurstable,
			&runtimeapi.LinuxContainerResources{CpuShares: 102, OomScoreAdj: 750}},
		{"burstable tiny cpu quota floors at 1ms", resources("1m", "", "1m", ""), v1.PodQOSBurstable,
			&runtimeapi.LinuxContainerResources{CpuShares: 2, CpuPeriod: 100000, CpuQuota: 1000, OomScoreAdj: 999}},
		{"burstable huge request clamps at 3", resources("", "8Gi", "", ""), v1.PodQOSBurstable,
			&runtimeapi.LinuxContainerResources{CpuShares: 2, OomScoreAdj: 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Resources: tt.res}}}}
			if got := qosClass(pod); got != tt.qos {
				t.Errorf("qos = %s, want %s", got, tt.qos)
			}
			got := kl.linuxResources(pod, &pod.Spec.Containers[0])
			if got.CpuShares != tt.want.CpuShares || got.CpuPeriod != tt.want.CpuPeriod || got.CpuQuota != tt.want.CpuQuota ||
				got.MemoryLimitInBytes != tt.want.MemoryLimitInBytes || got.OomScoreAdj != tt.want.OomScoreAdj {
				t.Errorf("resources = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestPodPhase(t *testing.T) {
	running := v1.ContainerStatus{State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}
	waiting := v1.ContainerStatus{State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ContainerCreating"}}}
	exited := func(code int32) v1.ContainerStatus {
		return v1.ContainerStatus{State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: code}}}
	}
	ok, bad := exited(0), exited(1)
	backoff := v1.ContainerStatus{State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
		LastTerminationState: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 1}}}
	// ContainerRestartRules: a container's own policy and rules over the pod's.
	never, onFailure := v1.ContainerRestartPolicyNever, v1.ContainerRestartPolicyOnFailure
	neverContainer := &v1.Container{RestartPolicy: &never}
	restartOn42 := &v1.Container{RestartPolicy: &never, RestartPolicyRules: []v1.ContainerRestartRule{{Action: v1.ContainerRestartRuleActionRestart,
		ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: v1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}}}}}
	tests := []struct {
		name       string
		policy     v1.RestartPolicy
		container  *v1.Container // the spec of every status's container; nil: no policy of its own
		statuses   []v1.ContainerStatus
		initDone   bool
		initFailed bool
		terminal   bool
		want       v1.PodPhase
	}{
		{"initializing", v1.RestartPolicyAlways, nil, []v1.ContainerStatus{waiting}, false, false, false, v1.PodPending},
		{"init failed", v1.RestartPolicyNever, nil, []v1.ContainerStatus{waiting}, false, true, false, v1.PodFailed},
		{"creating", v1.RestartPolicyAlways, nil, []v1.ContainerStatus{running, waiting}, true, false, false, v1.PodPending},
		{"running", v1.RestartPolicyAlways, nil, []v1.ContainerStatus{running, ok}, true, false, false, v1.PodRunning},
		{"crash looping is running", v1.RestartPolicyAlways, nil, []v1.ContainerStatus{backoff}, true, false, false, v1.PodRunning},
		{"always restarting all stopped", v1.RestartPolicyAlways, nil, []v1.ContainerStatus{bad}, true, false, false, v1.PodRunning},
		{"never, one failed", v1.RestartPolicyNever, nil, []v1.ContainerStatus{ok, bad}, true, false, false, v1.PodFailed},
		{"never, all succeeded", v1.RestartPolicyNever, nil, []v1.ContainerStatus{ok, ok}, true, false, false, v1.PodSucceeded},
		{"on failure, failed restarting", v1.RestartPolicyOnFailure, nil, []v1.ContainerStatus{bad}, true, false, false, v1.PodRunning},
		{"on failure, succeeded", v1.RestartPolicyOnFailure, nil, []v1.ContainerStatus{ok}, true, false, false, v1.PodSucceeded},
		{"deleted always pod killed", v1.RestartPolicyAlways, nil, []v1.ContainerStatus{bad}, true, false, true, v1.PodFailed},
		{"always pod, never container failed", v1.RestartPolicyAlways, neverContainer, []v1.ContainerStatus{bad}, true, false, false, v1.PodFailed},
		{"always pod, never container succeeded", v1.RestartPolicyAlways, neverContainer, []v1.ContainerStatus{ok}, true, false, false, v1.PodSucceeded},
		{"never pod, on-failure container failed", v1.RestartPolicyNever, &v1.Container{RestartPolicy: &onFailure}, []v1.ContainerStatus{bad}, true, false, false, v1.PodRunning},
		{"a rule restarts on 42", v1.RestartPolicyNever, restartOn42, []v1.ContainerStatus{exited(42)}, true, false, false, v1.PodRunning},
		{"no rule for 1", v1.RestartPolicyNever, restartOn42, []v1.ContainerStatus{bad}, true, false, false, v1.PodFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := v1.Container{}
			if tt.container != nil {
				c = *tt.container
			}
			c.Name = "c"
			pod := &v1.Pod{Spec: v1.PodSpec{RestartPolicy: tt.policy, Containers: []v1.Container{c}}}
			statuses := slices.Clone(tt.statuses)
			for i := range statuses {
				statuses[i].Name = "c"
			}
			if got := podPhase(pod, statuses, tt.initDone, tt.initFailed, tt.terminal); got != tt.want {
				t.Errorf("phase = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestSandboxConfig(t *testing.T) {
	kl := &Kubelet{opts: Options{Hostname: "host-a", ClusterDNS: []string{"10.96.0.10"}, ClusterDomain: "cluster.local", PodLogsDir: "/var/log/pods"}}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "shop", UID: "u-9", Labels: map[string]string{"app": "web"}},
		Spec: v1.PodSpec{
			Containers: []v1.Container{{Name: "c", Ports: []v1.ContainerPort{{ContainerPort: 80, HostPort: 8080, Protocol: v1.ProtocolTCP}, {ContainerPort: 53, Protocol: v1.ProtocolUDP}}}},
			DNSConfig:  &v1.PodDNSConfig{Searches: []string{"example.com"}, Options: []v1.PodDNSConfigOption{{Name: "ndots", Value: ptr.To("2")}}},
		},
	}
	cfg, err := kl.sandboxConfig(pod, 1)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Hostname != "web-0" || cfg.LogDirectory != "/var/log/pods/shop_web-0_u-9" || cfg.Metadata.Attempt != 1 {
		t.Errorf("hostname %q logdir %q attempt %d", cfg.Hostname, cfg.LogDirectory, cfg.Metadata.Attempt)
	}
	for k, v := range map[string]string{"app": "web", labelPodName: "web-0", labelPodNamespace: "shop", labelPodUID: "u-9"} {
		if cfg.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, cfg.Labels[k], v)
		}
	}
	if len(cfg.DnsConfig.Servers) != 1 || cfg.DnsConfig.Servers[0] != "10.96.0.10" ||
		cfg.DnsConfig.Searches[0] != "shop.svc.cluster.local" || cfg.DnsConfig.Searches[len(cfg.DnsConfig.Searches)-1] != "example.com" {
		t.Errorf("dns = %v", cfg.DnsConfig)
	}
	if len(cfg.DnsConfig.Options) != 1 || cfg.DnsConfig.Options[0] != "ndots:2" {
		t.Errorf("dns options = %v, want the pod's ndots:2 replacing ndots:5", cfg.DnsConfig.Options)
	}
	if len(cfg.PortMappings) != 2 || cfg.PortMappings[0].HostPort != 8080 || cfg.PortMappings[1].Protocol != runtimeapi.Protocol_UDP {
		t.Errorf("port mappings = %v", cfg.PortMappings)
	}
	if cfg.Linux.CgroupParent != "/kubepods/besteffort/podu-9" || cfg.Linux.SecurityContext.NamespaceOptions.Network != runtimeapi.NamespaceMode_POD {
		t.Errorf("linux = %v", cfg.Linux)
	}
	pod.Spec.HostNetwork = true
	cfg, _ = kl.sandboxConfig(pod, 0)
	if cfg.Hostname != "" || cfg.Linux.SecurityContext.NamespaceOptions.Network != runtimeapi.NamespaceMode_NODE {
		t.Errorf("host network: hostname %q ns %v", cfg.Hostname, cfg.Linux.SecurityContext.NamespaceOptions)
	}
}

func TestHasLatestTag(t *testing.T) {
	for image, want := range map[string]bool{
		"nginx": true, "nginx:latest": true, "nginx:1.27": false, "localhost:5000/app": true,
		"localhost:5000/app:v1": false, "app@sha256:abc": false,
	} {
		if got := hasLatestTag(image); got != want {
			t.Errorf("hasLatestTag(%q) = %v, want %v", image, got, want)
		}
	}
}

func TestParseTaints(t *testing.T) {
	got, err := ParseTaints("dedicated=gpu:NoSchedule, node-role.kubernetes.io/control-plane:NoExecute")
	if err != nil {
		t.Fatal(err)
	}
	want := []v1.Taint{
		{Key: "dedicated", Value: "gpu", Effect: v1.TaintEffectNoSchedule},
		{Key: "node-role.kubernetes.io/control-plane", Effect: v1.TaintEffectNoExecute},
	}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("got %v, want %v", got, want)
	}
	for _, bad := range []string{"novalue", "k=v:Sometimes", "=v:NoSchedule"} {
		if _, err := ParseTaints(bad); err == nil {
			t.Errorf("ParseTaints(%q) succeeded", bad)
		}
	}
}

// TestKeepTerminated: a container the API shows terminated stays so in the next status
// unless the pod restarts it, so the kubelet never sends what the apiserver refuses.
func TestKeepTerminated(t *testing.T) {
	exited := v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}}
	waiting := v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ContainerCreating"}}
	for _, tc := range []struct {
		policy v1.RestartPolicy
		kept   bool
	}{{v1.RestartPolicyNever, true}, {v1.RestartPolicyOnFailure, false}, {v1.RestartPolicyAlways, false}} {
		pod := &v1.Pod{Spec: v1.PodSpec{RestartPolicy: tc.policy, Containers: []v1.Container{{Name: "app"}},
			EphemeralContainers: []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "dbg"}}}}}
		old := v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{{Name: "app", State: exited}},
			EphemeralContainerStatuses: []v1.ContainerStatus{{Name: "dbg", State: exited}}}
		s := v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{{Name: "app", State: waiting}},
			EphemeralContainerStatuses: []v1.ContainerStatus{{Name: "dbg", State: waiting}}}
		keepTerminated(pod, &old, &s)
		if got := s.ContainerStatuses[0].State.Terminated != nil; got != tc.kept {
			t.Errorf("restartPolicy %s: container kept terminated = %v, want %v", tc.policy, got, tc.kept)
		}
		if s.EphemeralContainerStatuses[0].State.Terminated == nil {
			t.Errorf("restartPolicy %s: the ephemeral container left the terminated state", tc.policy)
		}
	}
}
