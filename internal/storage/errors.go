package storage

import (
	"errors"
	"fmt"
)

// Error kinds returned by Store and Cache; the apiserver maps them to HTTP statuses.
var (
	ErrNotFound      = errors.New("not found")
	ErrAlreadyExists = errors.New("already exists")
	// ErrConflict: the object changed since the version the caller based its write on.
	ErrConflict = errors.New("conflict")
	// ErrExpired: the requested resource version is older than what is still kept.
	ErrExpired = errors.New("resource version too old")
	// ErrTooLargeRV: the requested resource version is newer than the cache has seen
	// within the wait allowed.
	ErrTooLargeRV = errors.New("resource version too large")
	// ErrStopped: the cache has stopped following etcd (the server is shutting down),
	// so a new watch would never see an event nor end.
	ErrStopped = errors.New("the watch cache has stopped")
)

// KeyError carries the key an error is about.
type KeyError struct {
	Err error
	Key string
	// Detail is an optional message for the client.
	Detail string
}

func (e *KeyError) Error() string {
	if e.Detail != "" {
		return fmt.Sprintf("%s: %v: %s", e.Key, e.Err, e.Detail)
	}
	return fmt.Sprintf("%s: %v", e.Key, e.Err)
}

func (e *KeyError) Unwrap() error { return e.Err }

func keyErr(err error, key, detail string) error {
	return &KeyError{Err: err, Key: key, Detail: detail}
}
