package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"path/filepath"
	"strings"
	"testing"

	"github.com/contentledger/contentledger/pkg/peercert"
)

func TestCerts(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	var out bytes.Buffer
	if err := certs([]string{"ca", "--out", dir}, &out); err != nil {
		t.Fatal(err)
	}
	if err := certs([]string{"ca", "--out", dir}, &out); err == nil {
		t.Fatal("a second CA overwrote the first")
	}
	nodes := filepath.Join(t.TempDir(), "node-7")
	out.Reset()
	if err := certs([]string{"node", "--ca", dir, "--id", "7", "--host", "v7.internal,10.0.0.7", "--out", nodes}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "SVC_VALIDATOR_PEER_TLS_CERT="+filepath.Join(nodes, "node-7.crt")) {
		t.Fatalf("output: %s", out.String())
	}
	pair, err := tls.LoadX509KeyPair(filepath.Join(nodes, "node-7.crt"), filepath.Join(nodes, "node-7.key"))
	if err != nil {
		t.Fatal(err)
	}
	if id, err := peercert.NodeID(pair.Leaf); err != nil || id != 7 {
		t.Fatalf("node id %d, %v", id, err)
	}
	ca, err := peercert.ReadCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pair.Leaf.Verify(x509.VerifyOptions{Roots: ca.Pool(), DNSName: "v7.internal", KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][]string{{"node", "--ca", dir}, {"node", "--id", "3"}, {"ca"}, {"other"}, {}} {
		if err := certs(bad, &out); err == nil {
			t.Errorf("certs %v accepted", bad)
		}
	}
}
