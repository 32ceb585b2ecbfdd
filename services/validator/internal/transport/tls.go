package transport

// Peer identity (ADR 0025). A peer is who its certificate says: a chain to
// the cluster's CA and the raft node id its URI SAN names (pkg/peercert).
// Host names are not checked: validators are reached at addresses that
// change (containers, DHCP, NAT), and a name says nothing about which raft
// member holds the key. The acceptor checks that the certificate names the
// hello's sender; the dialer checks that it names the peer it meant to
// reach.
//
// The certificate, key and CA come from Credentials at every handshake, so
// files replaced on disk take effect without a restart.

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/contentledger/contentledger/pkg/peercert"
)

// ErrPeerIdentity is returned when a peer's certificate does not name the
// node it claims to be (acceptor) or the node the dialer meant to reach (dialer).
var ErrPeerIdentity = errors.New("transport: peer certificate names another node")

// Credentials give the transport this node's certificate and the pool of
// CAs its peers are verified against. They are asked at every handshake,
// so an implementation that re-reads its files rotates certificates
// without a restart. *FileCredentials implements it.
type Credentials interface {
	// Certificate is this node's certificate, with its parsed Leaf.
	Certificate() (*tls.Certificate, error)
	// CAPool holds the CAs whose certificates are peers.
	CAPool() (*x509.CertPool, error)
}

// serverTLS is the configuration of accepted connections: a client
// certificate is required, chained to the CA and naming a node; which node
// is checked against the hello.
func serverTLS(creds Credentials) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		// The chain is verified in VerifyConnection against the CA pool of
		// the moment, rather than a ClientCAs fixed now.
		ClientAuth: tls.RequireAnyClientCert,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return creds.Certificate()
		},
		VerifyConnection: func(cs tls.ConnectionState) error {
			_, err := verifyPeer(creds, cs.PeerCertificates, x509.ExtKeyUsageClientAuth)
			return err
		},
	}
}

// clientTLS is the configuration of a connection dialed to node to.
func clientTLS(creds Credentials, to uint64) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		// Not skipped: replaced. VerifyConnection checks the chain against
		// the CA pool and the node id instead of a host name.
		InsecureSkipVerify: true,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return creds.Certificate()
		},
		VerifyConnection: func(cs tls.ConnectionState) error {
			id, err := verifyPeer(creds, cs.PeerCertificates, x509.ExtKeyUsageServerAuth)
			if err != nil {
				return err
			}
			if id != to {
				return fmt.Errorf("%w: the certificate names node %d, not %d", ErrPeerIdentity, id, to)
			}
			return nil
		},
	}
}

// verifyPeer verifies a peer's certificate chain against the current CA
// pool for usage and returns the node id it names.
func verifyPeer(creds Credentials, certs []*x509.Certificate, usage x509.ExtKeyUsage) (uint64, error) {
	if len(certs) == 0 {
		return 0, errors.New("no peer certificate")
	}
	pool, err := creds.CAPool()
	if err != nil {
		return 0, err
	}
	opts := x509.VerifyOptions{Roots: pool, Intermediates: x509.NewCertPool(), KeyUsages: []x509.ExtKeyUsage{usage}}
	for _, c := range certs[1:] {
		opts.Intermediates.AddCert(c)
	}
	if _, err := certs[0].Verify(opts); err != nil {
		return 0, err
	}
	return peercert.NodeID(certs[0])
}

// checkOwnCertificate reports a certificate of creds that does not name
// nodeID: peers would refuse this node.
func checkOwnCertificate(creds Credentials, nodeID uint64) error {
	cert, err := creds.Certificate()
	if err != nil {
		return err
	}
	leaf := cert.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return err
		}
	}
	id, err := peercert.NodeID(leaf)
	if err != nil {
		return fmt.Errorf("%w: this node's certificate: %v", ErrPeerIdentity, err)
	}
	if id != nodeID {
		return fmt.Errorf("%w: this node's certificate names node %d, but this is node %d", ErrPeerIdentity, id, nodeID)
	}
	return nil
}

// CredentialFiles name the PEM files of a node's credentials.
type CredentialFiles struct {
	Cert string // this node's certificate (naming its node id)
	Key  string // its private key
	CA   string // the CA (or CAs, concatenated) that signs every validator's certificate
}

// credentialsCheckInterval is how often, at most, FileCredentials look at
// their files: a stat of three files per second, whatever the handshake
// rate.
const credentialsCheckInterval = time.Second

// FileCredentials are Credentials read from files and re-read when they
// change: at a handshake, at most once per credentialsCheckInterval, the
// files' size and modification time are compared with the last read. New
// files that cannot be used (unreadable, a key that does not match, a
// certificate of another node or not signed by the CA: a rotation half
// done) are logged and the previous credentials kept; they are tried again
// when a file changes again.
type FileCredentials struct {
	files  CredentialFiles
	nodeID uint64
	log    *zap.Logger
	every  time.Duration // credentialsCheckInterval; tests check at every handshake

	mu      sync.Mutex
	checked time.Time
	stamps  [3]fileStamp // of the files last tried
	cert    *tls.Certificate
	pool    *x509.CertPool
}

type fileStamp struct {
	mod  time.Time
	size int64
	err  string
}

// LoadCredentials reads files for node nodeID and checks them: the key
// matches the certificate, the certificate chains to the CA and names
// nodeID. log (nil: none) receives the reloads.
func LoadCredentials(files CredentialFiles, nodeID uint64, log *zap.Logger) (*FileCredentials, error) {
	if files.Cert == "" || files.Key == "" || files.CA == "" {
		return nil, errors.New("the peer TLS certificate, key and CA must be given together")
	}
	if log == nil {
		log = zap.NewNop()
	}
	c := &FileCredentials{files: files, nodeID: nodeID, log: log, every: credentialsCheckInterval}
	c.stamps = c.stat()
	cert, pool, err := c.read()
	if err != nil {
		return nil, err
	}
	c.cert, c.pool, c.checked = cert, pool, time.Now()
	return c, nil
}

// Certificate implements Credentials.
func (c *FileCredentials) Certificate() (*tls.Certificate, error) {
	c.refresh()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cert, nil
}

// CAPool implements Credentials.
func (c *FileCredentials) CAPool() (*x509.CertPool, error) {
	c.refresh()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pool, nil
}

func (c *FileCredentials) refresh() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if time.Since(c.checked) < c.every {
		return
	}
	c.checked = time.Now()
	stamps := c.stat()
	if stamps == c.stamps {
		return
	}
	c.stamps = stamps
	cert, pool, err := c.read()
	if err != nil {
		c.log.Error("the peer TLS files changed but cannot be used; keeping the previous certificate and CA", zap.Error(err))
		return
	}
	c.cert, c.pool = cert, pool
	c.log.Info("peer TLS certificate and CA reloaded", zap.String("serial", cert.Leaf.SerialNumber.Text(16)),
		zap.Time("not_after", cert.Leaf.NotAfter))
}

func (c *FileCredentials) stat() [3]fileStamp {
	var out [3]fileStamp
	for i, name := range []string{c.files.Cert, c.files.Key, c.files.CA} {
		if st, err := os.Stat(name); err != nil {
			out[i].err = err.Error()
		} else {
			out[i] = fileStamp{mod: st.ModTime(), size: st.Size()}
		}
	}
	return out
}

// read loads and checks the files. Errors name files, never their content.
func (c *FileCredentials) read() (*tls.Certificate, *x509.CertPool, error) {
	cert, err := tls.LoadX509KeyPair(c.files.Cert, c.files.Key)
	if err != nil {
		return nil, nil, fmt.Errorf("peer TLS certificate %s and key %s: %w", c.files.Cert, c.files.Key, err)
	}
	caPEM, err := os.ReadFile(c.files.CA)
	if err != nil {
		return nil, nil, fmt.Errorf("peer TLS CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, nil, fmt.Errorf("peer TLS CA %s holds no PEM certificate", c.files.CA)
	}
	static := staticCredentials{cert: &cert, pool: pool}
	if err := checkOwnCertificate(static, c.nodeID); err != nil {
		return nil, nil, fmt.Errorf("peer TLS certificate %s: %w", c.files.Cert, err)
	}
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if _, err := verifyPeer(static, []*x509.Certificate{cert.Leaf}, usage); err != nil {
			return nil, nil, fmt.Errorf("peer TLS certificate %s against the CA %s: %w", c.files.Cert, c.files.CA, err)
		}
	}
	return &cert, pool, nil
}

// staticCredentials are fixed Credentials.
type staticCredentials struct {
	cert *tls.Certificate
	pool *x509.CertPool
}

func (s staticCredentials) Certificate() (*tls.Certificate, error) { return s.cert, nil }
func (s staticCredentials) CAPool() (*x509.CertPool, error)        { return s.pool, nil }
