package app

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// peerTLS builds the mutual-TLS configuration of the raft peer transport
// from PEER_TLS_CERT, PEER_TLS_KEY and PEER_TLS_CA, or nil when none is set.
// Every validator presents its certificate and requires one signed by the
// cluster's CA from its peers, in both directions.
func peerTLS(cfg Config) (*tls.Config, error) {
	if cfg.PeerTLSCert == "" && cfg.PeerTLSKey == "" && cfg.PeerTLSCA == "" {
		return nil, nil
	}
	if cfg.PeerTLSCert == "" || cfg.PeerTLSKey == "" || cfg.PeerTLSCA == "" {
		return nil, errors.New("SVC_VALIDATOR_PEER_TLS_CERT, _KEY and _CA must be set together")
	}
	cert, err := tls.LoadX509KeyPair(cfg.PeerTLSCert, cfg.PeerTLSKey)
	if err != nil {
		return nil, fmt.Errorf("peer TLS certificate: %w", err)
	}
	caPEM, err := os.ReadFile(cfg.PeerTLSCA)
	if err != nil {
		return nil, fmt.Errorf("peer TLS CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("peer TLS CA %s holds no PEM certificate", cfg.PeerTLSCA)
	}
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		RootCAs:      pool,
		ClientCAs:    pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   tls.VersionTLS13,
	}, nil
}
