package core

import "mizzen/internal/registry"

// Resources returns the core/v1 resources, each a fresh value the caller may keep.
func Resources() []*registry.Resource {
	return []*registry.Resource{
		namespacesResource(),
		podsResource(),
		nodesResource(),
		servicesResource(),
		endpointsResource(),
		configMapsResource(),
		secretsResource(),
		serviceAccountsResource(),
		eventsResource(),
		limitRangesResource(),
		resourceQuotasResource(),
		persistentVolumesResource(),
		persistentVolumeClaimsResource(),
		replicationControllersResource(),
		podTemplatesResource(),
	}
}
