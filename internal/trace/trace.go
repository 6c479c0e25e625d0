// Package trace rebuilds a pod's journey from creation to Ready out of what the
// components recorded while they worked: the apiserver's creationTimestamp, the
// scheduler's FailedScheduling and Scheduled events, the kubelet's status.startTime (when it acknowledged
// the pod), its PodReadyToStartContainers and Ready conditions, and its Pulling,
// Pulled, Created and Started events. Each step carries the component that recorded
// it and the time it took since the step before; nothing is inferred from the clock of
// the process reading it. For a Deployment it summarises the steps of all its pods as
// percentiles.
package trace

import (
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Step names, in the order a pod goes through them.
const (
	StepCreated          = "created"
	StepFirstAttempt     = "first scheduling attempt"
	StepScheduled        = "scheduled"
	StepKubeletAccepted  = "accepted by kubelet"
	StepSandboxReady     = "sandbox ready"
	StepImagePulling     = "image pulling"
	StepImageReady       = "image ready"
	StepContainerCreated = "container created"
	StepContainerStarted = "container started"
	StepReady            = "ready"
)

// Step is one stage of a pod's journey.
type Step struct {
	// Name is one of the Step* names; Container names the container for per-container steps.
	Name      string
	Container string
	// Component is who recorded it: "kube-apiserver", the scheduler's name, "kubelet/NODE".
	Component string
	At        time.Time
	// Precise: At has sub-second precision (an events.k8s.io eventTime); otherwise it
	// is truncated to the second, as Kubernetes' timestamps are.
	Precise bool
	// Source says where the step was read from ("event Scheduled", "status.startTime").
	Source string
	Detail string
}

// Label is the step's name with its container, as printed.
func (s Step) Label() string {
	if s.Container != "" {
		return s.Name + " (" + s.Container + ")"
	}
	return s.Name
}

// Journey is a pod's steps in the order the pod goes through them, and what is missing.
type Journey struct {
	Namespace, Pod, Node string
	Steps                []Step
	// Pending lists steps not (yet) recorded.
	Pending []string
}

// Took is how long step i took after the step before it; rounding to seconds can make
// a recorded step look earlier than its predecessor, which counts as zero.
func (j Journey) Took(i int) time.Duration {
	if i == 0 {
		return 0
	}
	return max(0, j.Steps[i].At.Sub(j.Steps[i-1].At))
}

// SinceCreated is how long after creation step i happened.
func (j Journey) SinceCreated(i int) time.Duration {
	return max(0, j.Steps[i].At.Sub(j.Steps[0].At))
}

// eventTime is when an event was first recorded: eventTime (events.k8s.io, to the
// microsecond) if set, else firstTimestamp (core events, to the second).
func eventTime(e *corev1.Event) (time.Time, bool) {
	if !e.EventTime.IsZero() {
		return e.EventTime.Time, true
	}
	if !e.FirstTimestamp.IsZero() {
		return e.FirstTimestamp.Time, false
	}
	return e.CreationTimestamp.Time, false
}

func eventComponent(e *corev1.Event) string {
	c := e.ReportingController
	if e.Source.Component != "" {
		c = e.Source.Component
	}
	host := e.Source.Host
	if host == "" {
		host = e.ReportingInstance
	}
	if c == "kubelet" && host != "" {
		return "kubelet/" + host
	}
	return c
}

// containerOf reads the container an event is about from its fieldPath
// ("spec.containers{main}").
func containerOf(e *corev1.Event) string {
	p := e.InvolvedObject.FieldPath
	i, j := strings.Index(p, "{"), strings.LastIndex(p, "}")
	if i < 0 || j < i {
		return ""
	}
	return p[i+1 : j]
}

// PodJourney builds the journey of pod from its object and the events about it
// (events about other objects are ignored).
func PodJourney(pod *corev1.Pod, events []corev1.Event) Journey {
	j := Journey{Namespace: pod.Namespace, Pod: pod.Name, Node: pod.Spec.NodeName}
	kubelet := "kubelet"
	if pod.Spec.NodeName != "" {
		kubelet += "/" + pod.Spec.NodeName
	}
	var mine []*corev1.Event
	for i := range events {
		e := &events[i]
		if e.InvolvedObject.UID == pod.UID || (e.InvolvedObject.UID == "" && e.InvolvedObject.Kind == "Pod" && e.InvolvedObject.Name == pod.Name) {
			mine = append(mine, e)
		}
	}
	sort.SliceStable(mine, func(a, b int) bool {
		ta, _ := eventTime(mine[a])
		tb, _ := eventTime(mine[b])
		return ta.Before(tb)
	})
	// first returns the earliest event with reason about container c ("" for the pod).
	first := func(reason, c string) *corev1.Event {
		for _, e := range mine {
			if e.Reason == reason && containerOf(e) == c {
				return e
			}
		}
		return nil
	}
	add := func(name, container string, ok bool, s Step) {
		if !ok {
			j.Pending = append(j.Pending, Step{Name: name, Container: container}.Label())
			return
		}
		s.Name, s.Container = name, container
		j.Steps = append(j.Steps, s)
	}
	fromEvent := func(name, container, reason string) bool {
		e := first(reason, container)
		if e == nil {
			return false
		}
		at, precise := eventTime(e)
		add(name, container, true, Step{Component: eventComponent(e), At: at, Precise: precise, Source: "event " + reason, Detail: e.Message})
		return true
	}
	condition := func(t corev1.PodConditionType) *corev1.PodCondition {
		for i := range pod.Status.Conditions {
			if c := &pod.Status.Conditions[i]; c.Type == t && c.Status == corev1.ConditionTrue {
				return c
			}
		}
		return nil
	}

	add(StepCreated, "", true, Step{Component: "kube-apiserver", At: pod.CreationTimestamp.Time, Source: "metadata.creationTimestamp",
		Detail: "stored in etcd"})
	// The scheduler records a pod only when an attempt fails or when it binds it: a
	// failed first attempt marks when it first saw the pod.
	if e := first("FailedScheduling", ""); e != nil {
		if s := first("Scheduled", ""); s == nil || !eventAfter(e, s) {
			fromEvent(StepFirstAttempt, "", "FailedScheduling")
		}
	}
	if !fromEvent(StepScheduled, "", "Scheduled") {
		c := condition(corev1.PodScheduled)
		add(StepScheduled, "", c != nil, Step{Component: pod.Spec.SchedulerName, At: conditionTime(c), Source: "condition PodScheduled",
			Detail: "bound to " + pod.Spec.NodeName})
	}
	add(StepKubeletAccepted, "", pod.Status.StartTime != nil, Step{Component: kubelet, At: timeOf(pod.Status.StartTime), Source: "status.startTime"})
	if c := condition(corev1.PodReadyToStartContainers); c != nil {
		add(StepSandboxReady, "", true, Step{Component: kubelet, At: c.LastTransitionTime.Time, Source: "condition PodReadyToStartContainers",
			Detail: "sandbox created and its network set up"})
	} else {
		j.Pending = append(j.Pending, StepSandboxReady)
	}
	containers := append(append([]corev1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...)
	for _, c := range containers {
		fromEvent(StepImagePulling, c.Name, "Pulling") // only when a pull was needed
		if !fromEvent(StepImageReady, c.Name, "Pulled") {
			j.Pending = append(j.Pending, Step{Name: StepImageReady, Container: c.Name}.Label())
		}
		if !fromEvent(StepContainerCreated, c.Name, "Created") {
			j.Pending = append(j.Pending, Step{Name: StepContainerCreated, Container: c.Name}.Label())
		}
		if !fromEvent(StepContainerStarted, c.Name, "Started") {
			if st := startedAt(pod, c.Name); st != nil {
				add(StepContainerStarted, c.Name, true, Step{Component: kubelet, At: *st, Source: "status.containerStatuses.state.running.startedAt"})
			} else {
				j.Pending = append(j.Pending, Step{Name: StepContainerStarted, Container: c.Name}.Label())
			}
		}
	}
	c := condition(corev1.PodReady)
	add(StepReady, "", c != nil, Step{Component: kubelet, At: conditionTime(c), Source: "condition Ready"})
	return j
}

func eventAfter(a, b *corev1.Event) bool {
	ta, _ := eventTime(a)
	tb, _ := eventTime(b)
	return ta.After(tb)
}

func startedAt(pod *corev1.Pod, name string) *time.Time {
	for _, list := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, s := range list {
			if s.Name != name {
				continue
			}
			if s.State.Running != nil {
				return &s.State.Running.StartedAt.Time
			}
			if s.State.Terminated != nil {
				return &s.State.Terminated.StartedAt.Time
			}
		}
	}
	return nil
}

func conditionTime(c *corev1.PodCondition) time.Time {
	if c == nil {
		return time.Time{}
	}
	return c.LastTransitionTime.Time
}

func timeOf(t *metav1.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.Time
}
