package apiserver

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// statusMetadataFrozen names the resources whose status subresource changes no metadata
// at all: upstream's status strategies of these call metav1.ResetObjectMetaForStatus (or
// restore the whole ObjectMeta). Custom resources are frozen as well (copyField leaves an
// unstructured object's metadata alone).
var statusMetadataFrozen = map[schema.GroupResource]bool{
	{Group: "certificates.k8s.io", Resource: "podcertificaterequests"}:               true,
	{Group: "networking.k8s.io", Resource: "servicecidrs"}:                           true,
	{Group: "resource.k8s.io", Resource: "resourceclaims"}:                           true,
	{Group: "resource.k8s.io", Resource: "devicetaintrules"}:                         true,
	{Group: "storage.k8s.io", Resource: "volumeattachments"}:                         true,
	{Group: "storage.k8s.io", Resource: "csinodes"}:                                  true,
	{Group: "storagemigration.k8s.io", Resource: "storageversionmigrations"}:         true,
	{Group: "internal.apiserver.k8s.io", Resource: "storageversions"}:                true,
	{Group: "admissionregistration.k8s.io", Resource: "validatingadmissionpolicies"}: true,
	{Group: "flowcontrol.apiserver.k8s.io", Resource: "flowschemas"}:                 true,
	{Group: "flowcontrol.apiserver.k8s.io", Resource: "prioritylevelconfigurations"}: true,
	{Group: "apiregistration.k8s.io", Resource: "apiservices"}:                       true,
	{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}:           true,
}

// keepStatusMetadata carries the client's labels, annotations, finalizers and owner
// references from sent into full (the stored object with the new status) on a write
// through the status subresource, as upstream's older status strategies do: they reset
// only the spec, so `PATCH .../status` with metadata.annotations changes both (the
// suite's status lifecycle specs for services, jobs, replica sets ... rely on it). The
// exceptions are upstream's: deployments keep their labels, pods their owner references,
// and the resources of statusMetadataFrozen all of their metadata.
func keepStatusMetadata(gr schema.GroupResource, fullObj, sentObj runtime.Object) {
	if _, custom := fullObj.(*unstructured.Unstructured); custom || statusMetadataFrozen[gr] {
		return
	}
	full, sent := accessor(fullObj), accessor(sentObj)
	if gr != (schema.GroupResource{Group: "apps", Resource: "deployments"}) {
		full.SetLabels(sent.GetLabels())
	}
	full.SetAnnotations(sent.GetAnnotations())
	full.SetFinalizers(sent.GetFinalizers())
	if gr != (schema.GroupResource{Resource: "pods"}) {
		full.SetOwnerReferences(sent.GetOwnerReferences())
	}
}
