package flowcontrol

import (
	"context"
	"testing"

	"mizzen/internal/registry"
	"mizzen/internal/registry/registrytest"
)

// The shared assertions, under the names this package's tests use.
type fieldErr = registrytest.FieldErr

var (
	ctx           = context.Background()
	assertErrs    = registrytest.AssertErrs
	assertColumns = registrytest.AssertColumns
	threeDaysAgo  = registrytest.ThreeDaysAgo()
)

func findResource(t *testing.T, name string) *registry.Resource {
	t.Helper()
	return registrytest.Find(t, Resources(), name)
}
