package system

import (
	"crypto/tls"
	"encoding/binary"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/contentledger/contentledger/pkg/peercert"
)

// TestPeerPortAttack dials a validator's raft peer port as an attacker
// would, in TESTNET with the production defaults (peer mTLS): (a) without a
// certificate, (b) with a valid certificate of the cluster's CA for a node
// id that is no member, claiming to be member 2, and sending at once a
// heartbeat whose commit is far past the log's end (etcd raft panics on it).
// Both are refused and learn nothing of the cluster, every validator stays
// up, a paid write made during the attack commits, and the state hashes
// agree.
func TestPeerPortAttack(t *testing.T) {
	c := newCluster(t, 3, "TESTNET")
	leader := c.waitLeader()
	target := c.nodes[0]
	const clusterID = "contentledger-local" // SVC_VALIDATOR_CLUSTER_ID's default: assume the attacker knows it

	ca, err := peercert.ReadCA(c.pki)
	if err != nil {
		t.Fatal(err)
	}
	issued, err := ca.IssueNode(9, []string{"127.0.0.1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := tls.X509KeyPair(issued.CertPEM, issued.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	attack := func(cert *tls.Certificate) (reply []byte, err error) {
		raw, err := net.DialTimeout("tcp", target.peerAddr, 2*time.Second)
		if err != nil {
			return nil, err
		}
		defer raw.Close()
		_ = raw.SetDeadline(time.Now().Add(5 * time.Second))
		cfg := &tls.Config{MinVersion: tls.VersionTLS13, InsecureSkipVerify: true}
		if cert != nil {
			cfg.Certificates = []tls.Certificate{*cert}
		}
		conn := tls.Client(raw, cfg)
		if err := conn.Handshake(); err != nil {
			return nil, err
		}
		if _, err := conn.Write(append(peerHello(2, target.id, clusterID), poisonHeartbeat(2, target.id)...)); err != nil {
			return nil, err
		}
		return io.ReadAll(conn) // the acceptor answers and closes, or closes
	}

	// The attack runs while a paid write goes through the leader.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var rounds int
	var failures []string
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if reply, err := attack(nil); len(reply) > 0 {
				mu.Lock()
				failures = append(failures, "no certificate: answered "+string(reply))
				mu.Unlock()
			} else if err == nil {
				mu.Lock()
				failures = append(failures, "no certificate: the TLS handshake and hello went through")
				mu.Unlock()
			}
			reply, err := attack(&stranger)
			mu.Lock()
			switch {
			case err != nil && len(reply) == 0:
				failures = append(failures, "stranger: no reply: "+err.Error())
			case len(reply) < 6 || string(reply[:4]) != "CLRT" || reply[4] == 0:
				failures = append(failures, "stranger: not refused: "+string(reply))
			case strings.Contains(string(reply), clusterID) || strings.Contains(string(reply), "cluster") || strings.Contains(string(reply), "names"):
				failures = append(failures, "stranger learned: "+string(reply))
			}
			rounds++
			mu.Unlock()
		}
	})
	c.write(leader, `{"title":"written under attack"}`)
	close(stop)
	wg.Wait()
	if rounds == 0 {
		t.Fatal("the attack never ran")
	}
	for _, f := range failures {
		t.Error(f)
	}
	t.Logf("%d attack rounds on validator %d", rounds, target.id)

	for _, n := range c.nodes {
		select {
		case <-n.exited:
			t.Fatalf("validator %d exited during the attack", n.id)
		default:
		}
	}
	c.write(target, `{"title":"after the attack"}`)
	c.converged(c.nodes...)
}

// peerHello is the transport's hello (services/validator/internal/transport,
// wire.go): what an attacker who read the code sends.
func peerHello(from, to uint64, cluster string) []byte {
	b := append([]byte("CLRT"), 1, 1) // version 1, a stream
	b = binary.BigEndian.AppendUint64(b, from)
	b = binary.BigEndian.AppendUint64(b, to)
	b = append(b, byte(len(cluster)))
	return append(b, cluster...)
}

// poisonHeartbeat is one stream frame holding a MsgHeartbeat whose commit is
// far past any log's end, in raftpb's encoding (Type 1, To 2, From 3,
// Term 4, Commit 8; MsgHeartbeat is 8).
func poisonHeartbeat(from, to uint64) []byte {
	var m []byte
	for _, f := range []struct {
		num protowire.Number
		v   uint64
	}{{1, 8}, {2, to}, {3, from}, {4, 1 << 20}, {8, 1 << 40}} {
		m = protowire.AppendTag(m, f.num, protowire.VarintType)
		m = protowire.AppendVarint(m, f.v)
	}
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(m))), m...)
}
