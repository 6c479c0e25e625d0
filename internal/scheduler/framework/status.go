// Package framework defines the scheduling framework shared by the scheduler and its
// plugins: extension-point interfaces, typed statuses, per-cycle state, node and pod
// snapshots, and the cluster events that can make a rejected pod schedulable.
package framework

import (
	"errors"
	"strings"
)

// Code is the outcome class of a plugin call.
type Code int

const (
	// Success means the plugin accepted the pod (a nil *Status is also Success).
	Success Code = iota
	// Error is an internal failure; the pod is retried with back-off.
	Error
	// Unschedulable means the pod does not fit, but preemption might help.
	Unschedulable
	// UnschedulableAndUnresolvable means the pod does not fit and preemption cannot help.
	UnschedulableAndUnresolvable
	// Wait is returned by Permit plugins to hold a pod before binding.
	Wait
	// Skip tells the framework to skip this plugin's later extension points for the pod.
	Skip
)

var codeNames = [...]string{"Success", "Error", "Unschedulable", "UnschedulableAndUnresolvable", "Wait", "Skip"}

func (c Code) String() string {
	if int(c) < len(codeNames) {
		return codeNames[c]
	}
	return "Unknown"
}

// Status is the typed result of a plugin call. A nil *Status means Success.
type Status struct {
	code    Code
	reasons []string
	err     error
	plugin  string
}

// NewStatus builds a status with the given code and user-visible reasons.
func NewStatus(code Code, reasons ...string) *Status {
	return &Status{code: code, reasons: reasons}
}

// AsStatus wraps an internal error as an Error status.
func AsStatus(err error) *Status {
	if err == nil {
		return nil
	}
	return &Status{code: Error, reasons: []string{err.Error()}, err: err}
}

// Code returns the status code; nil is Success.
func (s *Status) Code() Code {
	if s == nil {
		return Success
	}
	return s.code
}

// IsSuccess reports whether the status is nil or Success.
func (s *Status) IsSuccess() bool { return s.Code() == Success }

// IsSkip reports whether the plugin asked to be skipped.
func (s *Status) IsSkip() bool { return s.Code() == Skip }

// IsRejected reports whether the pod was found not to fit (as opposed to an error).
func (s *Status) IsRejected() bool {
	c := s.Code()
	return c == Unschedulable || c == UnschedulableAndUnresolvable
}

// Reasons returns the user-visible reasons.
func (s *Status) Reasons() []string {
	if s == nil {
		return nil
	}
	return s.reasons
}

// Message joins the reasons with ", ".
func (s *Status) Message() string {
	if s == nil {
		return ""
	}
	return strings.Join(s.reasons, ", ")
}

// Plugin names the plugin that produced a failing status.
func (s *Status) Plugin() string {
	if s == nil {
		return ""
	}
	return s.plugin
}

// WithPlugin records the plugin that produced the status and returns it.
func (s *Status) WithPlugin(name string) *Status {
	if s != nil {
		s.plugin = name
	}
	return s
}

// AsError returns nil for success and rejection-free codes, else an error.
func (s *Status) AsError() error {
	if s.IsSuccess() || s.IsSkip() {
		return nil
	}
	if s.err != nil {
		return s.err
	}
	return errors.New(s.Message())
}
