package crdschema

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// TestRuleCostLimits: the estimated cost of a rule follows the schema's maxItems and
// maxLength, and a rule or a schema over upstream's budget is refused with its words.
func TestRuleCostLimits(t *testing.T) {
	pairwise := `
type: object
properties:
  names:
    type: array
    %s
    items: {type: string %s}
    x-kubernetes-validations:
    - rule: self.all(a, self.all(b, a == b || !a.startsWith(b)))
      message: no name may prefix another
`
	unbounded := schemaOf(t, strings.NewReplacer("%s", "").Replace(pairwise))
	got := messages(ValidateRules(field.NewPath("schema"), unbounded))
	wantRule := "schema.properties[names].x-kubernetes-validations[0].rule: Forbidden: estimated rule cost exceeds budget by factor of more than 100x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"
	if len(got) != 1 || got[0] != wantRule {
		t.Errorf("unbounded list: got %q\nwant %q", got, wantRule)
	}

	bounded := schemaOf(t, strings.Replace(strings.Replace(pairwise, "%s", "maxItems: 20", 1), "%s", ", maxLength: 64", 1))
	if errs := ValidateRules(field.NewPath("schema"), bounded); len(errs) > 0 {
		t.Errorf("bounded list: %v", errs)
	}

	// Each rule fits its own budget (a few units for each of up to three million
	// items), but twelve of them do not fit the schema's.
	doc := `
type: object
properties:
  items:
    type: array
    maxItems: 3000000
    items:
      type: object
      properties:
        a: {type: string, maxLength: 2}
        b: {type: string, maxLength: 2}
      x-kubernetes-validations:
`
	for i := 0; i < 12; i++ {
		doc += "      - rule: self.a != self.b || " + strings.Repeat("true || ", i) + "false\n"
	}
	total := schemaOf(t, doc)
	got = messages(ValidateRules(field.NewPath("schema"), total))
	if len(got) == 0 || !strings.HasPrefix(got[len(got)-1], "schema: Forbidden: x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema exceeds budget by factor of ") {
		t.Fatalf("total: got %q", got)
	}
	for _, m := range got[:len(got)-1] {
		if !strings.HasSuffix(m, "rule: Forbidden: contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema") {
			t.Errorf("total: %q", m)
		}
	}
}

// TestRuntimeCostLimit: a rule whose estimate could not see its real cost stops at
// the per-call limit with upstream's error.
func TestRuntimeCostLimit(t *testing.T) {
	s := schemaOf(t, `
type: object
properties:
  count:
    type: integer
    x-kubernetes-validations:
    - rule: "[1,2,3,4,5,6,7,8,9,10].all(a, [1,2,3,4,5,6,7,8,9,10].all(b, [1,2,3,4,5,6,7,8,9,10].all(c, [1,2,3,4,5,6,7,8,9,10].all(d, [1,2,3,4,5,6,7,8,9,10].all(e, [1,2,3,4,5,6,7,8,9,10].all(f, a+b+c+d+e+f+self > 0))))))"
      message: too slow
`)
	got := messages(NewRules(s).Validate(map[string]interface{}{"count": int64(1)}, nil))
	want := "count: Invalid value: \"integer\": 'operation cancelled: actual cost limit exceeded': no further validation rules will be run due to call cost exceeds limit for rule: too slow"
	if len(got) != 1 || got[0] != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
}
