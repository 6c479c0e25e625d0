// Package webhook is upstream's MutatingAdmissionWebhook and ValidatingAdmissionWebhook:
// the admissionregistration.k8s.io/v1 configurations the apiserver watches name HTTPS
// endpoints (a url, or a Service reached at one of its ready endpoints) that get an
// AdmissionReview v1 for each matching request and allow it, refuse it, or (mutating)
// change it with a JSONPatch.
package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"sort"
	"sync"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/uuid"

	"mizzen/internal/apiserver/admission"
	"mizzen/internal/apiserver/admission/cel"
	"mizzen/internal/apiserver/authz"
	"mizzen/internal/apiserver/requestmetrics"
)

// Upstream's plugin names.
const (
	MutatingPluginName   = "MutatingAdmissionWebhook"
	ValidatingPluginName = "ValidatingAdmissionWebhook"
)

var (
	validatingGVR = admissionregistrationv1.SchemeGroupVersion.WithResource("validatingwebhookconfigurations")
	mutatingGVR   = admissionregistrationv1.SchemeGroupVersion.WithResource("mutatingwebhookconfigurations")
)

// hook is one webhook of either kind.
type hook struct {
	config            string // the configuration's name
	name              string
	clientConfig      admissionregistrationv1.WebhookClientConfig
	rules             []admissionregistrationv1.RuleWithOperations
	failurePolicy     *admissionregistrationv1.FailurePolicyType
	matchPolicy       *admissionregistrationv1.MatchPolicyType
	namespaceSelector *metav1.LabelSelector
	objectSelector    *metav1.LabelSelector
	sideEffects       *admissionregistrationv1.SideEffectClass
	timeoutSeconds    *int32
	matchConditions   []admissionregistrationv1.MatchCondition
	reinvoke          bool
}

func (h *hook) ignoreFailures() bool {
	return h.failurePolicy != nil && *h.failurePolicy == admissionregistrationv1.Ignore
}

func (h *hook) timeout() time.Duration {
	if h.timeoutSeconds != nil && *h.timeoutSeconds > 0 {
		return time.Duration(*h.timeoutSeconds) * time.Second
	}
	return 10 * time.Second
}

// Plugin is one of the two webhook plugins.
type Plugin struct {
	admission.Ops
	mutating bool
	reader   admission.Reader
	clients  *clients
	cel      *cel.Compiler
	conv     admission.Converter
	authz    authz.Authorizer
	log      *slog.Logger
}

// New returns the mutating or the validating webhook plugin; conv converts requests
// for webhooks registered for another version of their resource (nil: none are), az
// answers match conditions' authorizer checks (nil allows everything).
func New(mutating bool, r admission.Reader, resolver Resolver, compiler *cel.Compiler, conv admission.Converter, az authz.Authorizer, log *slog.Logger) *Plugin {
	if log == nil {
		log = slog.Default()
	}
	return &Plugin{Ops: admission.Ops{admission.Create, admission.Update, admission.Delete, admission.Connect},
		mutating: mutating, reader: r, clients: newClients(resolver), cel: compiler, conv: conv, authz: az, log: log}
}

var (
	_ admission.Reinvoker = (*Plugin)(nil)
	_ admission.Validator = (*Plugin)(nil)
)

// hooks lists the configured webhooks, configurations by name, webhooks in order.
func (p *Plugin) hooks(ctx context.Context) ([]*hook, error) {
	gvr := validatingGVR
	if p.mutating {
		gvr = mutatingGVR
	}
	objs, err := p.reader.List(ctx, gvr, "")
	if err != nil {
		return nil, err
	}
	type named struct {
		name  string
		hooks []*hook
	}
	var configs []named
	for _, o := range objs {
		switch c := o.(type) {
		case *admissionregistrationv1.ValidatingWebhookConfiguration:
			n := named{name: c.Name}
			for _, w := range c.Webhooks {
				n.hooks = append(n.hooks, &hook{config: c.Name, name: w.Name, clientConfig: w.ClientConfig, rules: w.Rules, failurePolicy: w.FailurePolicy,
					matchPolicy: w.MatchPolicy, namespaceSelector: w.NamespaceSelector, objectSelector: w.ObjectSelector,
					sideEffects: w.SideEffects, timeoutSeconds: w.TimeoutSeconds, matchConditions: w.MatchConditions})
			}
			configs = append(configs, n)
		case *admissionregistrationv1.MutatingWebhookConfiguration:
			n := named{name: c.Name}
			for _, w := range c.Webhooks {
				n.hooks = append(n.hooks, &hook{config: c.Name, name: w.Name, clientConfig: w.ClientConfig, rules: w.Rules, failurePolicy: w.FailurePolicy,
					matchPolicy: w.MatchPolicy, namespaceSelector: w.NamespaceSelector, objectSelector: w.ObjectSelector,
					sideEffects: w.SideEffects, timeoutSeconds: w.TimeoutSeconds, matchConditions: w.MatchConditions,
					reinvoke: w.ReinvocationPolicy != nil && *w.ReinvocationPolicy == admissionregistrationv1.IfNeededReinvocationPolicy})
			}
			configs = append(configs, n)
		}
	}
	sort.Slice(configs, func(i, j int) bool { return configs[i].name < configs[j].name })
	var out []*hook
	for _, c := range configs {
		out = append(out, c.hooks...)
	}
	return out, nil
}

// Admit calls the matching mutating webhooks in order, applying their patches. Those
// asking for reinvocation are recorded for the chain, which calls Reinvoke if a later
// mutation changed the object.
func (p *Plugin) Admit(ctx context.Context, a *admission.Attributes) error {
	return p.admit(ctx, a, false)
}

// Reinvoke calls once more the webhooks with reinvocationPolicy IfNeeded that ran
// before the object changed.
func (p *Plugin) Reinvoke(ctx context.Context, a *admission.Attributes) error {
	return p.admit(ctx, a, true)
}

func (h *hook) id() string { return "webhook/" + h.config + "/" + h.name }

func (p *Plugin) admit(ctx context.Context, a *admission.Attributes, reinvoking bool) error {
	if !p.mutating || a.Internal || exempt(a) {
		return nil
	}
	hooks, err := p.hooks(ctx)
	if err != nil || len(hooks) == 0 {
		return err
	}
	for _, h := range hooks {
		if reinvoking && (!h.reinvoke || !admission.NeedsReinvocation(ctx, h.id())) {
			continue
		}
		changed, ran, err := p.mutateOnce(ctx, h, a)
		if err != nil {
			return err
		}
		if changed {
			admission.RecordChange(ctx)
		}
		if ran && h.reinvoke && !reinvoking {
			admission.RecordReinvocable(ctx, h.id())
		}
	}
	return nil
}

// mutateOnce calls one mutating webhook if it matches; changed reports a patch that
// changed the object, ran that it was called. A webhook registered for another version
// of the resource patches the object in that version, converted back afterwards.
func (p *Plugin) mutateOnce(ctx context.Context, h *hook, a *admission.Attributes) (changed, ran bool, err error) {
	va, err := p.matches(ctx, h, a)
	if err != nil || va == nil {
		return false, false, err
	}
	objJSON, review, err := p.review(h, va)
	if err != nil {
		return false, true, err
	}
	called := time.Now()
	resp, err := p.clients.call(ctx, h.clientConfig, h.timeout(), review)
	requestmetrics.ExcludeFromSLI(ctx, time.Since(called)) // the webhook's time, not the server's
	if err != nil {
		return false, true, p.failure(h, a, err)
	}
	for _, w := range resp.Warnings {
		admission.AddWarning(ctx, w)
	}
	if !resp.Allowed {
		return false, true, denied(h.name, resp.Result)
	}
	if len(resp.Patch) == 0 || va.Object == nil {
		return false, true, nil
	}
	if resp.PatchType == nil || *resp.PatchType != admissionv1.PatchTypeJSONPatch {
		return false, true, p.failure(h, a, fmt.Errorf("unsupported patch type %v", resp.PatchType))
	}
	patch, err := jsonpatch.DecodePatch(resp.Patch)
	if err != nil {
		return false, true, apierrors.NewInternalError(err)
	}
	patched, err := patch.Apply(objJSON)
	if err != nil {
		return false, true, apierrors.NewInternalError(err)
	}
	if string(patched) == string(objJSON) {
		return false, true, nil
	}
	obj := reflect.New(reflect.TypeOf(va.Object).Elem()).Interface().(runtime.Object)
	if err := json.Unmarshal(patched, obj); err != nil {
		return false, true, apierrors.NewInternalError(fmt.Errorf("the patch of admission webhook %q made an invalid object: %v", h.name, err))
	}
	obj.GetObjectKind().SetGroupVersionKind(va.Object.GetObjectKind().GroupVersionKind())
	if va != a {
		back, _, err := p.conv.Convert(obj, va.Resource, a.Resource.Version)
		if err != nil {
			return false, true, apierrors.NewInternalError(fmt.Errorf("converting the patch of admission webhook %q back to %s: %v", h.name, a.Resource.Version, err))
		}
		back.GetObjectKind().SetGroupVersionKind(a.Object.GetObjectKind().GroupVersionKind())
		obj = back
	}
	a.Object = obj
	return true, true, nil
}

// Validate calls the matching validating webhooks in parallel; the first refusal in
// their order is the answer.
func (p *Plugin) Validate(ctx context.Context, a *admission.Attributes) error {
	if p.mutating || a.Internal || exempt(a) {
		return nil
	}
	hooks, err := p.hooks(ctx)
	if err != nil || len(hooks) == 0 {
		return err
	}
	errs := make([]error, len(hooks))
	var wg sync.WaitGroup
	var called time.Time // the first call's start
	for i, h := range hooks {
		va, err := p.matches(ctx, h, a)
		if err != nil {
			errs[i] = err
			continue
		}
		if va == nil {
			continue
		}
		_, review, err := p.review(h, va)
		if err != nil {
			errs[i] = err
			continue
		}
		if called.IsZero() {
			called = time.Now()
		}
		wg.Add(1)
		go func(i int, h *hook) {
			defer wg.Done()
			resp, err := p.clients.call(ctx, h.clientConfig, h.timeout(), review)
			if err != nil {
				errs[i] = p.failure(h, a, err)
				return
			}
			for _, w := range resp.Warnings {
				admission.AddWarning(ctx, w)
			}
			if !resp.Allowed {
				errs[i] = denied(h.name, resp.Result)
			}
		}(i, h)
	}
	wg.Wait()
	if !called.IsZero() {
		// The webhooks' time (called in parallel: from the first call to the last
		// answer), not the server's.
		requestmetrics.ExcludeFromSLI(ctx, time.Since(called))
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// matches applies a webhook's rules, selectors and match conditions; a dry run goes
// only to webhooks without side effects. It returns the request as the webhook gets
// it (converted to the version its rules name), nil if the webhook does not match.
func (p *Plugin) matches(ctx context.Context, h *hook, a *admission.Attributes) (*admission.Attributes, error) {
	version, ok := MatchVersion(h.rules, h.matchPolicy, a, p.conv)
	if !ok {
		return nil, nil
	}
	ok, err := MatchNamespace(ctx, p.reader, h.namespaceSelector, a)
	if err != nil {
		return nil, p.failure(h, a, err)
	}
	if !ok {
		return nil, nil
	}
	if ok, err = MatchObject(h.objectSelector, a); err != nil || !ok {
		return nil, err
	}
	va, err := Versioned(a, p.conv, version)
	if err != nil {
		return nil, err
	}
	if len(h.matchConditions) > 0 {
		vars, err := celVars(ctx, p.authz, va)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		for _, mc := range h.matchConditions {
			ok, err := p.cel.EvalBool(mc.Expression, vars)
			if err != nil {
				if h.ignoreFailures() {
					return nil, nil
				}
				return nil, apierrors.NewForbidden(a.Resource.GroupResource(), a.Name,
					fmt.Errorf("admission webhook %q matchCondition %q evaluation error: %v", h.name, mc.Name, err))
			}
			if !ok {
				return nil, nil
			}
		}
	}
	if a.DryRun && (h.sideEffects == nil || (*h.sideEffects != admissionregistrationv1.SideEffectClassNone && *h.sideEffects != admissionregistrationv1.SideEffectClassNoneOnDryRun)) {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("admission webhook %q does not support dry run", h.name))
	}
	return va, nil
}

// failure is failurePolicy's answer to a webhook that could not be called.
func (p *Plugin) failure(h *hook, a *admission.Attributes, err error) error {
	if h.ignoreFailures() {
		p.log.Warn("failed calling webhook, failing open", "webhook", h.name, "resource", a.Resource.String(), "err", err)
		return nil
	}
	return apierrors.NewInternalError(fmt.Errorf("failed calling webhook %q: %v", h.name, err))
}

// denied is upstream's error for a refusal.
func denied(name string, result *metav1.Status) error {
	st := metav1.Status{Status: metav1.StatusFailure}
	if result != nil {
		st = *result
	}
	if st.Code < http.StatusBadRequest {
		st.Code = http.StatusBadRequest
	}
	if st.Status == "" || st.Status == metav1.StatusSuccess {
		st.Status = metav1.StatusFailure
	}
	by := fmt.Sprintf("admission webhook %q denied the request", name)
	switch {
	case st.Message != "":
		st.Message = by + ": " + st.Message
	case st.Reason != "":
		st.Message = by + ": " + string(st.Reason)
	default:
		st.Message = by + " without explanation"
	}
	return &apierrors.StatusError{ErrStatus: st}
}

// encode is the JSON of an object with its apiVersion and kind.
func encode(obj runtime.Object, gvk metav1.GroupVersionKind) ([]byte, error) {
	if obj == nil {
		return nil, nil
	}
	c := obj.DeepCopyObject()
	c.GetObjectKind().SetGroupVersionKind(metaGVK(gvk))
	return json.Marshal(c)
}

// review builds the AdmissionReview for a request; objJSON is the object as sent.
func (p *Plugin) review(h *hook, a *admission.Attributes) ([]byte, *admissionv1.AdmissionReview, error) {
	req := request(a)
	objJSON, err := encode(a.Object, req.Kind)
	if err != nil {
		return nil, nil, apierrors.NewInternalError(err)
	}
	oldJSON, err := encode(a.OldObject, req.Kind)
	if err != nil {
		return nil, nil, apierrors.NewInternalError(err)
	}
	req.Object.Raw, req.OldObject.Raw = objJSON, oldJSON
	if a.Options != nil {
		optGVK := metav1.GroupVersionKind{Group: "meta.k8s.io", Version: "v1", Kind: reflect.TypeOf(a.Options).Elem().Name()}
		if req.Options.Raw, err = encode(a.Options, optGVK); err != nil {
			return nil, nil, apierrors.NewInternalError(err)
		}
	}
	review := &admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "AdmissionReview"},
		Request:  req,
	}
	return objJSON, review, nil
}

// request is the AdmissionRequest of a write, without its objects.
func request(a *admission.Attributes) *admissionv1.AdmissionRequest {
	kind := metav1.GroupVersionKind{Group: a.Kind.Group, Version: a.Kind.Version, Kind: a.Kind.Kind}
	res := metav1.GroupVersionResource{Group: a.Resource.Group, Version: a.Resource.Version, Resource: a.Resource.Resource}
	rk, rr := a.OriginalKind(), a.OriginalResource()
	reqKind := metav1.GroupVersionKind{Group: rk.Group, Version: rk.Version, Kind: rk.Kind}
	reqRes := metav1.GroupVersionResource{Group: rr.Group, Version: rr.Version, Resource: rr.Resource}
	dry := a.DryRun
	extra := map[string]authenticationv1.ExtraValue{}
	for k, v := range a.User.Extra {
		extra[k] = v
	}
	return &admissionv1.AdmissionRequest{
		UID: uuid.NewUUID(), Kind: kind, Resource: res, SubResource: a.Subresource,
		RequestKind: &reqKind, RequestResource: &reqRes, RequestSubResource: a.Subresource,
		Name: a.Name, Namespace: a.Namespace, Operation: admissionv1.Operation(a.Operation),
		UserInfo: authenticationv1.UserInfo{Username: a.User.Name, UID: a.User.UID, Groups: a.User.Groups, Extra: extra},
		DryRun:   &dry,
	}
}

func metaGVK(g metav1.GroupVersionKind) schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: g.Group, Version: g.Version, Kind: g.Kind}
}

// celVars are the variables of a match condition: object, oldObject, request and
// authorizer.
func celVars(ctx context.Context, az authz.Authorizer, a *admission.Attributes) (map[string]any, error) {
	obj, err := cel.ToValue(a.Object)
	if err != nil {
		return nil, err
	}
	old, err := cel.ToValue(a.OldObject)
	if err != nil {
		return nil, err
	}
	reqMap, err := runtime.DefaultUnstructuredConverter.ToUnstructured(request(a))
	if err != nil {
		return nil, err
	}
	return map[string]any{"object": obj, "oldObject": old, "request": reqMap, "authorizer": cel.NewAuthorizer(ctx, az, a.User)}, nil
}
