// Package hostservice publishes a process running on a host, not in a pod, as a
// Service: a Service without selector and, for every host running the process, an
// EndpointSlice of that host's own (marked as ours so the EndpointSlice controller
// leaves it alone) holding its address and port. Each host keeps a Lease of the same
// name renewed while it runs: with several servers every one is in the Service, one
// that stops withdraws its slice, and one that dies is swept by the others once its
// Lease is no longer renewed. The bundles publish cluster DNS and the metrics server
// this way.
package hostservice

import (
	"context"
	"fmt"
	"net"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
)

// Port is one port of the Service and where the process listens for it.
type Port struct {
	Name     string
	Protocol corev1.Protocol
	// Port is the Service's port; TargetPort the process's.
	Port, TargetPort int32
}

// Spec describes the Service.
type Spec struct {
	Namespace, Name string
	Labels          map[string]string
	// ClusterIP is a fixed address (the DNS service's), or "" for any.
	ClusterIP string
	Ports     []Port
	// Address is the host's IP; not loopback, which EndpointSlices refuse.
	Address net.IP
	// ManagedBy is the EndpointSlice's endpointslice.kubernetes.io/managed-by.
	ManagedBy string
}

// hostName is the name of this host's EndpointSlice and Lease: the Service's name and
// the host's address, so that a host restarting finds its own again.
func (spec Spec) hostName() string {
	return spec.Name + "-" + strings.NewReplacer(".", "-", ":", "-").Replace(spec.Address.String())
}

func (spec Spec) validate() error {
	if spec.Address == nil || spec.Address.IsLoopback() || spec.Address.IsUnspecified() {
		return fmt.Errorf("service %s/%s: address %v: a routable IP is required", spec.Namespace, spec.Name, spec.Address)
	}
	return nil
}

func applyService(ctx context.Context, client kubernetes.Interface, spec Spec) error {
	var ports []corev1.ServicePort
	for _, p := range spec.Ports {
		ports = append(ports, corev1.ServicePort{Name: p.Name, Protocol: p.Protocol, Port: p.Port, TargetPort: intstr.FromString(p.Name)})
	}
	services := client.CoreV1().Services(spec.Namespace)
	svc, err := services.Get(ctx, spec.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = services.Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: spec.Name, Namespace: spec.Namespace, Labels: spec.Labels},
			Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: spec.ClusterIP, Ports: ports},
		}, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	if spec.ClusterIP != "" && svc.Spec.ClusterIP != spec.ClusterIP {
		return fmt.Errorf("exists with cluster IP %s, not %s", svc.Spec.ClusterIP, spec.ClusterIP)
	}
	svc.Spec.Ports, svc.Spec.Selector = ports, nil
	_, err = services.Update(ctx, svc, metav1.UpdateOptions{})
	return err
}

// applyEndpointSlice creates this host's EndpointSlice, or updates it when it differs
// from spec.
func applyEndpointSlice(ctx context.Context, client kubernetes.Interface, spec Spec) error {
	ready := true
	family := discoveryv1.AddressTypeIPv4
	if spec.Address.To4() == nil {
		family = discoveryv1.AddressTypeIPv6
	}
	want := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: spec.hostName(), Namespace: spec.Namespace, Labels: map[string]string{
			discoveryv1.LabelServiceName: spec.Name, discoveryv1.LabelManagedBy: spec.ManagedBy,
		}},
		AddressType: family,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{spec.Address.String()}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
	}
	for _, p := range spec.Ports {
		want.Ports = append(want.Ports, discoveryv1.EndpointPort{Name: &p.Name, Protocol: &p.Protocol, Port: &p.TargetPort})
	}
	slices := client.DiscoveryV1().EndpointSlices(spec.Namespace)
	current, err := slices.Get(ctx, want.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = slices.Create(ctx, want, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	if current.AddressType != want.AddressType {
		// The address type cannot change: replace the slice.
		if err := slices.Delete(ctx, want.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		_, err = slices.Create(ctx, want, metav1.CreateOptions{})
		return err
	}
	if apiequality.Semantic.DeepEqual(current.Endpoints, want.Endpoints) && apiequality.Semantic.DeepEqual(current.Ports, want.Ports) &&
		apiequality.Semantic.DeepEqual(current.Labels, want.Labels) {
		return nil // every proxy rebuilds its rules on a change: write none that changes nothing
	}
	want.ResourceVersion = current.ResourceVersion
	_, err = slices.Update(ctx, want, metav1.UpdateOptions{})
	return err
}
