package controlplane

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"

	"mizzen/internal/leaderlost"
)

// A component that loses its Lease is started again; any other end is the bundle's.
func TestRestartOnLostLease(t *testing.T) {
	runs := 0
	other := errors.New("port in use")
	err := restartOnLostLease(context.Background(), "scheduler", func(context.Context) error {
		runs++
		if runs < 3 {
			return fmt.Errorf("scheduler: %w", leaderlost.ErrLost)
		}
		return other
	}, slog.New(slog.DiscardHandler))
	if runs != 3 || !errors.Is(err, other) {
		t.Errorf("ran %d times and ended with %v; want 3 runs ending with %v", runs, err, other)
	}

	ctx, cancel := context.WithCancel(context.Background())
	runs = 0
	err = restartOnLostLease(ctx, "controller-manager", func(context.Context) error {
		runs++
		cancel() // the bundle stops while the component reports its loss
		return leaderlost.ErrLost
	}, slog.New(slog.DiscardHandler))
	if runs != 1 {
		t.Errorf("ran %d times after the bundle stopped, want 1", runs)
	}
	_ = err
}
