package etcd

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// AddLearner adds a member listening for peers at peerURL to the cluster as a
// learner (a non-voting member, so a slow start of the new member never costs the
// cluster its quorum), and returns its id and the --initial-cluster it must start
// with. A member already registered at peerURL (this machine joined before and lost
// its data, or crashed before starting) is removed first: the address is ours.
func AddLearner(ctx context.Context, cli *clientv3.Client, name, peerURL string) (uint64, string, error) {
	list, err := cli.MemberList(ctx)
	if err != nil {
		return 0, "", fmt.Errorf("listing the etcd cluster's members: %w", err)
	}
	for _, m := range list.Members {
		if slices.Contains(m.PeerURLs, peerURL) {
			if _, err := cli.MemberRemove(ctx, m.ID); err != nil {
				return 0, "", fmt.Errorf("removing the stale member %q at %s: %w", m.Name, peerURL, err)
			}
		}
	}
	// etcd refuses a new member while the last one added is still a learner or has been
	// connected for only a few seconds (its strict reconfiguration check): wait it out.
	var resp *clientv3.MemberAddResponse
	for {
		resp, err = cli.MemberAddAsLearner(ctx, []string{peerURL})
		if err == nil {
			break
		}
		if !errors.Is(err, rpctypes.ErrUnhealthy) && !errors.Is(err, rpctypes.ErrTooManyLearners) {
			return 0, "", fmt.Errorf("adding this machine to the etcd cluster: %w", err)
		}
		select {
		case <-ctx.Done():
			return 0, "", fmt.Errorf("adding this machine to the etcd cluster: %w", err)
		case <-time.After(time.Second):
		}
	}
	var initial []string
	for _, m := range resp.Members {
		memberName := m.Name
		if m.ID == resp.Member.ID {
			memberName = name
		} else if memberName == "" {
			continue // another member added but not started yet
		}
		for _, u := range m.PeerURLs {
			initial = append(initial, memberName+"="+u)
		}
	}
	return resp.Member.ID, strings.Join(initial, ","), nil
}

// PromoteWhenReady promotes the learner id to a voting member once it has caught up
// with the leader's log (etcd refuses before), retrying until ctx ends. A member that
// already votes is left as it is.
func PromoteWhenReady(ctx context.Context, cli *clientv3.Client, id uint64) error {
	for {
		list, err := cli.MemberList(ctx)
		if err == nil {
			m := find(list.Members, id)
			if m == nil {
				return fmt.Errorf("member %x is no longer in the etcd cluster", id)
			}
			if !m.IsLearner {
				return nil
			}
			if _, err = cli.MemberPromote(ctx, id); err == nil {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("promoting etcd member %x: %w (last error: %v)", id, ctx.Err(), err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// Remove removes the member named name from the cluster; a name no member has is
// not an error (it was removed already). etcd refuses to remove a voter while the
// cluster would be left without a healthy quorum (as right after a member joined,
// until the members have been connected for a few seconds): that is retried until
// ctx ends.
func Remove(ctx context.Context, cli *clientv3.Client, name string) error {
	for {
		list, err := cli.MemberList(ctx)
		if err != nil {
			return fmt.Errorf("listing the etcd cluster's members: %w", err)
		}
		i := slices.IndexFunc(list.Members, func(m *etcdserverpb.Member) bool { return m.Name == name })
		if i < 0 {
			return nil
		}
		_, err = cli.MemberRemove(ctx, list.Members[i].ID)
		if err == nil {
			return nil
		}
		if !errors.Is(err, rpctypes.ErrUnhealthy) {
			return fmt.Errorf("removing etcd member %q: %w", name, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("removing etcd member %q: %w", name, err)
		case <-time.After(time.Second):
		}
	}
}

// ErrNotMember is returned by MemberID for a name the cluster does not know.
var ErrNotMember = errors.New("not a member of the etcd cluster")

// MemberID is the id of the member named name.
func MemberID(ctx context.Context, cli *clientv3.Client, name string) (uint64, error) {
	list, err := cli.MemberList(ctx)
	if err != nil {
		return 0, err
	}
	for _, m := range list.Members {
		if m.Name == name {
			return m.ID, nil
		}
	}
	return 0, ErrNotMember
}

func find(members []*etcdserverpb.Member, id uint64) *etcdserverpb.Member {
	for _, m := range members {
		if m.ID == id {
			return m
		}
	}
	return nil
}
