package apiserver

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	apiregistrationv1 "mizzen/internal/apis/apiregistration/v1"
)

// automanagedLabel marks the APIServices the server keeps for CRD group versions, as
// upstream's crd-autoregistration controller labels them.
const automanagedLabel = "kube-aggregator.kubernetes.io/automanaged"

// syncCRDAPIServices keeps one local APIService (Available, Local) per group version
// the custom resources are served at, named <version>.<group> with upstream's
// priorities for CRDs, and removes those of group versions no longer served.
func (s *Server) syncCRDAPIServices(ctx context.Context) {
	h := s.handlerForKind(apiregistrationv1.SchemeGroupVersion.Group, apiregistrationv1.SchemeGroupVersion.Version, "APIService")
	if h == nil {
		return
	}
	want := map[string]apiregistrationv1.APIServiceSpec{}
	for _, ch := range s.custom.all() {
		gv := ch.GroupVersion
		if s.servesGroup(gv.Group) {
			continue // a built-in group has its own
		}
		want[gv.Version+"."+gv.Group] = apiregistrationv1.APIServiceSpec{Group: gv.Group, Version: gv.Version, GroupPriorityMinimum: 1000, VersionPriority: 100}
	}
	entries, _, err := s.cache.List(h.segment, h.listPrefix(""), nil)
	if err != nil {
		return
	}
	have := map[string]bool{}
	for _, e := range entries {
		obj, err := e.Object()
		if err != nil {
			continue
		}
		svc := obj.(*apiregistrationv1.APIService)
		if svc.Labels[automanagedLabel] != "true" || svc.Spec.Service != nil {
			continue
		}
		have[svc.Name] = true
		if _, ok := want[svc.Name]; !ok {
			if _, _, err := s.deleteObject(ctx, h, "", svc.Name, &metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				s.log.Warn("crds: removing an APIService", "apiservice", svc.Name, "err", err)
			}
		}
	}
	var created []runtime.Object
	for name, spec := range want {
		if have[name] {
			continue
		}
		svc := &apiregistrationv1.APIService{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{automanagedLabel: "true"}},
			Spec:       spec,
		}
		if _, err := s.createObject(ctx, h, "", svc, false, nil); err != nil && !apierrors.IsAlreadyExists(err) {
			s.log.Warn("crds: creating an APIService", "apiservice", name, "err", err)
			continue
		}
		created = append(created, svc)
	}
	if len(created) > 0 {
		if err := s.markLocalAPIServicesAvailable(ctx, created); err != nil {
			s.log.Warn("crds: marking APIServices available", "err", err)
		}
	}
}
