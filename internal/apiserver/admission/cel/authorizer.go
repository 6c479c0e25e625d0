package cel

import (
	"context"
	"fmt"
	"reflect"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"

	"mizzen/internal/apiserver/authz"
	"mizzen/internal/registry"
)

// The types of upstream's authorizer library: `authorizer` checks what the request's
// user may do (`authorizer.group('apps').resource('deployments').namespace('ns')
// .check('create').allowed()`, `authorizer.path('/healthz').check('get')`), and
// `authorizer.serviceAccount(ns, name)` what a service account may.
var (
	authorizerType    = types.NewOpaqueType("kubernetes.authorization.Authorizer")
	pathCheckType     = types.NewOpaqueType("kubernetes.authorization.PathCheck")
	groupCheckType    = types.NewOpaqueType("kubernetes.authorization.GroupCheck")
	resourceCheckType = types.NewOpaqueType("kubernetes.authorization.ResourceCheck")
	decisionType      = types.NewOpaqueType("kubernetes.authorization.Decision")
)

// authzValue is an authorizer, or a check being built: the attributes so far, and
// the type saying which functions apply.
type authzValue struct {
	t     *types.Type
	ctx   context.Context
	authz authz.Authorizer
	attrs authz.Attributes
}

// decision is a check's answer.
type decision struct {
	allowed bool
	reason  string
}

// NewAuthorizer is the value of the `authorizer` variable for a request by user;
// a nil authorizer allows everything, as an apiserver without one does.
func NewAuthorizer(ctx context.Context, a authz.Authorizer, user registry.User) ref.Val {
	if a == nil {
		a = authz.AlwaysAllow{}
	}
	return &authzValue{t: authorizerType, ctx: ctx, authz: a, attrs: authz.Attributes{User: user}}
}

func (v *authzValue) ConvertToNative(reflect.Type) (any, error) {
	return nil, fmt.Errorf("%s cannot be converted", v.t.TypeName())
}
func (v *authzValue) ConvertToType(t ref.Type) ref.Val {
	if t == types.TypeType {
		return v.t
	}
	return types.NewErr("type conversion error from %s to %s", v.t.TypeName(), t.TypeName())
}
func (v *authzValue) Equal(other ref.Val) ref.Val { return types.Bool(v == other) }
func (v *authzValue) Type() ref.Type              { return v.t }
func (v *authzValue) Value() any                  { return v.attrs }

func (d *decision) ConvertToNative(reflect.Type) (any, error) {
	return nil, fmt.Errorf("%s cannot be converted", decisionType.TypeName())
}
func (d *decision) ConvertToType(t ref.Type) ref.Val {
	if t == types.TypeType {
		return decisionType
	}
	return types.NewErr("type conversion error from %s to %s", decisionType.TypeName(), t.TypeName())
}
func (d *decision) Equal(other ref.Val) ref.Val { return types.Bool(d == other) }
func (d *decision) Type() ref.Type              { return decisionType }
func (d *decision) Value() any                  { return d }

// step returns a copy of v of type t with change applied to its attributes.
func step(want *types.Type, t *types.Type, change func(a *authz.Attributes, s string)) func(ref.Val, ref.Val) ref.Val {
	return func(recv, arg ref.Val) ref.Val {
		v, ok := recv.(*authzValue)
		s, isStr := arg.(types.String)
		if !ok || !isStr || v.t != want {
			return types.MaybeNoSuchOverloadErr(recv)
		}
		next := *v
		next.t = t
		change(&next.attrs, string(s))
		return &next
	}
}

func check(recv, verb ref.Val) ref.Val {
	v, ok := recv.(*authzValue)
	s, isStr := verb.(types.String)
	if !ok || !isStr || (v.t != pathCheckType && v.t != resourceCheckType) {
		return types.MaybeNoSuchOverloadErr(recv)
	}
	attrs := v.attrs
	attrs.Verb = string(s)
	attrs.ResourceRequest = v.t == resourceCheckType
	allowed, reason := v.authz.Authorize(v.ctx, attrs)
	return &decision{allowed: allowed, reason: reason}
}

func serviceAccount(args ...ref.Val) ref.Val {
	if len(args) != 3 {
		return types.NewErr("serviceAccount takes a namespace and a name")
	}
	v, ok := args[0].(*authzValue)
	ns, nsOK := args[1].(types.String)
	name, nameOK := args[2].(types.String)
	if !ok || !nsOK || !nameOK || v.t != authorizerType {
		return types.MaybeNoSuchOverloadErr(args[0])
	}
	next := *v
	next.attrs = authz.Attributes{User: registry.User{Name: fmt.Sprintf("system:serviceaccount:%s:%s", ns, name),
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + string(ns), "system:authenticated"}}}
	return &next
}

func decisionField(get func(d *decision) ref.Val) func(ref.Val) ref.Val {
	return func(recv ref.Val) ref.Val {
		d, ok := recv.(*decision)
		if !ok {
			return types.MaybeNoSuchOverloadErr(recv)
		}
		return get(d)
	}
}

// authorizerLibrary declares the authorizer functions.
func authorizerLibrary() []cel.EnvOption {
	str := cel.StringType
	return []cel.EnvOption{
		cel.Function("path", cel.MemberOverload("authorizer_path", []*cel.Type{authorizerType, str}, pathCheckType,
			cel.BinaryBinding(step(authorizerType, pathCheckType, func(a *authz.Attributes, s string) { a.Path = s })))),
		cel.Function("group", cel.MemberOverload("authorizer_group", []*cel.Type{authorizerType, str}, groupCheckType,
			cel.BinaryBinding(step(authorizerType, groupCheckType, func(a *authz.Attributes, s string) { a.Group = s })))),
		cel.Function("serviceAccount", cel.MemberOverload("authorizer_serviceaccount", []*cel.Type{authorizerType, str, str}, authorizerType,
			cel.FunctionBinding(serviceAccount))),
		cel.Function("resource", cel.MemberOverload("groupcheck_resource", []*cel.Type{groupCheckType, str}, resourceCheckType,
			cel.BinaryBinding(step(groupCheckType, resourceCheckType, func(a *authz.Attributes, s string) { a.Resource = s })))),
		cel.Function("subresource", cel.MemberOverload("resourcecheck_subresource", []*cel.Type{resourceCheckType, str}, resourceCheckType,
			cel.BinaryBinding(step(resourceCheckType, resourceCheckType, func(a *authz.Attributes, s string) { a.Subresource = s })))),
		cel.Function("namespace", cel.MemberOverload("resourcecheck_namespace", []*cel.Type{resourceCheckType, str}, resourceCheckType,
			cel.BinaryBinding(step(resourceCheckType, resourceCheckType, func(a *authz.Attributes, s string) { a.Namespace = s })))),
		cel.Function("name", cel.MemberOverload("resourcecheck_name", []*cel.Type{resourceCheckType, str}, resourceCheckType,
			cel.BinaryBinding(step(resourceCheckType, resourceCheckType, func(a *authz.Attributes, s string) { a.Name = s })))),
		cel.Function("check",
			cel.MemberOverload("pathcheck_check", []*cel.Type{pathCheckType, str}, decisionType, cel.BinaryBinding(check)),
			cel.MemberOverload("resourcecheck_check", []*cel.Type{resourceCheckType, str}, decisionType, cel.BinaryBinding(check))),
		cel.Function("allowed", cel.MemberOverload("decision_allowed", []*cel.Type{decisionType}, cel.BoolType,
			cel.UnaryBinding(decisionField(func(d *decision) ref.Val { return types.Bool(d.allowed) })))),
		cel.Function("reason", cel.MemberOverload("decision_reason", []*cel.Type{decisionType}, str,
			cel.UnaryBinding(decisionField(func(d *decision) ref.Val { return types.String(d.reason) })))),
		// mizzen's authorizers answer without errors.
		cel.Function("errored", cel.MemberOverload("decision_errored", []*cel.Type{decisionType}, cel.BoolType,
			cel.UnaryBinding(decisionField(func(*decision) ref.Val { return types.False })))),
		cel.Function("error", cel.MemberOverload("decision_error", []*cel.Type{decisionType}, str,
			cel.UnaryBinding(decisionField(func(*decision) ref.Val { return types.String("") })))),
	}
}
