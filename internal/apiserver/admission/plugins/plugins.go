// Package plugins knows every admission plugin by upstream's name: the order the chain
// runs them in, which are on by default, and how each is built. The
// --enable-admission-plugins and --disable-admission-plugins flags resolve here.
package plugins

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"mizzen/internal/apiserver/admission"
	"mizzen/internal/apiserver/admission/cel"
	"mizzen/internal/apiserver/admission/plugin/certificates"
	"mizzen/internal/apiserver/admission/plugin/ingressclass"
	"mizzen/internal/apiserver/admission/plugin/limitranger"
	"mizzen/internal/apiserver/admission/plugin/namespace"
	"mizzen/internal/apiserver/admission/plugin/noderestriction"
	"mizzen/internal/apiserver/admission/plugin/nodetaint"
	"mizzen/internal/apiserver/admission/plugin/podsecurity"
	"mizzen/internal/apiserver/admission/plugin/podtolerations"
	"mizzen/internal/apiserver/admission/plugin/podtopologylabels"
	"mizzen/internal/apiserver/admission/plugin/policy"
	"mizzen/internal/apiserver/admission/plugin/priority"
	"mizzen/internal/apiserver/admission/plugin/resourcequota"
	"mizzen/internal/apiserver/admission/plugin/runtimeclass"
	"mizzen/internal/apiserver/admission/plugin/serviceaccount"
	"mizzen/internal/apiserver/admission/plugin/storage"
	"mizzen/internal/apiserver/admission/plugin/webhook"
)

// Ordered is upstream's plugin order (kube-apiserver's AllOrderedPlugins): whatever
// the flags say, enabled plugins run in this order, mutating before validating.
var Ordered = []string{
	"AlwaysAdmit",
	"NamespaceAutoProvision",
	"NamespaceLifecycle",
	"NamespaceExists",
	"LimitPodHardAntiAffinityTopology",
	"LimitRanger",
	"ServiceAccount",
	"NodeRestriction",
	"TaintNodesByCondition",
	"AlwaysPullImages",
	"ImagePolicyWebhook",
	"PodSecurity",
	"PodNodeSelector",
	"Priority",
	"DefaultTolerationSeconds",
	"PodTolerationRestriction",
	"EventRateLimit",
	"ExtendedResourceToleration",
	"DefaultStorageClass",
	"StorageObjectInUseProtection",
	"OwnerReferencesPermissionEnforcement",
	"PersistentVolumeClaimResize",
	"RuntimeClass",
	"CertificateApproval",
	"CertificateSigning",
	"ClusterTrustBundleAttest",
	"CertificateSubjectRestriction",
	"DefaultIngressClass",
	"DenyServiceExternalIPs",
	"PodTopologyLabels",
	"MutatingAdmissionPolicy",
	"MutatingAdmissionWebhook",
	"ValidatingAdmissionPolicy",
	"ValidatingAdmissionWebhook",
	"ResourceQuota",
	"AlwaysDeny",
}

// DefaultOn are the plugins upstream enables when the flags do not name them.
var DefaultOn = []string{
	"NamespaceLifecycle",
	"LimitRanger",
	"ServiceAccount",
	"DefaultStorageClass",
	"PersistentVolumeClaimResize",
	"DefaultTolerationSeconds",
	"MutatingAdmissionWebhook",
	"ValidatingAdmissionWebhook",
	"ResourceQuota",
	"StorageObjectInUseProtection",
	"Priority",
	"TaintNodesByCondition",
	"RuntimeClass",
	"CertificateApproval",
	"CertificateSigning",
	"ClusterTrustBundleAttest",
	"CertificateSubjectRestriction",
	"DefaultIngressClass",
	"PodSecurity",
	"PodTopologyLabels",
	"ValidatingAdmissionPolicy",
	"MutatingAdmissionPolicy",
}

// built are the plugins New builds itself, sharing one CEL compiler.
var built = map[string]bool{webhook.MutatingPluginName: true, webhook.ValidatingPluginName: true, policy.PluginName: true, policy.MutatingPluginName: true}

// Factory builds a plugin.
type Factory func(deps admission.Deps) (admission.Handler, error)

// factories are the plugins mizzen implements; the other names are known (the flags
// accept them) but enabling one explicitly is an error, and a default-on one that is
// missing is listed by Unimplemented.
var factories = map[string]Factory{
	"AlwaysAdmit": func(admission.Deps) (admission.Handler, error) { return alwaysAdmit{}, nil },
	"AlwaysDeny":  func(admission.Deps) (admission.Handler, error) { return alwaysDeny{}, nil },
	namespace.LifecyclePluginName: func(d admission.Deps) (admission.Handler, error) {
		return namespace.NewLifecycle(d.Reader), nil
	},
	namespace.ExistsPluginName: func(d admission.Deps) (admission.Handler, error) {
		return namespace.NewExists(d.Reader), nil
	},
	serviceaccount.PluginName: func(d admission.Deps) (admission.Handler, error) {
		return serviceaccount.New(d.Reader), nil
	},
	nodetaint.PluginName: func(admission.Deps) (admission.Handler, error) { return nodetaint.New(), nil },
	noderestriction.PluginName: func(d admission.Deps) (admission.Handler, error) {
		return noderestriction.New(d.Reader), nil
	},
	priority.PluginName: func(d admission.Deps) (admission.Handler, error) {
		return priority.New(d.Reader), nil
	},
	podtolerations.PluginName: func(admission.Deps) (admission.Handler, error) { return podtolerations.New(), nil },
	storage.DefaultClassPluginName: func(d admission.Deps) (admission.Handler, error) {
		return storage.NewDefaultClass(d.Reader), nil
	},
	storage.InUseProtectionPluginName: func(admission.Deps) (admission.Handler, error) {
		return storage.NewInUseProtection(), nil
	},
	storage.ResizePluginName: func(d admission.Deps) (admission.Handler, error) {
		return storage.NewResize(d.Reader), nil
	},
	runtimeclass.PluginName: func(d admission.Deps) (admission.Handler, error) {
		return runtimeclass.New(d.Reader), nil
	},
	podsecurity.PluginName: func(d admission.Deps) (admission.Handler, error) {
		return podsecurity.New(d.Reader), nil
	},
	limitranger.PluginName: func(d admission.Deps) (admission.Handler, error) {
		return limitranger.New(d.Reader), nil
	},
	resourcequota.PluginName: func(d admission.Deps) (admission.Handler, error) {
		return resourcequota.New(d.Reader, d.StatusWriter), nil
	},
	certificates.ApprovalPluginName: func(d admission.Deps) (admission.Handler, error) {
		return certificates.NewApproval(d.Authorizer), nil
	},
	certificates.SigningPluginName: func(d admission.Deps) (admission.Handler, error) {
		return certificates.NewSigning(d.Authorizer), nil
	},
	certificates.SubjectRestrictionPluginName: func(admission.Deps) (admission.Handler, error) {
		return certificates.NewSubjectRestriction(), nil
	},
	ingressclass.PluginName: func(d admission.Deps) (admission.Handler, error) {
		return ingressclass.New(d.Reader), nil
	},
	podtopologylabels.PluginName: func(d admission.Deps) (admission.Handler, error) {
		return podtopologylabels.New(d.Reader), nil
	},
}

// Enabled resolves the flags into the plugins to run, in Ordered order, with upstream's
// errors for unknown and overlapping names.
func Enabled(enable, disable []string) ([]string, error) {
	known := map[string]bool{}
	for _, n := range Ordered {
		known[n] = true
	}
	var errs []string
	for _, n := range enable {
		if !known[n] {
			errs = append(errs, fmt.Sprintf("enable-admission-plugins plugin %q is unknown", n))
		}
	}
	for _, n := range disable {
		if !known[n] {
			errs = append(errs, fmt.Sprintf("disable-admission-plugins plugin %q is unknown", n))
		}
	}
	var both []string
	for _, n := range enable {
		if slices.Contains(disable, n) {
			both = append(both, n)
		}
	}
	if len(both) > 0 {
		sort.Strings(both)
		errs = append(errs, fmt.Sprintf("%v in enable-admission-plugins and disable-admission-plugins overlapped", both))
	}
	for _, n := range enable {
		if known[n] && factories[n] == nil && !built[n] {
			errs = append(errs, fmt.Sprintf("enable-admission-plugins plugin %q is not implemented by mizzen", n))
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	var out []string
	for _, n := range Ordered {
		on := slices.Contains(DefaultOn, n) || slices.Contains(enable, n)
		if on && !slices.Contains(disable, n) {
			out = append(out, n)
		}
	}
	return out, nil
}

// Unimplemented lists the names among enabled that mizzen has no plugin for.
func Unimplemented(enabled []string) []string {
	var out []string
	for _, n := range enabled {
		if factories[n] == nil && !built[n] {
			out = append(out, n)
		}
	}
	return out
}

// New builds the chain of the enabled plugins that mizzen implements.
func New(enabled []string, deps admission.Deps) (admission.Chain, error) {
	compiler, err := cel.NewCompiler()
	if err != nil {
		return admission.Chain{}, err
	}
	mutations, err := cel.NewMutationCompiler()
	if err != nil {
		return admission.Chain{}, err
	}
	factories := maps.Clone(factories)
	factories[policy.MutatingPluginName] = func(d admission.Deps) (admission.Handler, error) {
		return policy.NewMutating(d.Reader, compiler, mutations, d.Apply, d.Converter, d.Authorizer), nil
	}
	factories[webhook.MutatingPluginName] = func(d admission.Deps) (admission.Handler, error) {
		return webhook.New(true, d.Reader, d.Services, compiler, d.Converter, d.Authorizer, d.Log), nil
	}
	factories[webhook.ValidatingPluginName] = func(d admission.Deps) (admission.Handler, error) {
		return webhook.New(false, d.Reader, d.Services, compiler, d.Converter, d.Authorizer, d.Log), nil
	}
	factories[policy.PluginName] = func(d admission.Deps) (admission.Handler, error) {
		return policy.New(d.Reader, compiler, d.Converter, d.Authorizer), nil
	}
	var chain []admission.Plugin
	for _, n := range enabled {
		f := factories[n]
		if f == nil {
			continue
		}
		h, err := f(deps)
		if err != nil {
			return admission.Chain{}, fmt.Errorf("admission plugin %s: %w", n, err)
		}
		chain = append(chain, admission.Plugin{Name: n, Handler: h})
	}
	return admission.NewChain(chain...), nil
}

type alwaysAdmit struct{}

func (alwaysAdmit) Handles(admission.Operation) bool                   { return true }
func (alwaysAdmit) Admit(context.Context, *admission.Attributes) error { return nil }

type alwaysDeny struct{}

func (alwaysDeny) Handles(admission.Operation) bool { return true }
func (alwaysDeny) Validate(_ context.Context, a *admission.Attributes) error {
	return admission.NewForbidden(a, fmt.Errorf("admission control is denying all modifications"))
}
