package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"mizzen/internal/registry"
	"mizzen/internal/registry/core"
)

// scaleResource describes autoscaling/v1 Scale for decoding and patching scale bodies.
var scaleResource = &registry.Resource{
	GroupVersion: autoscalingv1.SchemeGroupVersion, Resource: "scale", Kind: "Scale",
	New: func() runtime.Object { return &autoscalingv1.Scale{} },
}

var csrGVR = schema.GroupVersionResource{Group: "certificates.k8s.io", Version: "v1", Resource: "certificatesigningrequests"}

// serveApproval reads or changes only the approval conditions of a
// CertificateSigningRequest, as `kubectl certificate approve` does.
func (s *Server) serveApproval(w http.ResponseWriter, r *http.Request, info *requestInfo, h *resourceHandler) {
	switch info.Verb {
	case "get":
		s.get(w, r, info, h)
		return
	case "update", "patch":
	default:
		s.writeError(w, r, methodNotAllowed(r, h))
		return
	}
	format, data, err := readWriteRequest(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	contentType := requestMediaType(r)
	owner, err := writeOwner(r, info.Verb, "approval")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	obj, err := s.updateObject(r.Context(), h, "", info.Name, updateApproval, isDryRun(r), owner, func(current runtime.Object) (runtime.Object, error) {
		var sent runtime.Object
		if info.Verb == "patch" {
			patched, err := s.applyPatch(w, r, h, current.DeepCopyObject(), contentType, data)
			if err != nil {
				return nil, err
			}
			sent = patched
		} else {
			sent = h.New()
			strictErr, err := s.codecs.decodeInto(contentType, data, h.GroupVersionKind(), sent)
			if err != nil {
				return nil, err
			}
			if err := applyFieldValidation(w, r, strictErr); err != nil {
				return nil, err
			}
		}
		csr, in := current.(*certificatesv1.CertificateSigningRequest), sent.(*certificatesv1.CertificateSigningRequest)
		if in.ResourceVersion != "" {
			csr.ResourceVersion = in.ResourceVersion
		}
		csr.Status.Conditions = in.Status.Conditions
		csr.Labels, csr.Annotations = in.Labels, in.Annotations
		return csr, nil
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.respondObject(w, r, http.StatusOK, h, obj, format)
}

var pdbGVR = schema.GroupVersionResource{Group: "policy", Version: "v1", Resource: "poddisruptionbudgets"}

func (s *Server) serveSubresource(w http.ResponseWriter, r *http.Request, info *requestInfo, h *resourceHandler) {
	gvr := h.GroupVersionResource()
	switch {
	case info.Subresource == "status" && h.HasStatus:
		s.serveView(w, r, info, h, updateStatus)
	case info.Subresource == "scale" && h.Scale != nil:
		s.serveScale(w, r, info, h)
	case info.Subresource == "binding" && gvr == podsGVR && info.Verb == "create":
		s.bind(w, r, info, h)
	case info.Subresource == "eviction" && gvr == podsGVR && info.Verb == "create":
		s.evict(w, r, info, h)
	case info.Subresource == "finalize" && gvr == namespacesGVR && info.Verb == "update":
		s.finalizeNamespace(w, r, info, h)
	case info.Subresource == "token" && gvr == serviceAccountsGVR && info.Verb == "create":
		s.createToken(w, r, info, h)
	case (info.Subresource == "ephemeralcontainers" || info.Subresource == "resize") && gvr == podsGVR:
		// Views of the pod through which only part of its spec changes.
		mode := updateEphemeral
		if info.Subresource == "resize" {
			mode = updateResize
		}
		s.serveView(w, r, info, h, mode)
	case info.Subresource == "approval" && gvr == csrGVR:
		s.serveApproval(w, r, info, h)
	default:
		if !s.serveKubeletSubresource(w, r, info, h) && !s.serveProxySubresource(w, r, info, h) {
			s.writeError(w, r, notFound())
		}
	}
}

// serveView serves a subresource that is the object itself, of which a write changes
// only the part mode names (status, ephemeral containers, resources on resize).
func (s *Server) serveView(w http.ResponseWriter, r *http.Request, info *requestInfo, h *resourceHandler, mode updateMode) {
	switch info.Verb {
	case "get":
		s.get(w, r, info, h)
	case "update":
		s.update(w, r, info, h, mode)
	case "patch":
		s.patch(w, r, info, h, mode)
	default:
		s.writeError(w, r, methodNotAllowed(r, h))
	}
}

// scaleOf builds the autoscaling/v1 Scale view of a scalable object.
func scaleOf(h *resourceHandler, obj runtime.Object) *autoscalingv1.Scale {
	acc := accessor(obj)
	spec, status, selector := h.Scale.Get(obj)
	return &autoscalingv1.Scale{
		TypeMeta: metav1.TypeMeta{Kind: "Scale", APIVersion: "autoscaling/v1"},
		ObjectMeta: metav1.ObjectMeta{Name: acc.GetName(), Namespace: acc.GetNamespace(), UID: acc.GetUID(),
			ResourceVersion: acc.GetResourceVersion(), CreationTimestamp: acc.GetCreationTimestamp()},
		Spec:   autoscalingv1.ScaleSpec{Replicas: spec},
		Status: autoscalingv1.ScaleStatus{Replicas: status, Selector: selector},
	}
}

func (s *Server) serveScale(w http.ResponseWriter, r *http.Request, info *requestInfo, h *resourceHandler) {
	format, err := negotiate(r, false)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var obj runtime.Object
	switch info.Verb {
	case "get":
		obj, err = s.getObject(r.Context(), h, info.Namespace, info.Name, r.URL.Query().Get("resourceVersion"))
	case "update", "patch":
		var data []byte
		if data, err = readBody(r); err != nil {
			break
		}
		patchType := requestMediaType(r)
		var owner *fieldOwner
		if owner, err = writeOwner(r, info.Verb, "scale"); err != nil {
			break
		}
		obj, err = s.updateObject(r.Context(), h, info.Namespace, info.Name, updateMain, isDryRun(r), owner, func(current runtime.Object) (runtime.Object, error) {
			scale, err := s.newScale(w, r, h, current, info.Verb, patchType, data)
			if err != nil {
				return nil, err
			}
			if scale.Spec.Replicas < 0 {
				return nil, apierrors.NewInvalid(schema.GroupKind{Group: "autoscaling", Kind: "Scale"}, info.Name, nil)
			}
			if scale.ResourceVersion != "" {
				accessor(current).SetResourceVersion(scale.ResourceVersion)
			}
			h.Scale.Set(current, scale.Spec.Replicas)
			return current, nil
		})
	default:
		err = methodNotAllowed(r, h)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeObject(w, http.StatusOK, scaleOf(h, obj), format.mediaType)
}

// newScale decodes the Scale a client sent (whole, or as a patch of the current one);
// contentType is the body's media type or patch type. A patch's unknown fields go by
// the request's fieldValidation, as on the object.
func (s *Server) newScale(w http.ResponseWriter, r *http.Request, h *resourceHandler, current runtime.Object, verb, contentType string, data []byte) (*autoscalingv1.Scale, error) {
	scaleHandler := &resourceHandler{Resource: scaleResource}
	cur := scaleOf(h, current)
	if verb == "patch" {
		patched, err := s.applyPatch(w, r, scaleHandler, cur, contentType, data)
		if err != nil {
			return nil, err
		}
		return patched.(*autoscalingv1.Scale), nil
	}
	scale := &autoscalingv1.Scale{}
	if _, err := s.codecs.decodeInto(contentType, data, autoscalingv1.SchemeGroupVersion.WithKind("Scale"), scale); err != nil {
		return nil, err
	}
	return scale, nil
}

// podsBindingGR is how upstream names the resource in a refused binding's conflict.
var podsBindingGR = schema.GroupResource{Resource: "pods/binding"}

// bind assigns a pod to a node, as the scheduler does through pods/binding.
func (s *Server) bind(w http.ResponseWriter, r *http.Request, info *requestInfo, h *resourceHandler) {
	binding := &corev1.Binding{}
	err := s.decodeSent(r, binding, corev1.SchemeGroupVersion.WithKind("Binding"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if binding.Name != "" && binding.Name != info.Name {
		s.writeError(w, r, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", binding.Name, info.Name)))
		return
	}
	if binding.Target.Name == "" {
		s.writeError(w, r, apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Binding").GroupKind(), info.Name, nil))
		return
	}
	// Admitted as the Binding (webhooks and policies see a CREATE of pods/binding, and
	// PodTopologyLabels labels the Binding), then, as upstream's binding, a direct
	// write that leaves managedFields as they are.
	bindingKind := corev1.SchemeGroupVersion.WithKind("Binding")
	if err := s.admitCreated(r, info, h, binding, bindingKind); err != nil {
		s.writeError(w, r, err)
		return
	}
	_, err = s.updateObject(withAdmitted(r.Context()), h, info.Namespace, info.Name, updateAll, isDryRun(r), nil, func(current runtime.Object) (runtime.Object, error) {
		pod := current.(*corev1.Pod)
		if pod.DeletionTimestamp != nil {
			return nil, apierrors.NewConflict(podsGVR.GroupResource(), pod.Name, fmt.Errorf("pod %s is being deleted, cannot be assigned to a host", pod.Name))
		}
		if pod.Spec.NodeName != "" {
			return nil, apierrors.NewConflict(podsGVR.GroupResource(), pod.Name, fmt.Errorf("pod %s is already assigned to node %q", pod.Name, pod.Spec.NodeName))
		}
		if binding.UID != "" && binding.UID != pod.UID {
			return nil, apierrors.NewConflict(podsGVR.GroupResource(), pod.Name, fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", binding.UID, pod.UID))
		}
		if len(pod.Spec.SchedulingGates) != 0 {
			return nil, apierrors.NewConflict(podsBindingGR, pod.Name, fmt.Errorf("pod %v has non-empty .spec.schedulingGates", pod.Name))
		}
		pod.Spec.NodeName = binding.Target.Name
		// The nomination is stale once bound (upstream's ClearingNominatedNodeNameAfterBinding).
		pod.Status.NominatedNodeName = ""
		for k, v := range binding.Annotations {
			if pod.Annotations == nil {
				pod.Annotations = map[string]string{}
			}
			pod.Annotations[k] = v
		}
		// The binding's labels overwrite the pod's (upstream's PodTopologyLabelsAdmission).
		for k, v := range binding.Labels {
			if pod.Labels == nil {
				pod.Labels = map[string]string{}
			}
			pod.Labels[k] = v
		}
		setPodCondition(&pod.Status, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()})
		// Status is kept apart from spec on updates; binding sets both.
		return pod, nil
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeStatus(w, metav1.Status{Status: metav1.StatusSuccess, Code: http.StatusCreated})
}

func setPodCondition(status *corev1.PodStatus, c corev1.PodCondition) {
	for i := range status.Conditions {
		if status.Conditions[i].Type == c.Type {
			if status.Conditions[i].Status == c.Status {
				return
			}
			status.Conditions[i] = c
			return
		}
	}
	status.Conditions = append(status.Conditions, c)
}

// evict deletes a pod unless a PodDisruptionBudget forbids it (429), as the eviction
// subresource does upstream.
func (s *Server) evict(w http.ResponseWriter, r *http.Request, info *requestInfo, h *resourceHandler) {
	ctx := r.Context()
	eviction := &policyv1.Eviction{}
	evictionKind := policyv1.SchemeGroupVersion.WithKind("Eviction")
	err := s.decodeSent(r, eviction, evictionKind)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	// Admitted as the Eviction (webhooks and policies see a CREATE of pods/eviction);
	// the pod's condition and its deletion are then written without admission, as
	// upstream's eviction storage writes them. The budget's status is admitted, as
	// upstream's loopback write of it is.
	if err := s.admitCreated(r, info, h, eviction, evictionKind); err != nil {
		s.writeError(w, r, err)
		return
	}
	podObj, err := s.getObject(ctx, h, info.Namespace, info.Name, "")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	pod := podObj.(*corev1.Pod)
	opts := eviction.DeleteOptions
	if opts == nil {
		opts = &metav1.DeleteOptions{}
	}
	// Pods that are not running cannot be disrupted: no budget applies.
	if pod.Status.Phase == corev1.PodRunning && pod.DeletionTimestamp == nil {
		if err := s.takeDisruption(ctx, pod); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	// Marked before it is deleted, as upstream does, so that its controllers see a
	// disruption rather than a failure of its own (a Job's pod failure policy).
	podCtx := withAdmitted(ctx)
	if len(opts.DryRun) == 0 {
		_, err := s.updateObject(podCtx, h, info.Namespace, info.Name, updateStatus, false, &fieldOwner{manager: selfManager, subresource: "status"}, func(current runtime.Object) (runtime.Object, error) {
			p := current.(*corev1.Pod)
			setPodCondition(&p.Status, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
				Reason: "EvictionByEvictionAPI", Message: "Eviction API: evicting", LastTransitionTime: metav1.Now()})
			return p, nil
		})
		if err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	if _, _, err := s.deleteObject(podCtx, h, info.Namespace, info.Name, opts); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeStatus(w, metav1.Status{Status: metav1.StatusSuccess, Code: http.StatusCreated})
}

// takeDisruption uses up one allowed disruption of the pod's budget, or refuses.
func (s *Server) takeDisruption(ctx context.Context, pod *corev1.Pod) error {
	ph := s.handlers[pdbGVR]
	if ph == nil {
		return nil
	}
	// A consistent read: a budget created just before must count.
	rev, err := s.store.CurrentRevision(ctx)
	if err != nil {
		return err
	}
	if err := s.cache.WaitFresh(ctx, rev, consistentReadTimeout); err != nil {
		return storageError(err, pdbGVR.GroupResource(), "")
	}
	entries, _, err := s.cache.List(ph.segment, ph.listPrefix(pod.Namespace), nil)
	if err != nil {
		return err
	}
	var budgets []*policyv1.PodDisruptionBudget
	for _, e := range entries {
		obj, err := e.Object()
		if err != nil {
			return err
		}
		pdb := obj.(*policyv1.PodDisruptionBudget)
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		budgets = append(budgets, pdb)
	}
	if len(budgets) > 1 {
		return apierrors.NewInternalError(errors.New("This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."))
	}
	if len(budgets) == 0 {
		return nil
	}
	pdb := budgets[0]
	_, err = s.updateObject(ctx, ph, pdb.Namespace, pdb.Name, updateStatus, false, &fieldOwner{manager: selfManager, subresource: "status"}, func(current runtime.Object) (runtime.Object, error) {
		cur := current.(*policyv1.PodDisruptionBudget)
		if cur.Status.ObservedGeneration < cur.Generation || cur.Status.DisruptionsAllowed <= 0 {
			// No Retry-After, as upstream: client-go would otherwise wait and retry by itself,
			// and a drain would hang on a budget that may not free up for long.
			err := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
			err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{
				Type: policyv1.DisruptionBudgetCause, Message: fmt.Sprintf("The disruption budget %s needs %d healthy pods and has %d currently", cur.Name, cur.Status.DesiredHealthy, cur.Status.CurrentHealthy)})
			return nil, err
		}
		cur.Status.DisruptionsAllowed--
		if cur.Status.DisruptedPods == nil {
			cur.Status.DisruptedPods = map[string]metav1.Time{}
		}
		cur.Status.DisruptedPods[pod.Name] = metav1.Now()
		return cur, nil
	})
	return err
}

// finalizeNamespace replaces a namespace's spec.finalizers; with none left, a
// namespace being deleted goes.
func (s *Server) finalizeNamespace(w http.ResponseWriter, r *http.Request, info *requestInfo, h *resourceHandler) {
	sent := &corev1.Namespace{}
	err := s.decodeSent(r, sent, corev1.SchemeGroupVersion.WithKind("Namespace"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	// Only spec.finalizers changes, live namespace or not: the namespace's own update
	// rules (which keep the finalizers) do not apply, its validation does.
	owner, err := writeOwner(r, "update", "finalize")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	obj, err := s.updateObject(r.Context(), h, "", info.Name, updateFinalize, isDryRun(r), owner, func(current runtime.Object) (runtime.Object, error) {
		ns := current.(*corev1.Namespace)
		if sent.ResourceVersion != "" {
			ns.ResourceVersion = sent.ResourceVersion
		}
		ns.Spec.Finalizers = sent.Spec.Finalizers
		if errs := h.Strategy.Validate(r.Context(), ns); len(errs) > 0 {
			return nil, apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Namespace").GroupKind(), ns.Name, errs)
		}
		return ns, nil
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	obj.GetObjectKind().SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	s.writeObject(w, http.StatusOK, obj, mediaJSON)
}

// validateEphemeralUpdate checks a write through pods/ephemeralcontainers: containers may
// only be added, each valid as an ephemeral container, as upstream's rules say.
func validateEphemeralUpdate(mode updateMode, obj, old runtime.Object) error {
	if mode != updateEphemeral {
		return nil
	}
	pod, oldPod := obj.(*corev1.Pod), old.(*corev1.Pod)
	if errs := core.ValidateEphemeralContainersUpdate(pod, oldPod); len(errs) > 0 {
		return apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Pod").GroupKind(), pod.Name, errs)
	}
	return nil
}

// validateResizeUpdate checks a write through pods/resize (see core.ValidatePodResize).
func validateResizeUpdate(mode updateMode, obj, old runtime.Object) error {
	if mode != updateResize {
		return nil
	}
	pod, oldPod := obj.(*corev1.Pod), old.(*corev1.Pod)
	if errs := core.ValidatePodResize(pod, oldPod); len(errs) > 0 {
		return apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Pod").GroupKind(), pod.Name, errs)
	}
	return nil
}

// decodeBody reads a subresource request's body into obj, which it is sent as kind.
func (s *Server) decodeSent(r *http.Request, obj runtime.Object, kind schema.GroupVersionKind) error {
	data, err := readBody(r)
	if err != nil {
		return err
	}
	_, err = s.codecs.decodeInto(requestMediaType(r), data, kind, obj)
	return err
}
