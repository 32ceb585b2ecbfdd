package peercert

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"testing"
)

func TestIssueAndReadBack(t *testing.T) {
	ca, err := NewCA("test CA", 0)
	if err != nil {
		t.Fatal(err)
	}
	n, err := ca.IssueNode(42, []string{"validator-42.internal", "10.0.0.7", ""}, 0)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(n.CertPEM, n.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ParseCertificate(n.CertPEM)
	if err != nil {
		t.Fatal(err)
	}
	if id, err := NodeID(cert); err != nil || id != 42 {
		t.Fatalf("NodeID = %d, %v; want 42", id, err)
	}
	if len(pair.Certificate) != 1 || cert.DNSNames[0] != "validator-42.internal" || !cert.IPAddresses[0].Equal([]byte{10, 0, 0, 7}) {
		t.Fatalf("SANs: %v %v", cert.DNSNames, cert.IPAddresses)
	}
	// Usable in both directions, chained to the CA, with no host name.
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if _, err := cert.Verify(x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
			t.Fatalf("verify for %v: %v", usage, err)
		}
	}
	// Another CA's pool does not verify it.
	other, err := NewCA("other", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: other.Pool()}); err == nil {
		t.Fatal("a certificate verified against a foreign CA")
	}
	if _, err := ca.IssueNode(0, nil, 0); err == nil {
		t.Fatal("node 0 issued")
	}
}

func TestNodeID(t *testing.T) {
	uri := func(s string) *url.URL {
		u, err := url.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	for _, tc := range []struct {
		name string
		uris []string
		id   uint64
		err  bool
	}{
		{"one", []string{"urn:contentledger:node:7"}, 7, false},
		{"with others", []string{"spiffe://x/y", "urn:contentledger:node:7", "urn:contentledger:node:7"}, 7, false},
		{"largest", []string{"urn:contentledger:node:18446744073709551615"}, 1<<64 - 1, false},
		{"none", nil, 0, true},
		{"only others", []string{"https://example.com"}, 0, true},
		{"two ids", []string{"urn:contentledger:node:7", "urn:contentledger:node:8"}, 0, true},
		{"zero", []string{"urn:contentledger:node:0"}, 0, true},
		{"leading zero", []string{"urn:contentledger:node:07"}, 0, true},
		{"sign", []string{"urn:contentledger:node:+7"}, 0, true},
		{"overflow", []string{"urn:contentledger:node:18446744073709551616"}, 0, true},
		{"empty", []string{"urn:contentledger:node:"}, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &x509.Certificate{}
			for _, s := range tc.uris {
				c.URIs = append(c.URIs, uri(s))
			}
			id, err := NodeID(c)
			if (err != nil) != tc.err || id != tc.id {
				t.Fatalf("NodeID = %d, %v", id, err)
			}
		})
	}
	if _, err := NodeID(&x509.Certificate{}); !errors.Is(err, ErrNoNodeID) {
		t.Fatalf("no URI: %v", err)
	}
}

func TestFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	ca, err := NewCA("test CA", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteCA(dir, ca); err != nil {
		t.Fatal(err)
	}
	if err := WriteCA(dir, ca); err == nil {
		t.Fatal("WriteCA overwrote a CA")
	}
	if st, err := os.Stat(filepath.Join(dir, CAKeyFile)); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("CA key file: %v %v", st.Mode(), err)
	}
	read, err := ReadCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !read.Cert.Equal(ca.Cert) {
		t.Fatal("CA read back differs")
	}
	n, err := read.IssueNode(3, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	certPath, keyPath, err := WriteNode(dir, 3, n)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tls.LoadX509KeyPair(certPath, keyPath); err != nil {
		t.Fatal(err)
	}
	if _, _, err := WriteNode(dir, 3, n); err != nil { // a rotation replaces the files
		t.Fatal(err)
	}
	// A key of another CA is refused.
	other, _ := NewCA("other", 0)
	otherKey, _ := other.KeyPEM()
	if _, err := ParseCA(ca.CertPEM(), otherKey); err == nil {
		t.Fatal("a CA with a foreign key was read")
	}
}

// FuzzNodeURI: the node URI of a peer's certificate is outside input.
func FuzzNodeURI(f *testing.F) {
	for _, s := range []string{"urn:contentledger:node:1", "urn:contentledger:node:07", "urn:contentledger:node:", "spiffe://a/b", "urn:contentledger:node:18446744073709551616"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, ok, err := parseNodeURI(s)
		if !ok && (id != 0 || err != nil) {
			t.Fatalf("%q: not a node URI but id %d, %v", s, id, err)
		}
		if ok && err == nil && NodeURI(id) != s {
			t.Fatalf("%q read as %d, which is spelled %q", s, id, NodeURI(id))
		}
	})
}

func TestProvision(t *testing.T) {
	dir := t.TempDir()
	if _, err := Provision(dir, []uint64{1, 2}, "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	caBefore, err := os.ReadFile(filepath.Join(dir, CACertFile))
	if err != nil {
		t.Fatal(err)
	}
	// Again on the same directory: the CA is kept.
	files, err := Provision(dir, []uint64{1, 2, 3})
	if err != nil {
		t.Fatal(err)
	}
	caAfter, _ := os.ReadFile(files[3].CA)
	if string(caBefore) != string(caAfter) {
		t.Fatal("Provision replaced the CA")
	}
	ca, err := ReadCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	for id, f := range files {
		pair, err := tls.LoadX509KeyPair(f.Cert, f.Key)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := NodeID(pair.Leaf); err != nil || got != id {
			t.Fatalf("node %d's certificate names %d, %v", id, got, err)
		}
		if _, err := pair.Leaf.Verify(x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
			t.Fatal(err)
		}
	}
}
