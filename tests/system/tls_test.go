package system

import (
	"testing"

	"github.com/contentledger/contentledger/pkg/api"
)

// TestPeerTLS: the validators of every test cluster run mutual TLS on the
// raft peer port, with certificates that name their node ids
// (cluster.peerTLSEnv); this one checks that they are all connected.
func TestPeerTLS(t *testing.T) {
	c := newCluster(t, 3, "MOCK")
	leader := c.waitLeader()
	c.write(leader, `{"title":"over TLS"}`)
	c.converged(c.nodes...)
	var peers api.Peers
	if err := get(leader.url()+"/v1/peers", &peers); err != nil {
		t.Fatal(err)
	}
	for _, p := range peers.Peers {
		if !p.Self && (p.Transport == nil || !p.Transport.Connected) {
			t.Fatalf("validator %d not connected over TLS: %+v", p.ID, p.Transport)
		}
	}
}
