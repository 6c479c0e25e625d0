// Package rbac describes the rbac.authorization.k8s.io/v1 resources: roles,
// rolebindings, clusterroles and clusterrolebindings, with their defaulting,
// validation and printing as upstream Kubernetes does them.
package rbac

import (
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/validation/path"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"mizzen/internal/registry"
)

// Resources returns the rbac.authorization.k8s.io/v1 resources.
func Resources() []*registry.Resource {
	return []*registry.Resource{roles(), roleBindings(), clusterRoles(), clusterRoleBindings()}
}

var groupVersion = rbacv1.SchemeGroupVersion

// validateName is upstream's rule for RBAC object names: anything that is safe as
// one URL path segment, so that names like "system:node" are allowed.
func validateName(name string, prefix bool) []string {
	if prefix {
		return path.IsValidPathSegmentPrefix(name)
	}
	return path.IsValidPathSegmentName(name)
}

// createdAtPrinter is upstream's default table for resources without printers of
// their own (roles and clusterroles): the name and the creation time in RFC 3339.
var createdAtPrinter = &registry.Printer{
	Columns: []metav1.TableColumnDefinition{
		registry.NameColumn,
		{Name: "Created At", Type: "date", Description: registry.AgeColumn.Description},
	},
	Row: func(obj runtime.Object) []interface{} {
		m := obj.(metav1.Object)
		return []interface{}{m.GetName(), m.GetCreationTimestamp().UTC().Format(time.RFC3339)}
	},
}
