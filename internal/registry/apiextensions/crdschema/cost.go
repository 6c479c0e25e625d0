package crdschema

import (
	"fmt"
	"math"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Upstream's compile-time budgets: one rule's estimated cost (times the number of
// times its node can occur in an object), and the sum over a CRD version's schema.
const (
	StaticEstimatedCostLimit    = 10000000
	StaticEstimatedCRDCostLimit = 100000000
	// maxRequestSizeBytes bounds what an unbounded string, list or map can hold: no
	// request body is larger.
	maxRequestSizeBytes = 3 * 1024 * 1024
)

// costErrorMessage is upstream's words for an estimate over a budget.
func costErrorMessage(costName string, cost, limit uint64) string {
	factor := float64(cost) / float64(limit)
	var f string
	switch {
	case factor > 100:
		f = "more than 100x"
	case factor < 1.5:
		f = fmt.Sprintf("%fx", factor)
	default:
		f = fmt.Sprintf("%.1fx", factor)
	}
	return fmt.Sprintf("%s exceeds budget by factor of %s (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)", costName, f)
}

// minSerializedSize is the smallest JSON a value of the schema can be written as,
// which bounds how many of them fit in one request.
func minSerializedSize(s *apiextv1.JSONSchemaProps) uint64 {
	if s == nil {
		return 1
	}
	switch s.Type {
	case "boolean":
		return 4 // true
	case "number", "integer":
		return 1
	case "string":
		if s.MinLength != nil {
			return uint64(*s.MinLength) + 2
		}
		return 2 // ""
	case "array":
		return 2 // []
	case "object":
		size := uint64(2) // {}
		for _, name := range s.Required {
			p := s.Properties[name]
			size += uint64(len(name)) + 4 + minSerializedSize(&p) // "name": value,
		}
		return size
	}
	return 1
}

// maxItems is how many items a list of the schema can hold: maxItems, or as many of
// the smallest item as a request fits.
func maxItems(s *apiextv1.JSONSchemaProps) uint64 {
	var item *apiextv1.JSONSchemaProps
	if s.Items != nil {
		item = s.Items.Schema
	}
	return boundOrFit(s.MaxItems, item, 1) // v,
}

// maxProperties is how many entries a map of the schema can hold.
func maxProperties(s *apiextv1.JSONSchemaProps) uint64 {
	var value *apiextv1.JSONSchemaProps
	if s.AdditionalProperties != nil {
		value = s.AdditionalProperties.Schema
	}
	return boundOrFit(s.MaxProperties, value, 6) // "":v,
}

// boundOrFit is a declared bound, or how many elements of the schema, each with
// overhead bytes of punctuation, fit in one request.
func boundOrFit(bound *int64, element *apiextv1.JSONSchemaProps, overhead uint64) uint64 {
	if bound != nil {
		return uint64(*bound)
	}
	return (maxRequestSizeBytes - 2) / (minSerializedSize(element) + overhead)
}

// maxLength is the longest a string of the schema can be.
func maxLength(s *apiextv1.JSONSchemaProps) uint64 {
	if s.MaxLength != nil {
		return uint64(*s.MaxLength)
	}
	switch s.Format {
	case "date":
		return 10
	case "date-time":
		return 35
	case "duration":
		return 64
	}
	return maxRequestSizeBytes - 2
}

// sizeEstimator gives cel-go's cost estimator the sizes of the values a rule reads,
// following each value's path from self (or oldSelf) through the schema.
type sizeEstimator struct{ root *apiextv1.JSONSchemaProps }

func (e sizeEstimator) EstimateSize(n checker.AstNode) *checker.SizeEstimate {
	path := n.Path()
	if len(path) == 0 || (path[0] != "self" && path[0] != "oldSelf") {
		return nil
	}
	s := e.root
	for _, step := range path[1:] {
		if s == nil {
			return nil
		}
		switch {
		case (step == "@items" || step == "@keys") && s.Type == "array":
			// A comprehension over a dynamically typed value names its elements @keys.
			s = itemSchema(s)
		case step == "@keys":
			return &checker.SizeEstimate{Min: 0, Max: maxRequestSizeBytes - 2}
		case step == "@values" && s.AdditionalProperties != nil:
			s = s.AdditionalProperties.Schema
		default:
			if p, ok := s.Properties[step]; ok {
				s = &p
			} else if s.AdditionalProperties != nil {
				s = s.AdditionalProperties.Schema
			} else {
				return nil
			}
		}
	}
	if s == nil {
		return nil
	}
	var max uint64
	switch {
	case s.Type == "string" || s.XIntOrString:
		max = maxLength(s)
	case s.Type == "array":
		max = maxItems(s)
	case s.Type == "object" && (s.AdditionalProperties != nil || (len(s.Properties) == 0 && s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields)):
		max = maxProperties(s)
	case s.Type == "object":
		max = uint64(len(s.Properties))
	default:
		// Rules see values dynamically typed, so cel-go prices a comparison of two
		// numbers as if they might be strings: a number's "size" keeps that price
		// to a number's.
		max = 1
	}
	return &checker.SizeEstimate{Min: 0, Max: max}
}

func (sizeEstimator) EstimateCallCost(string, string, *checker.AstNode, []checker.AstNode) *checker.CallEstimate {
	return nil
}

func itemSchema(s *apiextv1.JSONSchemaProps) *apiextv1.JSONSchemaProps {
	if s.Items == nil {
		return nil
	}
	return s.Items.Schema
}

// estimateCost is the most a compiled expression can cost on values of schema s.
func estimateCost(env *cel.Env, ast *cel.Ast, s *apiextv1.JSONSchemaProps) (uint64, error) {
	est, err := env.EstimateCost(ast, sizeEstimator{root: s})
	if err != nil {
		return 0, err
	}
	return est.Max, nil
}

// mulSaturating multiplies without overflowing.
func mulSaturating(a, b uint64) uint64 {
	if a != 0 && b > math.MaxUint64/a {
		return math.MaxUint64
	}
	return a * b
}

func addSaturating(a, b uint64) uint64 {
	if a > math.MaxUint64-b {
		return math.MaxUint64
	}
	return a + b
}

// ruleCost is one rule's share of the budget, as the schema walk found it.
type ruleCost struct {
	path field.Path
	cost uint64
}

// costTotal adds up a schema's rules and keeps the most expensive ones, which
// upstream names when the total is over budget.
type costTotal struct {
	total         uint64
	mostExpensive []ruleCost
}

func (t *costTotal) observe(p *field.Path, cost uint64) {
	t.total = addSaturating(t.total, cost)
	// Upstream lists the expensive rules that together pass the limit: the largest
	// first, as many as are needed (at most four).
	t.mostExpensive = append(t.mostExpensive, ruleCost{path: *p, cost: cost})
	for i := len(t.mostExpensive) - 1; i > 0 && t.mostExpensive[i].cost > t.mostExpensive[i-1].cost; i-- {
		t.mostExpensive[i], t.mostExpensive[i-1] = t.mostExpensive[i-1], t.mostExpensive[i]
	}
	if len(t.mostExpensive) > 4 {
		t.mostExpensive = t.mostExpensive[:4]
	}
}

// errors are the total's refusals, nil within budget.
func (t *costTotal) errors(root *field.Path) field.ErrorList {
	if t.total <= StaticEstimatedCRDCostLimit {
		return nil
	}
	var errs field.ErrorList
	for _, e := range t.mostExpensive {
		p := e.path
		errs = append(errs, field.Forbidden(&p, "contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema"))
	}
	return append(errs, field.Forbidden(root, costErrorMessage("x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema", t.total, StaticEstimatedCRDCostLimit)))
}
