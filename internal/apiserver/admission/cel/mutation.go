package cel

import (
	"fmt"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
)

// MutationCompiler compiles the expressions of MutatingAdmissionPolicy's mutations:
// besides the admission variables they may construct objects (`Object{spec:
// Object.spec{...}}`, any `Object.<field>...` name) and JSON patch operations
// (`JSONPatch{op, path, from, value}`), and escape keys with jsonpatch.escapeKey.
// Constructed values evaluate to plain maps, which ToNative turns into JSON-like Go
// values.
type MutationCompiler struct{ *programs }

// NewMutationCompiler returns a compiler for mutation expressions.
func NewMutationCompiler() (*MutationCompiler, error) {
	p, err := newPrograms([]cel.EnvOption{
		cel.CustomTypeProvider(&objectTypes{Registry: mustRegistry()}),
		cel.Function("jsonpatch.escapeKey", cel.Overload("jsonpatch_escapeKey_string", []*cel.Type{cel.StringType}, cel.StringType,
			cel.UnaryBinding(func(v ref.Val) ref.Val {
				s, ok := v.(types.String)
				if !ok {
					return types.MaybeNoSuchOverloadErr(v)
				}
				return types.String(strings.ReplaceAll(strings.ReplaceAll(string(s), "~", "~0"), "/", "~1"))
			}))),
	})
	if err != nil {
		return nil, err
	}
	return &MutationCompiler{p}, nil
}

func mustRegistry() *types.Registry {
	r, err := types.NewRegistry()
	if err != nil {
		panic(err)
	}
	return r
}

// Eval evaluates a mutation expression and returns its value as plain Go values
// (maps, slices, strings, int64, float64, bool, nil).
func (c *MutationCompiler) Eval(expr string, vars map[string]any) (any, error) {
	p, err := c.Compile(expr)
	if err != nil {
		return nil, err
	}
	out, _, err := p.Eval(activation(vars))
	if err != nil {
		return nil, err
	}
	return ToNative(out)
}

// objectTypes declares the struct types mutations construct: Object and its nested
// fields (any name under Object.), and JSONPatch. Their fields are dynamically typed:
// the object's schema is checked when the result is merged into the object.
type objectTypes struct {
	*types.Registry
}

func isObjectType(name string) bool {
	return name == "Object" || strings.HasPrefix(name, "Object.") || name == "JSONPatch"
}

func (p *objectTypes) FindStructType(name string) (*types.Type, bool) {
	if isObjectType(name) {
		return types.NewTypeTypeWithParam(types.NewObjectType(name)), true
	}
	return p.Registry.FindStructType(name)
}

func (p *objectTypes) FindStructFieldNames(name string) ([]string, bool) {
	if name == "JSONPatch" {
		return []string{"op", "path", "from", "value"}, true
	}
	if isObjectType(name) {
		return nil, true
	}
	return p.Registry.FindStructFieldNames(name)
}

func (p *objectTypes) FindStructFieldType(name, field string) (*types.FieldType, bool) {
	if name == "JSONPatch" {
		t := types.DynType
		if field == "op" || field == "path" || field == "from" {
			t = types.StringType
		} else if field != "value" {
			return nil, false
		}
		return &types.FieldType{Type: t}, true
	}
	if isObjectType(name) {
		return &types.FieldType{Type: types.DynType}, true
	}
	return p.Registry.FindStructFieldType(name, field)
}

func (p *objectTypes) NewValue(name string, fields map[string]ref.Val) ref.Val {
	if !isObjectType(name) {
		return p.Registry.NewValue(name, fields)
	}
	m := make(map[ref.Val]ref.Val, len(fields))
	for k, v := range fields {
		m[types.String(k)] = v
	}
	return types.NewRefValMap(p.Registry, m)
}

// ToNative turns a CEL value into plain Go values as JSON would hold them.
func ToNative(v ref.Val) (any, error) {
	switch x := v.(type) {
	case nil:
		return nil, nil
	case types.Null:
		return nil, nil
	case types.String:
		return string(x), nil
	case types.Int:
		return int64(x), nil
	case types.Uint:
		return int64(x), nil
	case types.Double:
		return float64(x), nil
	case types.Bool:
		return bool(x), nil
	case traits.Mapper:
		out := map[string]any{}
		it := x.Iterator()
		for it.HasNext() == types.True {
			k := it.Next()
			ks, ok := k.(types.String)
			if !ok {
				return nil, fmt.Errorf("map key %v is not a string", k)
			}
			val, err := ToNative(x.Get(k))
			if err != nil {
				return nil, err
			}
			out[string(ks)] = val
		}
		return out, nil
	case traits.Lister:
		var out []any
		it := x.Iterator()
		for it.HasNext() == types.True {
			val, err := ToNative(it.Next())
			if err != nil {
				return nil, err
			}
			out = append(out, val)
		}
		if out == nil {
			out = []any{}
		}
		return out, nil
	}
	if types.IsError(v) {
		return nil, fmt.Errorf("%v", v)
	}
	// Values the admission variables hold natively (maps and lists from objects).
	switch n := v.Value().(type) {
	case map[string]any, []any, string, int64, float64, bool:
		return n, nil
	}
	return nil, fmt.Errorf("unsupported value of type %s", v.Type().TypeName())
}
