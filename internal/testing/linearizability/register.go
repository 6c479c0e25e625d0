// Package linearizability checks histories of API operations against a sequential
// model with github.com/anishathalye/porcupine: a set of registers (one per object
// name), read with quorum reads and written with compare-and-set (an update carrying
// the resourceVersion it read). Values must be unique per write, so that a
// resourceVersion precondition and a value precondition are the same thing.
package linearizability

import (
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// Kind of an operation.
type Kind int

const (
	Read Kind = iota
	// CAS writes New if the register holds Old ("" for a register not created yet).
	CAS
)

// Input is what a client asked.
type Input struct {
	Key  string
	Kind Kind
	Old  string
	New  string
}

// Result of a CAS.
type Result int

const (
	OK Result = iota
	// Conflict: the precondition failed (409), definitely not written.
	Conflict
	// Unknown: an error that leaves open whether it was written (a timeout, a 5xx, a
	// connection cut).
	Unknown
)

// Output is what the client saw: a read's value, or a CAS's result.
type Output struct {
	Value  string
	Result Result
}

// Model is a register per key, partitioned by key.
var Model = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range history {
			k := op.Input.(Input).Key
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() interface{} { return "" },
	Step: func(state, input, output interface{}) (bool, interface{}) {
		s, in, out := state.(string), input.(Input), output.(Output)
		switch in.Kind {
		case Read:
			return out.Value == s, s
		default:
			switch out.Result {
			case OK:
				return s == in.Old, in.New
			case Conflict:
				return s != in.Old, s
			default: // it may have happened; if it did, the precondition held
				if s == in.Old {
					return true, in.New
				}
				return true, s
			}
		}
	},
	DescribeOperation: func(input, output interface{}) string {
		in, out := input.(Input), output.(Output)
		if in.Kind == Read {
			return fmt.Sprintf("get(%s) -> %q", in.Key, out.Value)
		}
		return fmt.Sprintf("cas(%s, %q -> %q) -> %d", in.Key, in.Old, in.New, out.Result)
	},
}

// History records operations from concurrent clients.
type History struct {
	mu  sync.Mutex
	ops []porcupine.Operation
	t0  time.Time
}

// NewHistory starts a history now.
func NewHistory() *History { return &History{t0: time.Now()} }

// Now is a timestamp for Add.
func (h *History) Now() int64 { return int64(time.Since(h.t0)) }

// Add records an operation called at call and returned at ret. A CAS whose result is
// Unknown is taken to have returned at the end of time: it may take effect at any
// point after its call.
func (h *History) Add(client int, in Input, out Output, call, ret int64) {
	if in.Kind == CAS && out.Result == Unknown {
		ret = math.MaxInt64
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: in, Output: out, Call: call, Return: ret})
}

// Len is how many operations were recorded.
func (h *History) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.ops)
}

// Check reports whether the history is linearizable, or Unknown when the checker ran
// out of time.
func (h *History) Check(timeout time.Duration) porcupine.CheckResult {
	h.mu.Lock()
	ops := append([]porcupine.Operation(nil), h.ops...)
	h.mu.Unlock()
	return porcupine.CheckOperationsTimeout(Model, ops, timeout)
}
