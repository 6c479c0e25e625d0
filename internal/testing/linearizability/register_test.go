package linearizability

import (
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// The model must reject what a broken store would show, or a check with it proves
// nothing: a stale read after an acknowledged write, two CAS from one value both
// succeeding, and a lost write.
func TestModel(t *testing.T) {
	type op struct {
		in        Input
		out       Output
		call, ret int64
	}
	read := func(k, v string) func(call, ret int64) op {
		return func(call, ret int64) op { return op{Input{Key: k, Kind: Read}, Output{Value: v}, call, ret} }
	}
	cas := func(k, old, new string, r Result) func(call, ret int64) op {
		return func(call, ret int64) op {
			return op{Input{Key: k, Kind: CAS, Old: old, New: new}, Output{Result: r}, call, ret}
		}
	}
	mk := func(o op) op { return o }
	for _, tc := range []struct {
		name string
		ops  []op
		want porcupine.CheckResult
	}{
		{"sequential writes and reads", []op{
			mk(cas("a", "", "1", OK)(0, 1)), mk(read("a", "1")(2, 3)), mk(cas("a", "1", "2", OK)(4, 5)), mk(read("a", "2")(6, 7)),
		}, porcupine.Ok},
		{"a stale read after an acknowledged write", []op{
			mk(cas("a", "", "1", OK)(0, 1)), mk(cas("a", "1", "2", OK)(2, 3)), mk(read("a", "1")(4, 5)),
		}, porcupine.Illegal},
		{"two CAS from one value both succeed", []op{
			mk(cas("a", "", "1", OK)(0, 1)), mk(cas("a", "1", "2", OK)(2, 5)), mk(cas("a", "1", "3", OK)(2, 5)),
		}, porcupine.Illegal},
		{"a conflict where the precondition held", []op{
			mk(cas("a", "", "1", OK)(0, 1)), mk(cas("a", "1", "2", Conflict)(2, 3)),
		}, porcupine.Illegal},
		{"concurrent read may see either", []op{
			mk(cas("a", "", "1", OK)(0, 1)), mk(cas("a", "1", "2", OK)(2, 6)), mk(read("a", "1")(3, 4)), mk(read("a", "2")(5, 7)),
		}, porcupine.Ok},
		{"an unknown write that happened", []op{
			mk(cas("a", "", "1", Unknown)(0, 1)), mk(read("a", "1")(2, 3)),
		}, porcupine.Ok},
		{"an unknown write that did not", []op{
			mk(cas("a", "", "1", Unknown)(0, 1)), mk(read("a", "")(2, 3)),
		}, porcupine.Ok},
		{"keys are independent", []op{
			mk(cas("a", "", "1", OK)(0, 1)), mk(read("b", "")(2, 3)), mk(read("a", "1")(2, 3)),
		}, porcupine.Ok},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := NewHistory()
			for i, o := range tc.ops {
				h.Add(i, o.in, o.out, o.call, o.ret)
			}
			if got := h.Check(10 * time.Second); got != tc.want {
				t.Fatalf("got %s, want %s", got, tc.want)
			}
		})
	}
}
