package metrics

import (
	"context"
	"fmt"
	"log/slog"
	"net"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	apiregistrationv1 "mizzen/internal/apis/apiregistration/v1"
	"mizzen/internal/hostservice"
)

// Where the metrics API is registered, as upstream's metrics-server manifests name it.
const (
	ServiceName      = "metrics-server"
	ServiceNamespace = "kube-system"
	APIServiceName   = "v1beta1.metrics.k8s.io"
	// managedBy marks the EndpointSlice as ours, so the EndpointSlice controller
	// leaves it alone (the Service has no selector).
	managedBy = "mizzen-metrics-server"
)

var apiServicesGVR = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}

// Registration says where a metrics server listens, for the apiserver to reach it.
type Registration struct {
	// Address is an IP of the machine the metrics server runs on; not a loopback
	// address, which EndpointSlices refuse.
	Address string
	// Port is the metrics server's --secure-port.
	Port int32
	// CABundle verifies the metrics server's serving certificate, which must be valid
	// for metrics-server.kube-system.svc; without it the apiserver does not verify it
	// (insecureSkipTLSVerify), as upstream's default manifests do.
	CABundle []byte
}

// Register creates or updates what makes the apiserver aggregate a metrics server
// running outside the cluster's pods: the selector-less Service
// kube-system/metrics-server (port 443, named https), an EndpointSlice with reg's
// address and port beside those of the metrics servers of other hosts, and the
// APIService v1beta1.metrics.k8s.io naming the Service. Start the returned Publisher
// to keep this host in the Service while the metrics server runs.
func Register(ctx context.Context, cfg *rest.Config, reg Registration, log *slog.Logger) (*hostservice.Publisher, error) {
	ip := net.ParseIP(reg.Address)
	if ip == nil || ip.IsLoopback() || ip.IsUnspecified() {
		return nil, fmt.Errorf("metrics server address %q: a routable IP is required", reg.Address)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	pub, err := hostservice.Publish(ctx, client, hostservice.Spec{
		Namespace: ServiceNamespace, Name: ServiceName, Labels: map[string]string{"k8s-app": ServiceName},
		Ports:   []hostservice.Port{{Name: "https", Protocol: corev1.ProtocolTCP, Port: 443, TargetPort: reg.Port}},
		Address: ip, ManagedBy: managedBy,
	}, log)
	if err != nil {
		return nil, err
	}
	if err := applyAPIService(ctx, dyn, reg.CABundle); err != nil {
		return nil, fmt.Errorf("apiservice %s: %w", APIServiceName, err)
	}
	return pub, nil
}

// APIService is the registration of the metrics API with the apiserver.
func APIService(caBundle []byte) *apiregistrationv1.APIService {
	port := int32(443)
	return &apiregistrationv1.APIService{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apiregistration.k8s.io/v1", Kind: "APIService"},
		ObjectMeta: metav1.ObjectMeta{Name: APIServiceName, Labels: map[string]string{"k8s-app": ServiceName}},
		Spec: apiregistrationv1.APIServiceSpec{
			Service: &apiregistrationv1.ServiceReference{Namespace: ServiceNamespace, Name: ServiceName, Port: &port},
			Group:   GroupVersion.Group, Version: GroupVersion.Version,
			CABundle: caBundle, InsecureSkipTLSVerify: len(caBundle) == 0,
			GroupPriorityMinimum: 100, VersionPriority: 100,
		},
	}
}

func applyAPIService(ctx context.Context, dyn dynamic.Interface, caBundle []byte) error {
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(APIService(caBundle))
	if err != nil {
		return err
	}
	want := &unstructured.Unstructured{Object: raw}
	unstructured.RemoveNestedField(want.Object, "status")
	res := dyn.Resource(apiServicesGVR)
	current, err := res.Get(ctx, APIServiceName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = res.Create(ctx, want, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	current.Object["spec"] = want.Object["spec"]
	_, err = res.Update(ctx, current, metav1.UpdateOptions{})
	return err
}
