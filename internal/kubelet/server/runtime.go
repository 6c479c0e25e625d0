package server

import (
	"context"
	"fmt"
	"sort"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Labels the kubelet puts on sandboxes and containers, named as upstream's.
const (
	labelPodName       = "io.kubernetes.pod.name"
	labelPodNamespace  = "io.kubernetes.pod.namespace"
	labelPodUID        = "io.kubernetes.pod.uid"
	labelContainerName = "io.kubernetes.container.name"
)

// podContainers returns the runtime's instances of one container of a pod, newest
// first (a restart makes a new instance with a higher attempt).
func (s *Server) podContainers(ctx context.Context, namespace, pod, container string) ([]*runtimeapi.Container, error) {
	list, err := s.runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: map[string]string{
		labelPodNamespace: namespace, labelPodName: pod, labelContainerName: container,
	}})
	if err != nil {
		return nil, err
	}
	sort.Slice(list, func(i, j int) bool {
		if list[i].CreatedAt != list[j].CreatedAt {
			return list[i].CreatedAt > list[j].CreatedAt
		}
		return list[i].GetMetadata().GetAttempt() > list[j].GetMetadata().GetAttempt()
	})
	return list, nil
}

// findContainer returns the container's current instance, or its previous one (the
// instance before the newest), with upstream's errors when there is none.
func (s *Server) findContainer(ctx context.Context, namespace, pod, container string, previous bool) (*runtimeapi.Container, error) {
	list, err := s.podContainers(ctx, namespace, pod, container)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	if previous {
		if len(list) < 2 {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("previous terminated container %q in pod %q not found", container, pod))
		}
		return list[1], nil
	}
	if len(list) == 0 {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("container %q in pod %q is not available", container, pod))
	}
	return list[0], nil
}

// findRunningContainer returns the running instance of a container, for exec and attach.
func (s *Server) findRunningContainer(ctx context.Context, namespace, pod, container string) (*runtimeapi.Container, error) {
	list, err := s.podContainers(ctx, namespace, pod, container)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	for _, c := range list {
		if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			return c, nil
		}
	}
	return nil, apierrors.NewBadRequest(fmt.Sprintf("container %s is not running in pod %s", container, pod))
}

// findSandbox returns the ready sandbox of a pod, for port-forward.
func (s *Server) findSandbox(ctx context.Context, namespace, pod string) (*runtimeapi.PodSandbox, error) {
	list, err := s.runtime.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{
		State:         &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY},
		LabelSelector: map[string]string{labelPodNamespace: namespace, labelPodName: pod},
	})
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	if len(list) == 0 {
		return nil, apierrors.NewNotFound(v1.Resource("pods"), pod)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].CreatedAt > list[j].CreatedAt })
	return list[0], nil
}

// runningPods builds pods from the runtime's ready sandboxes and their running
// containers: what runs on the node whatever the apiserver says.
func (s *Server) runningPods(ctx context.Context) (*v1.PodList, error) {
	sandboxes, containers, err := s.listRunning(ctx)
	if err != nil {
		return nil, err
	}
	list := &v1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}}
	index := map[string]int{}
	for _, sb := range sandboxes {
		md := sb.GetMetadata()
		index[sb.Id] = len(list.Items)
		list.Items = append(list.Items, v1.Pod{ObjectMeta: metav1.ObjectMeta{
			Name: md.GetName(), Namespace: md.GetNamespace(), UID: types.UID(md.GetUid()),
		}})
	}
	for _, c := range containers {
		i, ok := index[c.PodSandboxId]
		if !ok {
			continue
		}
		list.Items[i].Spec.Containers = append(list.Items[i].Spec.Containers, v1.Container{
			Name: c.GetMetadata().GetName(), Image: c.GetImage().GetImage(),
		})
	}
	return list, nil
}

// listRunning lists the runtime's ready sandboxes and running containers.
func (s *Server) listRunning(ctx context.Context) ([]*runtimeapi.PodSandbox, []*runtimeapi.Container, error) {
	sandboxes, err := s.runtime.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{
		State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY},
	})
	if err != nil {
		return nil, nil, err
	}
	containers, err := s.runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
	})
	return sandboxes, containers, err
}
