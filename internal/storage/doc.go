// Package storage keeps API objects in etcd and serves lists and watches from memory.
//
// Store does the writes and the quorum reads: every write is an etcd transaction
// conditioned on the key's mod revision, so concurrent writers (several apiservers
// included) never overwrite each other. Cache holds every object under the registry
// prefix in memory, fed by a single etcd watch, and serves lists and watches to any
// number of clients; etcd sees one watch however many clients there are.
//
// Resource versions are etcd revisions: an object's resourceVersion is its key's mod
// revision, a list's is the revision it was read at.
package storage
