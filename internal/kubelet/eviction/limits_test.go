package eviction

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

const mi = 1 << 20

func emptyDir(name, limit string, medium v1.StorageMedium) v1.Volume {
	src := &v1.EmptyDirVolumeSource{Medium: medium}
	if limit != "" {
		src.SizeLimit = ptr.To(resource.MustParse(limit))
	}
	return v1.Volume{Name: name, VolumeSource: v1.VolumeSource{EmptyDir: src}}
}

func container(name, limit string) v1.Container {
	c := v1.Container{Name: name, Image: "img"}
	if limit != "" {
		c.Resources.Limits = v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse(limit)}
	}
	return c
}

func pod(vols []v1.Volume, containers ...v1.Container) *v1.Pod {
	return &v1.Pod{Spec: v1.PodSpec{Volumes: vols, Containers: containers}}
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name  string
		pod   *v1.Pod
		usage Usage
		want  string
	}{{
		name:  "emptyDir under its limit",
		pod:   pod([]v1.Volume{emptyDir("scratch", "1Mi", "")}, container("app", "")),
		usage: Usage{EmptyDirs: map[string]int64{"scratch": mi}},
	}, {
		name:  "emptyDir over its limit",
		pod:   pod([]v1.Volume{emptyDir("scratch", "1Mi", "")}, container("app", "")),
		usage: Usage{EmptyDirs: map[string]int64{"scratch": mi + 4096}},
		want:  `Usage of EmptyDir volume "scratch" exceeds the limit "1Mi". `,
	}, {
		name:  "memory emptyDir over its limit",
		pod:   pod([]v1.Volume{emptyDir("shm", "64Mi", v1.StorageMediumMemory)}, container("app", "")),
		usage: Usage{EmptyDirs: map[string]int64{"shm": 65 * mi}},
		want:  `Usage of EmptyDir volume "shm" exceeds the limit "64Mi". `,
	}, {
		name:  "emptyDir without a limit is never over",
		pod:   pod([]v1.Volume{emptyDir("scratch", "", "")}, container("app", "")),
		usage: Usage{EmptyDirs: map[string]int64{"scratch": 100 * mi}},
	}, {
		name:  "container under its limit",
		pod:   pod(nil, container("app", "2Mi")),
		usage: Usage{Containers: map[string]int64{"app": 2 * mi}},
	}, {
		name: "container over its limit, the pod total not",
		pod:  pod(nil, container("a", "1Mi"), container("b", "10Mi")),
		usage: Usage{Containers: map[string]int64{
			"a": 2 * mi, "b": 0,
		}},
		want: `Container a exceeded its local ephemeral storage limit "1Mi". `,
	}, {
		name:  "pod total over the sum of its containers' limits",
		pod:   pod([]v1.Volume{emptyDir("scratch", "", "")}, container("a", "1Mi"), container("b", "1Mi")),
		usage: Usage{EmptyDirs: map[string]int64{"scratch": 2 * mi}, Containers: map[string]int64{"a": 4096, "b": 4096}},
		want:  "Pod ephemeral local storage usage exceeds the total limit of containers 2Mi. ",
	}, {
		name:  "a memory emptyDir does not count towards the pod total",
		pod:   pod([]v1.Volume{emptyDir("shm", "", v1.StorageMediumMemory)}, container("a", "1Mi")),
		usage: Usage{EmptyDirs: map[string]int64{"shm": 10 * mi}, Containers: map[string]int64{"a": 4096}},
	}, {
		name:  "the pod limit is the sum of the limits that are set",
		pod:   pod(nil, container("a", "1Mi"), container("b", "")),
		usage: Usage{Containers: map[string]int64{"a": 4096, "b": 2 * mi}},
		want:  "Pod ephemeral local storage usage exceeds the total limit of containers 1Mi. ",
	}, {
		name:  "emptyDir comes before the pod total and the containers",
		pod:   pod([]v1.Volume{emptyDir("scratch", "1Mi", "")}, container("a", "1Mi")),
		usage: Usage{EmptyDirs: map[string]int64{"scratch": 3 * mi}, Containers: map[string]int64{"a": 3 * mi}},
		want:  `Usage of EmptyDir volume "scratch" exceeds the limit "1Mi". `,
	}, {
		name:  "pod without limits is untouched whatever it uses",
		pod:   pod([]v1.Volume{emptyDir("scratch", "", "")}, container("a", "")),
		usage: Usage{EmptyDirs: map[string]int64{"scratch": 1 << 40}, Containers: map[string]int64{"a": 1 << 40}},
	}, {
		name:  "nothing measured",
		pod:   pod([]v1.Volume{emptyDir("scratch", "1Mi", "")}, container("a", "1Mi")),
		usage: Usage{},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Check(tt.pod, tt.usage); got != tt.want {
				t.Errorf("Check() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestPodLimit(t *testing.T) {
	sidecar := container("proxy", "1Mi")
	sidecar.RestartPolicy = ptr.To(v1.ContainerRestartPolicyAlways)
	tests := []struct {
		name   string
		pod    *v1.Pod
		want   string
		wantOK bool
	}{
		{name: "no limits", pod: pod(nil, container("a", ""))},
		{name: "containers sum", pod: pod(nil, container("a", "1Mi"), container("b", "3Mi")), want: "4Mi", wantOK: true},
		{name: "a larger init container wins", pod: func() *v1.Pod {
			p := pod(nil, container("a", "1Mi"))
			p.Spec.InitContainers = []v1.Container{container("init", "5Mi")}
			return p
		}(), want: "5Mi", wantOK: true},
		{name: "sidecars count with the containers", pod: func() *v1.Pod {
			p := pod(nil, container("a", "1Mi"))
			p.Spec.InitContainers = []v1.Container{sidecar, container("init", "1Mi")}
			return p
		}(), want: "2Mi", wantOK: true},
		{name: "overhead is added", pod: func() *v1.Pod {
			p := pod(nil, container("a", "1Mi"))
			p.Spec.Overhead = v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse("1Mi")}
			return p
		}(), want: "2Mi", wantOK: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := podLimit(tt.pod)
			if ok != tt.wantOK || ok && got.String() != tt.want {
				t.Errorf("podLimit() = %s, %v; want %s, %v", got.String(), ok, tt.want, tt.wantOK)
			}
			if HasLimits(tt.pod) != tt.wantOK {
				t.Errorf("HasLimits() = %v, want %v", !tt.wantOK, tt.wantOK)
			}
		})
	}
}
