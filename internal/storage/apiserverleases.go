package storage

import (
	"context"
	"net"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Every running apiserver holds a key under apiserverLeasePrefix, bound to an etcd lease
// it keeps alive, as upstream's lease endpoint reconciler does; the kubernetes service's
// endpoints list the addresses whose keys are alive.
const (
	apiserverLeasePrefix = "/registry/masterleases/"
	apiserverLeaseTTL    = 15 // seconds
)

// APIServerLease is one apiserver's key under the masterleases prefix, alive as long as
// it is refreshed. Not safe for concurrent use.
type APIServerLease struct {
	client *clientv3.Client
	key    string
	ip     string
	lease  clientv3.LeaseID
}

// APIServerLease is the lease advertising the apiserver at ip.
func (s *Store) APIServerLease(ip net.IP) *APIServerLease {
	return &APIServerLease{client: s.client, key: apiserverLeasePrefix + ip.String(), ip: ip.String()}
}

// Refresh keeps the lease alive, or grants a new one and writes the key under it.
func (l *APIServerLease) Refresh(ctx context.Context) error {
	if l.lease != 0 {
		if _, err := l.client.KeepAliveOnce(ctx, l.lease); err == nil {
			return nil
		}
	}
	granted, err := l.client.Grant(ctx, apiserverLeaseTTL)
	if err != nil {
		l.lease = 0
		return err
	}
	if _, err := l.client.Put(ctx, l.key, l.ip, clientv3.WithLease(granted.ID)); err != nil {
		l.lease = 0
		return err
	}
	l.lease = granted.ID
	return nil
}

// Withdraw deletes the key, so that the apiserver is no longer advertised.
func (l *APIServerLease) Withdraw(ctx context.Context) error {
	_, err := l.client.Delete(ctx, l.key)
	return err
}

// LiveAPIServers are the addresses of the apiservers whose leases are alive, in etcd's
// key order.
func (s *Store) LiveAPIServers(ctx context.Context) ([]string, error) {
	resp, err := s.client.Get(ctx, apiserverLeasePrefix, clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	var ips []string
	for _, kv := range resp.Kvs {
		ips = append(ips, string(kv.Value))
	}
	return ips, nil
}
