package crdschema

import (
	"fmt"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/ext"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// perCallCostLimit bounds one rule's evaluation, as upstream's per-call limit does.
const perCallCostLimit = 1000000

// celEnv is the environment rules compile in: self and oldSelf, typed dynamically
// (the schema's types are checked by the schema validator before rules run), with
// cel-go's string, list, set and math extensions and part of upstream's Kubernetes
// library (cellib.go).
func celEnv() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable("self", cel.DynType),
		cel.Variable("oldSelf", cel.DynType),
		ext.Strings(), ext.Lists(), ext.Sets(), ext.Math(),
		cel.HomogeneousAggregateLiterals(),
		cel.CrossTypeNumericComparisons(true),
		kubernetesLib(),
		cel.DefaultUTCTimeZone(true),
	)
}

// compiledRule is one x-kubernetes-validations rule, ready to run.
type compiledRule struct {
	rule        apiextv1.ValidationRule
	prog        cel.Program
	message     cel.Program // messageExpression; nil without one
	usesOldSelf bool
	// cost and messageCost are the most one evaluation of the rule and of its
	// messageExpression can cost on values of the rule's schema.
	cost, messageCost uint64
}

type compileError struct {
	rule, message string
}

func (e *compileError) toField(p *field.Path, rule apiextv1.ValidationRule) field.ErrorList {
	var errs field.ErrorList
	if e.rule != "" {
		errs = append(errs, field.Invalid(p.Child("rule"), rule, e.rule))
	}
	if e.message != "" {
		errs = append(errs, field.Invalid(p.Child("messageExpression"), rule, e.message))
	}
	return errs
}

func compileRule(s *apiextv1.JSONSchemaProps, rule apiextv1.ValidationRule) (*compiledRule, *compileError) {
	env, err := celEnv()
	if err != nil {
		return nil, &compileError{rule: err.Error()}
	}
	ast, iss := env.Compile(rule.Rule)
	if iss.Err() != nil {
		return nil, &compileError{rule: "compilation failed: " + iss.Err().Error()}
	}
	prog, err := env.Program(ast, cel.CostLimit(perCallCostLimit))
	if err != nil {
		return nil, &compileError{rule: "program instantiation failed: " + err.Error()}
	}
	c := &compiledRule{rule: rule, prog: prog, usesOldSelf: referencesOldSelf(ast)}
	if c.cost, err = estimateCost(env, ast, s); err != nil {
		return nil, &compileError{rule: "cost estimation failed: " + err.Error()}
	}
	if rule.MessageExpression != "" {
		mast, iss := env.Compile(rule.MessageExpression)
		if iss.Err() != nil {
			return nil, &compileError{message: "messageExpression compilation failed: " + iss.Err().Error()}
		}
		if c.messageCost, err = estimateCost(env, mast, s); err != nil {
			return nil, &compileError{message: "cost estimation failed: " + err.Error()}
		}
		if c.message, err = env.Program(mast, cel.CostLimit(perCallCostLimit)); err != nil {
			return nil, &compileError{message: "messageExpression compilation failed: " + err.Error()}
		}
	}
	return c, nil
}

// ruleErrorString names a rule in an evaluation error: its message, or the rule.
func ruleErrorString(rule apiextv1.ValidationRule) string {
	if m := strings.TrimSpace(rule.Message); m != "" {
		return m
	}
	return strings.TrimSpace(rule.Rule)
}

func referencesOldSelf(ast *cel.Ast) bool {
	checked, err := cel.AstToCheckedExpr(ast)
	if err != nil {
		return true
	}
	for _, ref := range checked.GetReferenceMap() {
		if ref.GetName() == "oldSelf" {
			return true
		}
	}
	return false
}

// Rules evaluates a schema's x-kubernetes-validations against objects.
type Rules struct {
	schema *apiextv1.JSONSchemaProps
	byRule map[string]*compiledRule // rule text + message expression -> compiled
	any    bool
}

// NewRules compiles every rule of s.
func NewRules(s *apiextv1.JSONSchemaProps) *Rules {
	r := &Rules{schema: s, byRule: map[string]*compiledRule{}}
	var walk func(s *apiextv1.JSONSchemaProps)
	walk = func(s *apiextv1.JSONSchemaProps) {
		if s == nil {
			return
		}
		for _, rule := range s.XValidations {
			if c, err := compileRule(s, rule); err == nil {
				r.byRule[ruleKey(rule)] = c
				r.any = true
			}
		}
		for _, c := range s.Properties {
			c := c
			walk(&c)
		}
		if s.Items != nil {
			walk(s.Items.Schema)
		}
		if s.AdditionalProperties != nil {
			walk(s.AdditionalProperties.Schema)
		}
	}
	walk(s)
	return r
}

func ruleKey(rule apiextv1.ValidationRule) string {
	return rule.Rule + "\x00" + rule.MessageExpression
}

// Validate runs every rule against obj; old is the stored object on update (nil on
// create), which transition rules (those using oldSelf) need to run at all.
func (r *Rules) Validate(obj, old map[string]interface{}) field.ErrorList {
	if r == nil || !r.any {
		return nil
	}
	var errs field.ErrorList
	var oldVal interface{}
	if old != nil {
		oldVal = old
	}
	r.walk(obj, oldVal, old != nil, r.schema, nil, &errs)
	return errs
}

func (r *Rules) walk(v, old interface{}, hasOld bool, s *apiextv1.JSONSchemaProps, p *field.Path, errs *field.ErrorList) {
	if s == nil || v == nil {
		return
	}
	for _, rule := range s.XValidations {
		c := r.byRule[ruleKey(rule)]
		if c == nil || (c.usesOldSelf && !hasOld) {
			continue
		}
		vars := map[string]interface{}{"self": celValue(v, s)}
		if hasOld {
			vars["oldSelf"] = celValue(old, s)
		}
		out, _, err := c.prog.Eval(vars)
		if err != nil {
			if strings.HasPrefix(err.Error(), "operation cancelled: actual cost limit exceeded") {
				*errs = append(*errs, field.Invalid(p, s.Type, fmt.Sprintf("'%v': no further validation rules will be run due to call cost exceeds limit for rule: %v", err, ruleErrorString(rule))))
				continue
			}
			*errs = append(*errs, field.Invalid(p, s.Type, fmt.Sprintf("%v evaluating rule: %v", err, ruleErrorString(rule))))
			continue
		}
		if ok, isBool := out.Value().(bool); isBool && ok {
			continue
		}
		msg := rule.Message
		if c.message != nil {
			if m, _, err := c.message.Eval(vars); err == nil {
				if str, ok := m.Value().(string); ok && strings.TrimSpace(str) != "" && !strings.Contains(str, "\n") {
					msg = str
				}
			}
		}
		if msg == "" {
			msg = "failed rule: " + rule.Rule
		}
		at := p
		if rule.FieldPath != "" {
			for _, part := range strings.Split(strings.TrimPrefix(rule.FieldPath, "."), ".") {
				at = at.Child(part)
			}
		}
		if rule.Reason != nil {
			switch *rule.Reason {
			case apiextv1.FieldValueRequired:
				*errs = append(*errs, field.Required(at, msg))
				continue
			case apiextv1.FieldValueForbidden:
				*errs = append(*errs, field.Forbidden(at, msg))
				continue
			case apiextv1.FieldValueDuplicate:
				*errs = append(*errs, field.Duplicate(at, msg))
				continue
			}
		}
		*errs = append(*errs, field.Invalid(at, s.Type, msg))
	}
	switch x := v.(type) {
	case map[string]interface{}:
		oldMap, _ := old.(map[string]interface{})
		for k, child := range x {
			var cs *apiextv1.JSONSchemaProps
			if c, ok := s.Properties[k]; ok {
				cs = &c
			} else if s.AdditionalProperties != nil {
				cs = s.AdditionalProperties.Schema
			}
			if cs == nil {
				continue
			}
			o, ok := oldMap[k]
			r.walk(child, o, hasOld && ok, cs, p.Child(k), errs)
		}
	case []interface{}:
		if s.Items == nil || s.Items.Schema == nil {
			return
		}
		// List items correlate with old items only by position in atomic lists, which
		// upstream does not do; transition rules inside lists run on create semantics.
		for i, item := range x {
			r.walk(item, nil, false, s.Items.Schema, p.Index(i), errs)
		}
	}
}

// celValue gives a rule the value as the schema types it: JSON integers in fields of
// type number are doubles, as upstream's typed CEL values are.
func celValue(v interface{}, s *apiextv1.JSONSchemaProps) interface{} {
	if s == nil {
		return v
	}
	switch x := v.(type) {
	case int64:
		if s.Type == "number" {
			return float64(x)
		}
	case map[string]interface{}:
		if !hasNumbers(s) {
			return v
		}
		out := make(map[string]interface{}, len(x))
		for k, c := range x {
			if cs, ok := s.Properties[k]; ok {
				out[k] = celValue(c, &cs)
			} else if s.AdditionalProperties != nil {
				out[k] = celValue(c, s.AdditionalProperties.Schema)
			} else {
				out[k] = c
			}
		}
		return out
	case []interface{}:
		if s.Items == nil || !hasNumbers(s.Items.Schema) {
			return v
		}
		out := make([]interface{}, len(x))
		for i, c := range x {
			out[i] = celValue(c, s.Items.Schema)
		}
		return out
	}
	return v
}

// hasNumbers reports whether a schema has a field of type number anywhere.
func hasNumbers(s *apiextv1.JSONSchemaProps) bool {
	if s == nil {
		return false
	}
	if s.Type == "number" {
		return true
	}
	for _, c := range s.Properties {
		c := c
		if hasNumbers(&c) {
			return true
		}
	}
	if s.Items != nil && hasNumbers(s.Items.Schema) {
		return true
	}
	return s.AdditionalProperties != nil && hasNumbers(s.AdditionalProperties.Schema)
}
