package transport

import (
	"context"
	"errors"
	"fmt"
)

// ProbeQuorum checks that this node reaches a majority of the members it
// knows, counting itself: a stream in either direction counts. It is the
// deep health check of the peer connections.
func (t *Transport) ProbeQuorum(context.Context) (string, error) {
	stats := t.Stats()
	reachable := 1
	for _, s := range stats {
		if s.Connected || s.InboundConnected {
			reachable++
		}
	}
	members := len(stats) + 1
	detail := fmt.Sprintf("%d of %d members reachable (this one included)", reachable, members)
	if reachable < members/2+1 {
		return "", errors.New("no quorum: " + detail)
	}
	return detail, nil
}
