// Package catalog lists every built-in resource the apiserver serves, gathered from the
// per-group registry packages. Adding a group means adding one line here.
package catalog

import (
	"mizzen/internal/registry"
	"mizzen/internal/registry/admissionregistration"
	"mizzen/internal/registry/apiextensions"
	"mizzen/internal/registry/apiregistration"
	"mizzen/internal/registry/apps"
	"mizzen/internal/registry/autoscaling"
	"mizzen/internal/registry/batch"
	"mizzen/internal/registry/certificates"
	"mizzen/internal/registry/coordination"
	"mizzen/internal/registry/core"
	"mizzen/internal/registry/discovery"
	"mizzen/internal/registry/events"
	"mizzen/internal/registry/flowcontrol"
	"mizzen/internal/registry/networking"
	"mizzen/internal/registry/node"
	"mizzen/internal/registry/policy"
	"mizzen/internal/registry/rbac"
	"mizzen/internal/registry/resource"
	"mizzen/internal/registry/scheduling"
	"mizzen/internal/registry/storage"
	"mizzen/internal/registry/storagemigration"
)

// All returns every built-in resource, core/v1 first.
func All() []*registry.Resource {
	var all []*registry.Resource
	for _, group := range [][]*registry.Resource{
		core.Resources(),
		apps.Resources(),
		autoscaling.Resources(),
		batch.Resources(),
		certificates.Resources(),
		coordination.Resources(),
		discovery.Resources(),
		events.Resources(),
		flowcontrol.Resources(),
		networking.Resources(),
		node.Resources(),
		policy.Resources(),
		rbac.Resources(),
		resource.Resources(),
		scheduling.Resources(),
		storage.Resources(),
		storagemigration.Resources(),
		admissionregistration.Resources(),
		apiregistration.Resources(),
		apiextensions.Resources(),
	} {
		all = append(all, group...)
	}
	return all
}
