package cel

import (
	"reflect"
	"testing"
)

func TestMutationExpressions(t *testing.T) {
	c, err := NewMutationCompiler()
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]any{"object": map[string]any{"metadata": map[string]any{"name": "p"}}}
	for _, tc := range []struct {
		expr string
		want any
	}{
		{`Object{metadata: Object.metadata{labels: {"a": object.metadata.name}}}`,
			map[string]any{"metadata": map[string]any{"labels": map[string]any{"a": "p"}}}},
		{`Object{spec: Object.spec{containers: [Object.spec.containers{name: "c", image: "i"}]}}`,
			map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "c", "image": "i"}}}}},
		{`[JSONPatch{op: "add", path: "/metadata/labels/" + jsonpatch.escapeKey("example.com/x~y"), value: "v"}]`,
			[]any{map[string]any{"op": "add", "path": "/metadata/labels/example.com~1x~0y", "value": "v"}}},
		{`[JSONPatch{op: "replace", path: "/spec/replicas", value: 3}]`,
			[]any{map[string]any{"op": "replace", "path": "/spec/replicas", "value": int64(3)}}},
	} {
		got, err := c.Eval(tc.expr, vars)
		if err != nil {
			t.Errorf("%s: %v", tc.expr, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s = %#v, want %#v", tc.expr, got, tc.want)
		}
	}
	if _, err := c.Eval(`JSONPatch{op: 1}`, vars); err == nil {
		t.Errorf("a JSONPatch op that is not a string compiled")
	}
	if _, err := c.Eval(`JSONPatch{nope: "x"}`, vars); err == nil {
		t.Errorf("a JSONPatch with an unknown field compiled")
	}
}
