package crdschema

import (
	"regexp"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
)

// kubernetesLib adds the list and regex functions of upstream's Kubernetes CEL
// library that CRD rules use most: isSorted, sum, min, max, indexOf and lastIndexOf on
// lists, find and findAll on strings.
func kubernetesLib() cel.EnvOption {
	list := cel.ListType(cel.DynType)
	return cel.Lib(kubernetesLibrary{list: list})
}

type kubernetesLibrary struct{ list *cel.Type }

func (l kubernetesLibrary) LibraryName() string { return "mizzen.kubernetes.lists.regex" }

func (l kubernetesLibrary) ProgramOptions() []cel.ProgramOption { return nil }

func (l kubernetesLibrary) CompileOptions() []cel.EnvOption {
	return []cel.EnvOption{
		cel.Function("isSorted", cel.MemberOverload("list_is_sorted", []*cel.Type{l.list}, cel.BoolType, cel.UnaryBinding(isSorted))),
		cel.Function("sum", cel.MemberOverload("list_sum", []*cel.Type{l.list}, cel.DynType, cel.UnaryBinding(sum))),
		cel.Function("min", cel.MemberOverload("list_min", []*cel.Type{l.list}, cel.DynType, cel.UnaryBinding(extreme(types.IntOne)))),
		cel.Function("max", cel.MemberOverload("list_max", []*cel.Type{l.list}, cel.DynType, cel.UnaryBinding(extreme(types.IntNegOne)))),
		cel.Function("indexOf", cel.MemberOverload("list_index_of", []*cel.Type{l.list, cel.DynType}, cel.IntType, cel.BinaryBinding(indexOf(false)))),
		cel.Function("lastIndexOf", cel.MemberOverload("list_last_index_of", []*cel.Type{l.list, cel.DynType}, cel.IntType, cel.BinaryBinding(indexOf(true)))),
		cel.Function("find", cel.MemberOverload("string_find", []*cel.Type{cel.StringType, cel.StringType}, cel.StringType, cel.BinaryBinding(find))),
		cel.Function("findAll", cel.MemberOverload("string_find_all", []*cel.Type{cel.StringType, cel.StringType}, cel.ListType(cel.StringType), cel.BinaryBinding(findAll))),
	}
}

func items(v ref.Val) ([]ref.Val, bool) {
	l, ok := v.(traits.Lister)
	if !ok {
		return nil, false
	}
	n, _ := l.Size().(types.Int)
	out := make([]ref.Val, 0, int(n))
	for i := types.Int(0); i < n; i++ {
		out = append(out, l.Get(i))
	}
	return out, true
}

func isSorted(v ref.Val) ref.Val {
	xs, ok := items(v)
	if !ok {
		return types.MaybeNoSuchOverloadErr(v)
	}
	for i := 1; i < len(xs); i++ {
		c, ok := xs[i-1].(traits.Comparer)
		if !ok {
			return types.MaybeNoSuchOverloadErr(xs[i-1])
		}
		if r := c.Compare(xs[i]); types.IsError(r) {
			return r
		} else if r == types.IntOne {
			return types.False
		}
	}
	return types.True
}

func sum(v ref.Val) ref.Val {
	xs, ok := items(v)
	if !ok {
		return types.MaybeNoSuchOverloadErr(v)
	}
	var acc ref.Val = types.IntZero
	for i, x := range xs {
		if i == 0 {
			acc = x
			continue
		}
		a, ok := acc.(traits.Adder)
		if !ok {
			return types.MaybeNoSuchOverloadErr(acc)
		}
		acc = a.Add(x)
		if types.IsError(acc) {
			return acc
		}
	}
	return acc
}

// extreme returns min (replace when the current compares as want) or max.
func extreme(want types.Int) func(ref.Val) ref.Val {
	return func(v ref.Val) ref.Val {
		xs, ok := items(v)
		if !ok {
			return types.MaybeNoSuchOverloadErr(v)
		}
		if len(xs) == 0 {
			return types.NewErr("min or max called on an empty list")
		}
		best := xs[0]
		for _, x := range xs[1:] {
			c, ok := best.(traits.Comparer)
			if !ok {
				return types.MaybeNoSuchOverloadErr(best)
			}
			if r := c.Compare(x); types.IsError(r) {
				return r
			} else if r == want {
				best = x
			}
		}
		return best
	}
}

func indexOf(last bool) func(ref.Val, ref.Val) ref.Val {
	return func(v, elem ref.Val) ref.Val {
		xs, ok := items(v)
		if !ok {
			return types.MaybeNoSuchOverloadErr(v)
		}
		found := -1
		for i, x := range xs {
			if x.Equal(elem) == types.True {
				found = i
				if !last {
					break
				}
			}
		}
		return types.Int(found)
	}
}

func find(s, pattern ref.Val) ref.Val {
	re, err := regexp.Compile(string(pattern.(types.String)))
	if err != nil {
		return types.NewErr("%v", err)
	}
	return types.String(re.FindString(string(s.(types.String))))
}

func findAll(s, pattern ref.Val) ref.Val {
	re, err := regexp.Compile(string(pattern.(types.String)))
	if err != nil {
		return types.NewErr("%v", err)
	}
	return types.DefaultTypeAdapter.NativeToValue(re.FindAllString(string(s.(types.String)), -1))
}
