//go:build !cgo

package main

// callC has nothing to call without cgo.
func callC() bool { return true }
