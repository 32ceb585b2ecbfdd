package system

import (
	"fmt"
	"strings"
	"testing"
)

// TestBootstrapAddressesMayDiffer starts validators that name each other by
// different addresses of the same hosts (localhost vs 127.0.0.1): the
// addresses a node dials are its own business and must not enter the
// replicated state, so the state hashes agree.
func TestBootstrapAddressesMayDiffer(t *testing.T) {
	c := newClusterEnv(t, 3, "MOCK", func(n *node, nodes []*node) []string {
		var dial []string
		for _, m := range nodes {
			peer := m.peerAddr
			if m != n && n.id%2 == 0 {
				peer = strings.Replace(peer, "127.0.0.1", "localhost", 1)
			}
			dial = append(dial, fmt.Sprintf("%d=%s=%s", m.id, peer, m.url()))
		}
		return []string{"SVC_VALIDATOR_INITIAL_CLUSTER=" + strings.Join(dial, ",")}
	})
	leader := c.waitLeader()
	c.write(leader, `{"title":"one state"}`)
	index, hash := c.converged(c.nodes...)
	t.Logf("three validators with different peer addresses agree at %d (%s)", index, hash)
}
