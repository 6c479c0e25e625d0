// Package cel compiles and evaluates the CEL expressions of admission: webhooks'
// matchConditions and ValidatingAdmissionPolicy's validations, over the variables
// object, oldObject, request, params and namespaceObject.
package cel

import (
	"fmt"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/ext"
	"k8s.io/apimachinery/pkg/runtime"
)

// PerCallCostLimit bounds one evaluation, as upstream's per-call limit does.
const PerCallCostLimit = 1000000

// Variables are the names an expression may use.
var Variables = []string{"object", "oldObject", "request", "params", "namespaceObject", "variables", "authorizer"}

// programs compiles expressions in one environment once and keeps them; Compiler and
// MutationCompiler are two environments of it.
type programs struct {
	env   *cel.Env
	opts  []cel.ProgramOption
	mu    sync.Mutex
	cache map[string]cel.Program
}

// newPrograms builds an environment of the admission variables, cel-go's string, set
// and list extensions and the authorizer library, with extra options on top; every
// program it makes stops at PerCallCostLimit.
func newPrograms(extra []cel.EnvOption, opts ...cel.ProgramOption) (*programs, error) {
	envOpts := []cel.EnvOption{ext.Strings(), ext.Sets(), ext.Lists(), cel.HomogeneousAggregateLiterals(), cel.EagerlyValidateDeclarations(true)}
	envOpts = append(envOpts, authorizerLibrary()...)
	envOpts = append(envOpts, extra...)
	for _, v := range Variables {
		envOpts = append(envOpts, cel.Variable(v, cel.DynType))
	}
	env, err := cel.NewEnv(envOpts...)
	if err != nil {
		return nil, err
	}
	return &programs{env: env, opts: append(opts, cel.CostLimit(PerCallCostLimit)), cache: map[string]cel.Program{}}, nil
}

// Compile parses and checks an expression.
func (c *programs) Compile(expr string) (cel.Program, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.cache[expr]; ok {
		return p, nil
	}
	ast, iss := c.env.Compile(expr)
	if iss != nil && iss.Err() != nil {
		return nil, fmt.Errorf("compilation failed: %v", iss.Err())
	}
	p, err := c.env.Program(ast, c.opts...)
	if err != nil {
		return nil, err
	}
	c.cache[expr] = p
	return p, nil
}

// Compiler compiles the expressions of match conditions, validations, variables and
// messages.
type Compiler struct{ *programs }

// NewCompiler returns a compiler over the admission variables.
func NewCompiler() (*Compiler, error) {
	p, err := newPrograms(nil, cel.EvalOptions(cel.OptOptimize))
	if err != nil {
		return nil, err
	}
	return &Compiler{p}, nil
}

// Eval evaluates an expression with the given variables (absent ones are null).
func (c *Compiler) Eval(expr string, vars map[string]any) (ref.Val, error) {
	p, err := c.Compile(expr)
	if err != nil {
		return nil, err
	}
	out, _, err := p.Eval(activation(vars))
	if err != nil {
		return nil, err
	}
	return out, nil
}

// activation is vars with every admission variable it lacks set to null.
func activation(vars map[string]any) map[string]any {
	act := make(map[string]any, len(Variables)+len(vars))
	for _, v := range Variables {
		act[v] = nil
	}
	for k, v := range vars {
		act[k] = v
	}
	return act
}

// EvalBool evaluates an expression that must give a bool.
func (c *Compiler) EvalBool(expr string, vars map[string]any) (bool, error) {
	v, err := c.Eval(expr, vars)
	if err != nil {
		return false, err
	}
	b, ok := v.(types.Bool)
	if !ok {
		return false, fmt.Errorf("expression returned %s, want bool", v.Type().TypeName())
	}
	return bool(b), nil
}

// EvalString evaluates an expression that must give a string.
func (c *Compiler) EvalString(expr string, vars map[string]any) (string, error) {
	v, err := c.Eval(expr, vars)
	if err != nil {
		return "", err
	}
	s, ok := v.(types.String)
	if !ok {
		return "", fmt.Errorf("expression returned %s, want string", v.Type().TypeName())
	}
	return string(s), nil
}

// ToValue turns an object into what CEL sees: its JSON form as maps and lists; nil
// for none.
func ToValue(obj runtime.Object) (any, error) {
	if obj == nil {
		return nil, nil
	}
	if u, ok := obj.(interface{ UnstructuredContent() map[string]interface{} }); ok {
		return u.UnstructuredContent(), nil
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	return m, nil
}
