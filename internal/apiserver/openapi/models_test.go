package openapi

import (
	"reflect"
	"testing"
)

// Models carry what merging needs: the kinds, and the list and map semantics.
func TestModels(t *testing.T) {
	models, err := Models(testResources())
	if err != nil {
		t.Fatal(err)
	}
	deployment := models["io.k8s.api.apps.v1.Deployment"]
	if deployment == nil {
		t.Fatal("no Deployment model")
	}
	wantGVK := []interface{}{map[string]interface{}{"group": "apps", "version": "v1", "kind": "Deployment"}}
	if got := deployment.Extensions["x-kubernetes-group-version-kind"]; !reflect.DeepEqual(got, wantGVK) {
		t.Errorf("Deployment kinds = %#v", got)
	}
	spec := deployment.Properties["spec"]
	if ref := spec.Ref.String(); ref != "#/components/schemas/io.k8s.api.apps.v1.DeploymentSpec" {
		t.Errorf("spec refers to %q", ref)
	}
	containers := models["io.k8s.api.core.v1.PodSpec"].Properties["containers"]
	if containers.Extensions["x-kubernetes-list-type"] != "map" ||
		!reflect.DeepEqual(containers.Extensions["x-kubernetes-list-map-keys"], []interface{}{"name"}) {
		t.Errorf("containers extensions = %v", containers.Extensions)
	}
	if got := containers.Items.Schema.Ref.String(); got != "#/components/schemas/io.k8s.api.core.v1.Container" {
		t.Errorf("containers items refer to %q", got)
	}
	if ls := models["io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector"]; ls.Extensions["x-kubernetes-map-type"] != "atomic" {
		t.Errorf("LabelSelector extensions = %v", ls.Extensions)
	}
	labels := models["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"].Properties["labels"]
	if labels.AdditionalProperties == nil || labels.AdditionalProperties.Schema == nil || labels.AdditionalProperties.Schema.Type[0] != "string" {
		t.Errorf("labels = %+v", labels)
	}
}
