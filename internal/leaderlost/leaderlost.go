// Package leaderlost names the error a leader-elected component returns when it loses
// its Lease (it could not renew it in time): as upstream's components, it stops rather
// than go on acting beside a new leader. A standalone command exits with it, for its
// supervisor to restart; the server bundle restarts the component itself.
package leaderlost

import "errors"

// ErrLost is returned, possibly wrapped, by a component that lost its Lease.
var ErrLost = errors.New("leader election lost")
