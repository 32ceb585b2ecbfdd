package system

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/contentledger/contentledger/pkg/api"
)

// writeCert writes a PEM certificate and key for 127.0.0.1 signed by ca (or
// self-signed as a CA when ca is nil) and returns the paths.
func writeCert(t *testing.T, dir, name string, ca *x509.Certificate, caKey *ecdsa.PrivateKey) (certPath, keyPath string, cert *x509.Certificate, key *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	parent, signer := tmpl, key
	if ca == nil {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
	} else {
		parent, signer = ca, caKey
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ = x509.ParseCertificate(der)
	keyDER, _ := x509.MarshalECPrivateKey(key)
	certPath, keyPath = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if err := os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certPath, keyPath, cert, key
}

// TestPeerTLS runs three validators whose raft traffic is mutual TLS.
func TestPeerTLS(t *testing.T) {
	dir := t.TempDir()
	caPath, _, ca, caKey := writeCert(t, dir, "ca", nil, nil)
	c := newClusterEnv(t, 3, "MOCK", func(n *node, _ []*node) []string {
		cert, key, _, _ := writeCert(t, dir, n.url()[7:], ca, caKey)
		return []string{"SVC_VALIDATOR_PEER_TLS_CERT=" + cert, "SVC_VALIDATOR_PEER_TLS_KEY=" + key, "SVC_VALIDATOR_PEER_TLS_CA=" + caPath}
	})
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
