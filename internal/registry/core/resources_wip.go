package core

import "mizzen/internal/registry"

// Resources lists the core/v1 resources served so far.
func Resources() []*registry.Resource {
	return []*registry.Resource{podsResource(), servicesResource()}
}
