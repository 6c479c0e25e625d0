package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// APIService registers a server for one API group version: either this apiserver
// itself ("Local", no service) or a Service the apiserver proxies requests to.
// Its name is "<version>.<group>", e.g. v1beta1.metrics.k8s.io.
type APIService struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   APIServiceSpec   `json:"spec,omitempty"`
	Status APIServiceStatus `json:"status,omitempty"`
}

// APIServiceList is a list of APIService objects.
type APIServiceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []APIService `json:"items"`
}

// ServiceReference names the Service that serves an API group version.
type ServiceReference struct {
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name,omitempty"`
	// Port on the service; defaults to 443.
	Port *int32 `json:"port,omitempty"`
}

// APIServiceSpec says where an API group version is served and how clients of the
// aggregator should order it among others.
type APIServiceSpec struct {
	// Service is nil when this apiserver serves the group version itself.
	Service *ServiceReference `json:"service,omitempty"`
	Group   string            `json:"group,omitempty"`
	Version string            `json:"version,omitempty"`
	// InsecureSkipTLSVerify disables verifying the service's serving certificate.
	InsecureSkipTLSVerify bool `json:"insecureSkipTLSVerify,omitempty"`
	// CABundle is the PEM CA bundle that verifies the service's serving certificate.
	CABundle []byte `json:"caBundle,omitempty"`
	// GroupPriorityMinimum orders groups in discovery, highest first.
	GroupPriorityMinimum int32 `json:"groupPriorityMinimum"`
	// VersionPriority orders versions within a group, highest first.
	VersionPriority int32 `json:"versionPriority"`
}

// ConditionStatus is True, False or Unknown.
type ConditionStatus string

// The values of ConditionStatus.
const (
	ConditionTrue    ConditionStatus = "True"
	ConditionFalse   ConditionStatus = "False"
	ConditionUnknown ConditionStatus = "Unknown"
)

// APIServiceConditionType names a condition of an APIService.
type APIServiceConditionType string

// Available says whether the group version can be reached.
const Available APIServiceConditionType = "Available"

// APIServiceCondition describes the state of an APIService at a point in time.
type APIServiceCondition struct {
	Type               APIServiceConditionType `json:"type"`
	Status             ConditionStatus         `json:"status"`
	LastTransitionTime metav1.Time             `json:"lastTransitionTime,omitempty"`
	Reason             string                  `json:"reason,omitempty"`
	Message            string                  `json:"message,omitempty"`
}

// APIServiceStatus holds the observed conditions of an APIService.
type APIServiceStatus struct {
	Conditions []APIServiceCondition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
}
