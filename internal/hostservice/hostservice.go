// Package hostservice publishes a process running on a host, not in a pod, as a
// Service: a Service without selector and an EndpointSlice, marked as its own so the
// EndpointSlice controller leaves it alone, holding the host's address. The bundles
// publish cluster DNS and the metrics server this way.
package hostservice

import (
	"context"
	"fmt"
	"net"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
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

// Apply creates the Service and its EndpointSlice, or updates them to spec.
func Apply(ctx context.Context, client kubernetes.Interface, spec Spec) error {
	if spec.Address == nil || spec.Address.IsLoopback() || spec.Address.IsUnspecified() {
		return fmt.Errorf("service %s/%s: address %v: a routable IP is required", spec.Namespace, spec.Name, spec.Address)
	}
	if err := applyService(ctx, client, spec); err != nil {
		return fmt.Errorf("service %s/%s: %w", spec.Namespace, spec.Name, err)
	}
	if err := applyEndpointSlice(ctx, client, spec); err != nil {
		return fmt.Errorf("endpointslice %s/%s: %w", spec.Namespace, spec.Name, err)
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

func applyEndpointSlice(ctx context.Context, client kubernetes.Interface, spec Spec) error {
	ready := true
	family := discoveryv1.AddressTypeIPv4
	if spec.Address.To4() == nil {
		family = discoveryv1.AddressTypeIPv6
	}
	want := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: spec.Name, Namespace: spec.Namespace, Labels: map[string]string{
			discoveryv1.LabelServiceName: spec.Name, discoveryv1.LabelManagedBy: spec.ManagedBy,
		}},
		AddressType: family,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{spec.Address.String()}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
	}
	for _, p := range spec.Ports {
		want.Ports = append(want.Ports, discoveryv1.EndpointPort{Name: &p.Name, Protocol: &p.Protocol, Port: &p.TargetPort})
	}
	slices := client.DiscoveryV1().EndpointSlices(spec.Namespace)
	current, err := slices.Get(ctx, spec.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = slices.Create(ctx, want, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	if current.AddressType != want.AddressType {
		// The address type cannot change: replace the slice.
		if err := slices.Delete(ctx, spec.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		_, err = slices.Create(ctx, want, metav1.CreateOptions{})
		return err
	}
	want.ResourceVersion = current.ResourceVersion
	_, err = slices.Update(ctx, want, metav1.UpdateOptions{})
	return err
}
