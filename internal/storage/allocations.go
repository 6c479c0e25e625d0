package storage

import (
	"context"
	"strconv"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Allocation names one cluster IP or node port a Service holds. Each is an etcd key of
// its own, created only if absent, so no two services (and no two apiservers) ever get
// the same address or port.
type Allocation struct{ key string }

const (
	serviceIPPrefix = Prefix + "serviceipallocations/"
	nodePortPrefix  = Prefix + "servicenodeportallocations/"
)

// ServiceIP is the allocation of a cluster IP, in its canonical text form.
func ServiceIP(ip string) Allocation { return Allocation{key: serviceIPPrefix + ip} }

// NodePort is the allocation of a node port.
func NodePort(port int) Allocation { return Allocation{key: nodePortPrefix + strconv.Itoa(port)} }

// Claim records owner as the holder of a, if nobody holds it yet. created says whether
// this call made the claim; holder is who holds a afterwards (owner when created).
func (s *Store) Claim(ctx context.Context, a Allocation, owner string) (created bool, holder string, err error) {
	resp, err := s.client.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(a.key), "=", 0)).
		Then(clientv3.OpPut(a.key, owner)).Else(clientv3.OpGet(a.key)).Commit()
	if err != nil {
		return false, "", err
	}
	if resp.Succeeded {
		return true, owner, nil
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 1 {
		holder = string(kvs[0].Value)
	}
	return false, holder, nil
}

// Release frees a, whoever holds it.
func (s *Store) Release(ctx context.Context, a Allocation) error {
	_, err := s.client.Delete(ctx, a.key)
	return err
}
