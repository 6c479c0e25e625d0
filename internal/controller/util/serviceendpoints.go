package util

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	corelisters "k8s.io/client-go/listers/core/v1"
)

// ServicesSelectingPod returns the keys of the services in the pod's namespace whose
// selector matches any of the given label sets (a pod's old and new labels).
func ServicesSelectingPod(services corelisters.ServiceLister, namespace string, podLabels ...map[string]string) []string {
	all, err := services.Services(namespace).List(labels.Everything())
	if err != nil {
		return nil
	}
	var keys []string
	for _, svc := range all {
		if len(svc.Spec.Selector) == 0 {
			continue
		}
		sel := labels.SelectorFromSet(svc.Spec.Selector)
		for _, l := range podLabels {
			if sel.Matches(labels.Set(l)) {
				keys = append(keys, svc.Namespace+"/"+svc.Name)
				break
			}
		}
	}
	return keys
}

// TargetPortOf resolves a service port's targetPort on a pod: a number as is, a name
// through the pod's container ports (regular and sidecar containers) of the same
// protocol. ok is false when a named port is not found.
func TargetPortOf(pod *corev1.Pod, sp corev1.ServicePort) (port int32, ok bool) {
	if sp.TargetPort.Type == intstr.Int {
		if sp.TargetPort.IntVal != 0 {
			return sp.TargetPort.IntVal, true
		}
		return sp.Port, true // targetPort defaults to port
	}
	protocol := sp.Protocol
	if protocol == "" {
		protocol = corev1.ProtocolTCP
	}
	containers := pod.Spec.Containers
	for _, c := range pod.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			containers = append(containers[:len(containers):len(containers)], c)
		}
	}
	for _, c := range containers {
		for _, p := range c.Ports {
			pp := p.Protocol
			if pp == "" {
				pp = corev1.ProtocolTCP
			}
			if p.Name == sp.TargetPort.StrVal && pp == protocol {
				return p.ContainerPort, true
			}
		}
	}
	return 0, false
}

// PodServesEndpoints reports whether a pod may appear in a service's endpoints at all:
// it has an IP and has not finished.
func PodServesEndpoints(pod *corev1.Pod) bool {
	return pod.Status.PodIP != "" && !IsPodTerminal(pod)
}

// LastChangeTime is the newest moment the service or one of its pods changed in a
// way endpoints reflect; endpoints controllers publish it as the
// endpoints.kubernetes.io/last-change-trigger-time annotation.
func LastChangeTime(svc *corev1.Service, pods []*corev1.Pod) time.Time {
	latest := svc.CreationTimestamp.Time
	later := func(t time.Time) {
		if t.After(latest) {
			latest = t
		}
	}
	for _, p := range pods {
		later(p.CreationTimestamp.Time)
		if p.DeletionTimestamp != nil {
			later(p.DeletionTimestamp.Time)
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady {
				later(c.LastTransitionTime.Time)
			}
		}
	}
	return latest
}
