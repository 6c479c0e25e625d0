package nodeipam

import (
	"fmt"
	"math/big"
	"net/netip"
	"sync"
)

// allocator hands out the subnets of one cluster CIDR, each owned by a node name.
type allocator struct {
	cluster  netip.Prefix
	maskSize int
	count    *big.Int // number of subnets of maskSize in cluster

	mu     sync.Mutex
	owners map[netip.Prefix]string // subnet -> node
	byNode map[string]netip.Prefix
	next   *big.Int // where the next search starts, so freed subnets are reused last
}

func newAllocator(clusterCIDR string, maskSize int) (*allocator, error) {
	cluster, err := netip.ParsePrefix(clusterCIDR)
	if err != nil {
		return nil, fmt.Errorf("cluster CIDR %q: %w", clusterCIDR, err)
	}
	cluster = cluster.Masked()
	if maskSize < cluster.Bits() || maskSize > cluster.Addr().BitLen() {
		return nil, fmt.Errorf("node CIDR mask size %d does not fit in cluster CIDR %s", maskSize, cluster)
	}
	return &allocator{
		cluster:  cluster,
		maskSize: maskSize,
		count:    new(big.Int).Lsh(big.NewInt(1), uint(maskSize-cluster.Bits())),
		owners:   map[netip.Prefix]string{},
		byNode:   map[string]netip.Prefix{},
		next:     new(big.Int),
	}, nil
}

// subnet returns the i-th subnet of the cluster CIDR.
func (a *allocator) subnet(i *big.Int) netip.Prefix {
	base := new(big.Int).SetBytes(a.cluster.Addr().AsSlice())
	offset := new(big.Int).Lsh(i, uint(a.cluster.Addr().BitLen()-a.maskSize))
	b := base.Add(base, offset).FillBytes(make([]byte, a.cluster.Addr().BitLen()/8))
	addr, _ := netip.AddrFromSlice(b)
	return netip.PrefixFrom(addr, a.maskSize)
}

// occupy records that node holds cidr (learned from the API). It reports false when
// cidr is outside the cluster CIDR or already held by another node.
func (a *allocator) occupy(node, cidr string) bool {
	p, err := netip.ParsePrefix(cidr)
	if err != nil || p.Bits() != a.maskSize || !a.cluster.Contains(p.Addr()) {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if owner, ok := a.owners[p]; ok && owner != node {
		return false
	}
	a.owners[p] = node
	a.byNode[node] = p
	return true
}

// allocate returns the node's subnet, choosing a free one if it has none.
func (a *allocator) allocate(node string) (netip.Prefix, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if p, ok := a.byNode[node]; ok {
		return p, nil
	}
	i := new(big.Int).Set(a.next)
	one := big.NewInt(1)
	for tried := new(big.Int); tried.Cmp(a.count) < 0; tried.Add(tried, one) {
		p := a.subnet(i)
		i.Add(i, one)
		if i.Cmp(a.count) == 0 {
			i.SetInt64(0)
		}
		if _, used := a.owners[p]; !used {
			a.owners[p] = node
			a.byNode[node] = p
			a.next = i
			return p, nil
		}
	}
	return netip.Prefix{}, fmt.Errorf("no free /%d left in cluster CIDR %s", a.maskSize, a.cluster)
}

// release frees the node's subnet.
func (a *allocator) release(node string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if p, ok := a.byNode[node]; ok {
		delete(a.byNode, node)
		delete(a.owners, p)
	}
}
