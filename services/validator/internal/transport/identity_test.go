package transport

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/contentledger/contentledger/pkg/peercert"
)

// startTLSNode starts a transport of node id with creds that knows the
// given peers (at addresses nothing listens on: only inbound matters).
func startTLSNode(t *testing.T, id uint64, creds Credentials, peers ...uint64) (*Transport, *recorder) {
	t.Helper()
	cfg := testConfig(t, id)
	cfg.Credentials = creds
	tr := newTransport(t, cfg)
	for _, p := range peers {
		must(t, tr.AddPeer(p, freeAddr(t)))
	}
	r := newRecorder()
	must(t, tr.Start(r))
	return tr, r
}

// TestImpersonationRefused: a dialer holding a valid certificate of the
// cluster's CA for node 3 claims to be node 1, a member. The acceptor
// refuses it before reading any message, tells it nothing, and counts it.
func TestImpersonationRefused(t *testing.T) {
	checkLeaks(t)
	pki := newPKI(t)
	b, rb := startTLSNode(t, 2, pki.creds(2), 1, 3)

	cert3 := pki.node(3)
	h := hello{version: protocolVersion, kind: kindStream, from: 1, to: 2, cluster: "test-cluster"}
	// The hello and a heartbeat in one write: nothing after the hello may
	// be read once the hello is refused.
	raw, err := tls.Dial("tcp", b.Addr(), pki.clientConfig(&cert3))
	must(t, err)
	defer raw.Close()
	frame, err := appendFrame(nil, heartbeat(1, 2), DefaultMaxFrameSize)
	must(t, err)
	_, err = raw.Write(append(appendHello(nil, h), frame...))
	must(t, err)
	_ = raw.SetReadDeadline(time.Now().Add(3 * time.Second))
	err = readReply(raw)
	if !errors.Is(err, ErrRejected) {
		t.Fatalf("reply to an impersonator = %v, want %v", err, ErrRejected)
	}
	assertNothingLearned(t, err.Error())

	// The same through rawHandshake, as a stream and a snapshot.
	for _, kind := range []byte{kindStream, kindSnapshot} {
		h.kind = kind
		reply, err := rawHandshake(b.Addr(), pki.clientConfig(&cert3), h)
		must(t, err)
		if reply[4] != statusRejected {
			t.Fatalf("status %d", reply[4])
		}
		assertNothingLearned(t, string(reply))
	}
	waitFor(t, 5*time.Second, "the refusals to be counted", func() bool {
		tot := b.Totals()
		return tot.IdentityRefused == 3 && tot.HandshakesRefused == 3
	})
	if rb.total() != 0 || b.Stats()[1].InboundConnected || b.Stats()[1].MsgsRecv != 0 {
		t.Fatalf("an impersonator reached raft: %d messages, %+v", rb.total(), b.Stats()[1])
	}

	// Node 3 speaking as itself is admitted: the refusal was the identity.
	h.kind = kindStream
	h.from = 3
	reply, err := rawHandshake(b.Addr(), pki.clientConfig(&cert3), h)
	must(t, err)
	if reply[4] != statusOK {
		t.Fatalf("node 3 as itself: status %d %q", reply[4], reply[6:])
	}
}

// TestNoCertificateRefused: a dialer without a certificate, or with one of
// another CA, fails the TLS handshake and hears nothing of the cluster.
func TestNoCertificateRefused(t *testing.T) {
	checkLeaks(t)
	pki, other := newPKI(t), newPKI(t)
	b, rb := startTLSNode(t, 2, pki.creds(2), 1)
	h := hello{version: protocolVersion, kind: kindStream, from: 1, to: 2, cluster: "test-cluster"}

	foreign := other.node(1)
	for name, cfg := range map[string]*tls.Config{
		"no certificate":  pki.clientConfig(nil),
		"another CA":      pki.clientConfig(&foreign),
		"plaintext hello": nil,
	} {
		reply, err := rawHandshake(b.Addr(), cfg, h)
		if err == nil || len(reply) != 0 {
			t.Fatalf("%s: reply %q, %v", name, reply, err)
		}
		assertNothingLearned(t, err.Error())
	}
	waitFor(t, 5*time.Second, "the refusals to be counted", func() bool { return b.Totals().HandshakesRefused == 3 })
	if rb.total() != 0 {
		t.Fatal("an unauthenticated dialer reached raft")
	}
}

// TestDialerChecksTheNodeItReached: node 1 believes node 2 lives at node
// 3's address (a stale address, or a spoofed one). The certificate there
// names 3, so node 1 refuses the connection and sends it nothing.
func TestDialerChecksTheNodeItReached(t *testing.T) {
	checkLeaks(t)
	pki := newPKI(t)
	c, rc := startTLSNode(t, 3, pki.creds(3), 1)
	cfg := testConfig(t, 1)
	cfg.Credentials = pki.creds(1)
	a := newTransport(t, cfg)
	ra := newRecorder()
	must(t, a.AddPeer(2, c.Addr()))
	must(t, a.Start(ra))

	_, err := a.dial(context.Background(), c.Addr(), kindStream, 2)
	if !errors.Is(err, ErrPeerIdentity) {
		t.Fatalf("dial = %v, want %v", err, ErrPeerIdentity)
	}
	a.Send([]*raftpb.Message{heartbeat(1, 2)})
	waitFor(t, 5*time.Second, "the peer to be reported unreachable", func() bool {
		return ra.unreachableCount(2) > 0 && a.Stats()[2].LastError != ""
	})
	if st := a.Stats()[2]; st.Connected || st.MsgsSent != 0 {
		t.Fatalf("node 1 connected to the wrong node: %+v", st)
	}
	if rc.total() != 0 {
		t.Fatal("the wrong node received a message")
	}
}

// TestOwnCertificateMustNameThisNode: a transport refuses to start with a
// certificate of another node: every peer would refuse it.
func TestOwnCertificateMustNameThisNode(t *testing.T) {
	pki := newPKI(t)
	cfg := testConfig(t, 1)
	cfg.Credentials = pki.creds(2)
	if _, err := New(cfg); !errors.Is(err, ErrPeerIdentity) {
		t.Fatalf("New with node 2's certificate as node 1 = %v", err)
	}
}

// pkiFiles writes the credential files of a node.
type pkiFiles struct {
	t     *testing.T
	files CredentialFiles
}

func newPKIFiles(t *testing.T) *pkiFiles {
	dir := t.TempDir()
	return &pkiFiles{t: t, files: CredentialFiles{
		Cert: filepath.Join(dir, "node.crt"), Key: filepath.Join(dir, "node.key"), CA: filepath.Join(dir, "ca.crt"),
	}}
}

// write replaces the files: node id's certificate from issuer, and the CAs
// trusted.
func (f *pkiFiles) write(issuer *peercert.CA, id uint64, trusted ...*peercert.CA) {
	f.t.Helper()
	n, err := issuer.IssueNode(id, nil, time.Hour)
	must(f.t, err)
	var bundle []byte
	for _, ca := range trusted {
		bundle = append(bundle, ca.CertPEM()...)
	}
	for path, data := range map[string][]byte{f.files.Cert: n.CertPEM, f.files.Key: n.KeyPEM, f.files.CA: bundle} {
		must(f.t, os.WriteFile(path+".tmp", data, 0o600))
		must(f.t, os.Rename(path+".tmp", path))
	}
}

// TestCredentialRotation: certificate, key and CA files replaced on disk
// take effect on new connections without a restart; unusable new files
// leave the last good ones in use.
func TestCredentialRotation(t *testing.T) {
	checkLeaks(t)
	oldCA, newCA := newPKI(t), newPKI(t)
	files := newPKIFiles(t)
	files.write(oldCA.ca, 2, oldCA.ca)
	creds, err := LoadCredentials(files.files, 2, testLogger(t))
	must(t, err)
	creds.every = 0 // look at the files at every handshake: no waiting for a check
	b, _ := startTLSNode(t, 2, creds, 1)
	h := hello{version: protocolVersion, kind: kindStream, from: 1, to: 2, cluster: "test-cluster"}

	// servedBy returns the issuer of the certificate b presents, and
	// whether it admitted cert.
	servedBy := func(cert tls.Certificate) (string, bool) {
		t.Helper()
		cfg := oldCA.clientConfig(&cert)
		var issuer string
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			issuer = cs.PeerCertificates[0].Issuer.CommonName
			return nil
		}
		reply, err := rawHandshake(b.Addr(), cfg, h)
		return issuer, err == nil && reply[4] == statusOK
	}
	oldCert, newCert := oldCA.node(1), newCA.node(1)
	if _, ok := servedBy(oldCert); !ok {
		t.Fatal("a certificate of the CA in use refused")
	}
	if _, ok := servedBy(newCert); ok {
		t.Fatal("a certificate of a CA not yet trusted admitted")
	}

	// Rotate: trust both CAs, present a certificate of the new one.
	files.write(newCA.ca, 2, oldCA.ca, newCA.ca)
	if _, ok := servedBy(newCert); !ok {
		t.Fatal("the new CA is not trusted after the rotation")
	}
	if _, ok := servedBy(oldCert); !ok {
		t.Fatal("the old CA is no longer trusted, though still in the bundle")
	}
	// b's own certificate is the new one (both CAs have the same name:
	// tell them apart by key).
	cfg := oldCA.clientConfig(&newCert)
	var presented []byte
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		presented = cs.PeerCertificates[0].RawIssuer
		return nil
	}
	_, err = rawHandshake(b.Addr(), cfg, h)
	must(t, err)
	if !bytes.Equal(presented, newCA.ca.Cert.RawSubject) {
		t.Fatal("b still presents the certificate of the old CA")
	}

	// Unusable rotations keep the last good credentials: garbage, and a
	// certificate of another node.
	must(t, os.WriteFile(files.files.Cert, []byte("not a certificate"), 0o600))
	if _, ok := servedBy(newCert); !ok {
		t.Fatal("a garbage certificate file replaced the working one")
	}
	files.write(newCA.ca, 7, newCA.ca)
	if _, ok := servedBy(newCert); !ok {
		t.Fatal("a certificate of node 7 replaced node 2's")
	}
	if _, ok := servedBy(oldCert); !ok {
		t.Fatal("the CA bundle of a refused rotation was taken")
	}
}

// assertNothingLearned fails when a refusal seen by a dialer names the
// cluster, its members or the failed check.
func assertNothingLearned(t *testing.T, seen string) {
	t.Helper()
	for _, secret := range []string{"test-cluster", "cluster", "node 2", "certificate names", "not a known peer"} {
		if bytes.Contains([]byte(seen), []byte(secret)) {
			t.Fatalf("a refused dialer learned %q: %s", secret, seen)
		}
	}
}
