package core

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
)

func TestRetryStartup(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	transient := errors.New("etcdserver: leader changed")

	calls := 0
	err := retryStartup(context.Background(), log, "step", func() error {
		calls++
		if calls < 3 {
			return transient
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Errorf("a step failing twice then succeeding: err %v after %d calls, want nil after 3", err, calls)
	}

	ctx, cancel := context.WithCancel(context.Background())
	calls = 0
	err = retryStartup(ctx, log, "step", func() error {
		calls++
		if calls == 2 {
			cancel()
		}
		return transient
	})
	if !errors.Is(err, transient) || calls != 2 {
		t.Errorf("a step that never succeeds: err %v after %d calls, want the step's error once the context ends", err, calls)
	}
}
