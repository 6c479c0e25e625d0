package etcdsnapshot

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/robfig/cron/v3"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// DefaultSchedule and DefaultRetention are k3s's: a snapshot every 12 hours, the newest
// five kept.
const (
	DefaultSchedule  = "0 */12 * * *"
	DefaultRetention = 5
)

// ParseSchedule reads a standard five-field cron spec (minute hour day-of-month month
// day-of-week, with ranges, lists, steps and names), as --etcd-snapshot-schedule-cron.
func ParseSchedule(spec string) (cron.Schedule, error) {
	s, err := cron.ParseStandard(spec)
	if err != nil {
		return nil, fmt.Errorf("--etcd-snapshot-schedule-cron %q: %w", spec, err)
	}
	return s, nil
}

// Scheduled takes snapshots on a schedule.
type Scheduled struct {
	Schedule  cron.Schedule
	Retention int
	Dir, Node string
	// Connect dials the member to snapshot, once per snapshot.
	Connect func(context.Context) (*clientv3.Client, error)
	Log     *slog.Logger
}

// Run takes a snapshot named etcd-snapshot-NODE-UNIXTIME at each time of the schedule
// and prunes those beyond the retention, until ctx ends. A failed snapshot is logged and
// the next one is still taken: the server goes on without it, as k3s's does.
func (s *Scheduled) Run(ctx context.Context) error {
	for {
		next := s.Schedule.Next(time.Now())
		s.Log.Debug("next etcd snapshot", "at", next)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Until(next)):
		}
		if err := s.takeOne(ctx, next); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			s.Log.Error("scheduled etcd snapshot failed", "err", err)
		}
	}
}

func (s *Scheduled) takeOne(ctx context.Context, at time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	cli, err := s.Connect(ctx)
	if err != nil {
		return err
	}
	defer cli.Close()
	snap, err := Save(ctx, cli, s.Dir, ScheduledName, s.Node, at)
	if err != nil {
		return err
	}
	s.Log.Info("saved etcd snapshot", "name", snap.Name, "size", snap.Size)
	pruned, err := Prune(s.Dir, ScheduledName, s.Node, s.Retention)
	for _, n := range pruned {
		s.Log.Info("pruned etcd snapshot", "name", n)
	}
	return err
}
