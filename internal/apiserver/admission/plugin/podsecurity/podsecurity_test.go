package podsecurity

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"mizzen/internal/apiserver/admission"
	"mizzen/internal/apiserver/admission/admissiontest"
)

func ns(name string, labels map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

func pod(name string, mutate func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}}}
	if mutate != nil {
		mutate(p)
	}
	return p
}

func podAttrs(p *corev1.Pod) *admission.Attributes {
	return &admission.Attributes{Operation: admission.Create, Resource: corev1.SchemeGroupVersion.WithResource("pods"),
		Namespace: p.Namespace, Name: p.Name, Object: p}
}

func restrictedPod(p *corev1.Pod) {
	p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
	p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false),
		Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}
}

func TestEnforce(t *testing.T) {
	tests := []struct {
		name   string
		labels map[string]string
		pod    *corev1.Pod
		want   string
	}{
		{"no labels: privileged", nil, pod("p", func(p *corev1.Pod) { p.Spec.HostNetwork = true }), ""},
		{"baseline refuses host namespaces and privileged", map[string]string{"pod-security.kubernetes.io/enforce": "baseline"},
			pod("p", func(p *corev1.Pod) {
				p.Spec.HostNetwork, p.Spec.HostPID = true, true
				p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
			}),
			`pods "p" is forbidden: violates PodSecurity "baseline:latest": host namespaces (hostNetwork=true, hostPID=true), privileged (container "c" must not set securityContext.privileged=true)`},
		{"baseline admits a plain pod", map[string]string{"pod-security.kubernetes.io/enforce": "baseline"}, pod("p", nil), ""},
		{"restricted refuses a plain pod", map[string]string{"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "v1.30"}, pod("p", nil),
			`pods "p" is forbidden: violates PodSecurity "restricted:v1.30": allowPrivilegeEscalation != false (container "c" must set securityContext.allowPrivilegeEscalation=false), unrestricted capabilities (container "c" must set securityContext.capabilities.drop=["ALL"]), runAsNonRoot != true (pod or container "c" must set securityContext.runAsNonRoot=true), seccompProfile (pod or container "c" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")`},
		{"restricted admits a hardened pod", map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}, pod("p", restrictedPod), ""},
		{"restricted volume types", map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}, pod("p", func(p *corev1.Pod) {
			restrictedPod(p)
			p.Spec.Volumes = []corev1.Volume{{Name: "h", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
		}), `violates PodSecurity "restricted:latest": restricted volume types (volume "h" uses restricted volume type "hostPath")`},
	}
	for _, tt := range tests {
		p := New(admissiontest.New(ns("ns", tt.labels)))
		err := p.Validate(context.Background(), podAttrs(tt.pod))
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.want != "" && (!apierrors.IsForbidden(err) || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s:\n got %v\nwant %s", tt.name, err, tt.want)
		}
	}
}

func TestWarnings(t *testing.T) {
	var got []string
	ctx := admission.WithWarnings(context.Background(), func(w string) { got = append(got, w) })
	r := admissiontest.New(ns("ns", map[string]string{"pod-security.kubernetes.io/warn": "baseline"}))
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: "ns"}}
	d.Spec.Template.Spec.Containers = []corev1.Container{{Name: "c", Image: "i", Ports: []corev1.ContainerPort{{ContainerPort: 80, HostPort: 80}}}}
	a := &admission.Attributes{Operation: admission.Create, Resource: appsv1.SchemeGroupVersion.WithResource("deployments"), Namespace: "ns", Name: "d", Object: d}
	if err := New(r).Validate(ctx, a); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != `would violate PodSecurity "baseline:latest": hostPort (container "c" uses hostPort 80)` {
		t.Errorf("warnings %q", got)
	}

	// Labelling a namespace restricted warns about the pods already in it.
	got = nil
	r.Add(pod("running", nil))
	old := ns("ns", nil)
	updated := ns("ns", map[string]string{"pod-security.kubernetes.io/enforce": "restricted"})
	a = &admission.Attributes{Operation: admission.Update, Resource: corev1.SchemeGroupVersion.WithResource("namespaces"), Name: "ns", Object: updated, OldObject: old}
	if err := New(r).Validate(ctx, a); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != `existing pods in namespace "ns" violate the new PodSecurity enforce level "restricted:latest"` || !strings.HasPrefix(got[1], "running: allowPrivilegeEscalation != false") {
		t.Errorf("warnings %q", got)
	}
	bad := ns("ns", map[string]string{"pod-security.kubernetes.io/enforce": "strict"})
	a = &admission.Attributes{Operation: admission.Update, Resource: corev1.SchemeGroupVersion.WithResource("namespaces"), Name: "ns", Object: bad, OldObject: old}
	if err := New(r).Validate(ctx, a); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), `metadata.labels[pod-security.kubernetes.io/enforce]: Unsupported value: "strict"`) {
		t.Errorf("invalid level: %v", err)
	}
}

// Reading a namespace's policy allocates nothing when its labels are valid: it runs
// twice for every pod admitted.
func TestParseValidLabelsAllocatesNothing(t *testing.T) {
	labels := map[string]string{labelPrefix + "enforce": "baseline", labelPrefix + "enforce-version": "v1.30", labelPrefix + "warn": "restricted"}
	allocs := testing.AllocsPerRun(100, func() {
		if p, errs := parse(labels, "enforce"); p.level != Baseline || p.version != "v1.30" || errs != nil {
			t.Fatalf("enforce: %+v %v", p, errs)
		}
		if p, errs := parse(labels, "warn"); p.level != Restricted || p.version != "latest" || errs != nil {
			t.Fatalf("warn: %+v %v", p, errs)
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations to read two modes' valid labels, want none", allocs)
	}
	if _, errs := parse(map[string]string{labelPrefix + "audit-version": "1.30"}, "audit"); len(errs) != 1 || errs[0].Field != "metadata.labels[pod-security.kubernetes.io/audit-version]" {
		t.Errorf("a bad version label: %v, want one error at its key", errs)
	}
}
