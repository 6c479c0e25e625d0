// Package storage keeps API objects in etcd and serves lists and watches from memory.
//
// Store does the writes and the quorum reads: every write is an etcd transaction
// conditioned on the key's mod revision, so concurrent writers (several apiservers
// included) never overwrite each other. Cache holds every object under the registry
// prefix in memory, fed by a single etcd watch, and serves lists and watches to any
// number of clients; etcd sees one watch however many clients there are.
//
// The store also owns the keys the apiserver writes beside API objects: the cluster IP
// and node port allocations of Services (Claim, Release) and the leases advertising
// each running apiserver in the kubernetes service (APIServerLease). Nothing outside
// this package holds an etcd client.
//
// Resource versions are etcd revisions: an object's resourceVersion is its key's mod
// revision, a list's is the revision it was read at.
package storage
