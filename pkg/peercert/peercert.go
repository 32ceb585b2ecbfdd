// Package peercert makes and reads the certificates validators present to
// each other on the raft peer port (ADR 0025).
//
// A deployment has one CA (ECDSA P-256). Each validator gets a certificate
// signed by it that names its raft node id as a URI SAN,
// urn:contentledger:node:<id> (decimal, no leading zeros), usable as both a
// server and a client certificate. A peer's identity is the CA chain plus
// that node id: host names and addresses may be added as SANs for other
// tools, but the transport does not check them.
package peercert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Defaults of NewCA and IssueNode.
const (
	// DefaultCAValidity is how long a CA made by NewCA is valid.
	DefaultCAValidity = 10 * 365 * 24 * time.Hour
	// DefaultNodeValidity is how long a node certificate is valid: rotate
	// it (the validator re-reads the files) well before then.
	DefaultNodeValidity = 365 * 24 * time.Hour
)

// File names WriteCA, ReadCA and WriteNode use in a directory.
const (
	CACertFile = "ca.crt"
	CAKeyFile  = "ca.key"
)

// nodeURIPrefix precedes the decimal node id in a node certificate's URI SAN.
const nodeURIPrefix = "urn:contentledger:node:"

// clockSkew backdates NotBefore, so a certificate made now is valid on a
// peer whose clock is a little behind.
const clockSkew = 5 * time.Minute

// Errors of NodeID.
var (
	// ErrNoNodeID: the certificate names no node.
	ErrNoNodeID = errors.New("peercert: the certificate names no node id")
	// ErrAmbiguousNodeID: the certificate names more than one node.
	ErrAmbiguousNodeID = errors.New("peercert: the certificate names several node ids")
)

// NodeURI is the URI SAN that names node id.
func NodeURI(id uint64) string { return nodeURIPrefix + strconv.FormatUint(id, 10) }

// NodeID returns the raft node id c names: its one urn:contentledger:node
// URI SAN. Other URIs are ignored; none, a malformed one or two different
// ids are errors. It does not verify c: the caller checks the chain first.
func NodeID(c *x509.Certificate) (uint64, error) {
	var id uint64
	for _, u := range c.URIs {
		n, ok, err := parseNodeURI(u.String())
		if err != nil {
			return 0, err
		}
		if !ok {
			continue
		}
		if id != 0 && n != id {
			return 0, fmt.Errorf("%w: %d and %d", ErrAmbiguousNodeID, id, n)
		}
		id = n
	}
	if id == 0 {
		return 0, ErrNoNodeID
	}
	return id, nil
}

// parseNodeURI reads the node id of a node URI; ok is false for a URI of
// another kind. An id must be canonical decimal and not 0, so one id has
// one spelling.
func parseNodeURI(s string) (id uint64, ok bool, err error) {
	rest, found := strings.CutPrefix(s, nodeURIPrefix)
	if !found {
		return 0, false, nil
	}
	id, err = strconv.ParseUint(rest, 10, 64)
	if err != nil || id == 0 || strconv.FormatUint(id, 10) != rest {
		return 0, true, fmt.Errorf("peercert: malformed node URI %q", s)
	}
	return id, true, nil
}

// CA is a certificate authority that signs node certificates.
type CA struct {
	Cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// NewCA makes a self-signed CA named commonName, valid for validFor
// (DefaultCAValidity when 0). It may sign node certificates only.
func NewCA(commonName string, validFor time.Duration) (*CA, error) {
	if validFor <= 0 {
		validFor = DefaultCAValidity
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(validFor),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true, // no intermediate CAs
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, key: key}, nil
}

// ParseCA reads a CA from its PEM certificate and key.
func ParseCA(certPEM, keyPEM []byte) (*CA, error) {
	cert, err := ParseCertificate(certPEM)
	if err != nil {
		return nil, err
	}
	if !cert.IsCA {
		return nil, errors.New("peercert: the CA certificate is not a CA")
	}
	key, err := parseKey(keyPEM)
	if err != nil {
		return nil, err
	}
	pub, ok := cert.PublicKey.(*ecdsa.PublicKey)
	if !ok || !pub.Equal(&key.PublicKey) {
		return nil, errors.New("peercert: the CA key does not match its certificate")
	}
	return &CA{Cert: cert, key: key}, nil
}

// CertPEM is the CA's certificate in PEM: what every validator trusts.
func (ca *CA) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Cert.Raw})
}

// KeyPEM is the CA's private key in PEM. Keep it off the validators.
func (ca *CA) KeyPEM() ([]byte, error) { return keyPEM(ca.key) }

// Pool is a certificate pool holding the CA.
func (ca *CA) Pool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	return pool
}

// Node is a node certificate and its private key, in PEM.
type Node struct {
	CertPEM []byte
	KeyPEM  []byte
}

// IssueNode makes a certificate for raft node id, signed by ca and valid
// for validFor (DefaultNodeValidity when 0), usable as a server and a
// client certificate. hosts, optional, become DNS or IP SANs.
func (ca *CA) IssueNode(id uint64, hosts []string, validFor time.Duration) (Node, error) {
	if id == 0 {
		return Node{}, errors.New("peercert: node id must not be 0")
	}
	if validFor <= 0 {
		validFor = DefaultNodeValidity
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Node{}, err
	}
	serial, err := newSerial()
	if err != nil {
		return Node{}, err
	}
	uri, err := url.Parse(NodeURI(id))
	if err != nil {
		return Node{}, err
	}
	now := time.Now()
	notAfter := now.Add(validFor)
	if notAfter.After(ca.Cert.NotAfter) {
		notAfter = ca.Cert.NotAfter // not beyond what verifies
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "contentledger node " + strconv.FormatUint(id, 10)},
		NotBefore:    now.Add(-clockSkew),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		URIs:         []*url.URL{uri},
	}
	for _, h := range hosts {
		h = strings.TrimSpace(h)
		switch ip := net.ParseIP(h); {
		case h == "":
		case ip != nil:
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		default:
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		return Node{}, err
	}
	kp, err := keyPEM(key)
	if err != nil {
		return Node{}, err
	}
	return Node{CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), KeyPEM: kp}, nil
}

// ParseCertificate reads the first certificate of PEM data.
func ParseCertificate(data []byte) (*x509.Certificate, error) {
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return nil, errors.New("peercert: no PEM certificate")
		}
		if b.Type == "CERTIFICATE" {
			return x509.ParseCertificate(b.Bytes)
		}
	}
}

func parseKey(data []byte) (*ecdsa.PrivateKey, error) {
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return nil, errors.New("peercert: no PEM private key")
		}
		switch b.Type {
		case "EC PRIVATE KEY":
			return x509.ParseECPrivateKey(b.Bytes)
		case "PRIVATE KEY":
			k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
			if err != nil {
				return nil, err
			}
			ek, ok := k.(*ecdsa.PrivateKey)
			if !ok {
				return nil, fmt.Errorf("peercert: a %T key, not ECDSA", k)
			}
			return ek, nil
		}
	}
}

func keyPEM(k *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

func newSerial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
}

// NodeCertFile is the name WriteNode gives node id's certificate.
func NodeCertFile(id uint64) string { return "node-" + strconv.FormatUint(id, 10) + ".crt" }

// NodeKeyFile is the name WriteNode gives node id's key.
func NodeKeyFile(id uint64) string { return "node-" + strconv.FormatUint(id, 10) + ".key" }

// WriteCA writes ca to dir (created if missing) as CACertFile and CAKeyFile;
// the key is readable by its owner only. It refuses to overwrite a CA.
func WriteCA(dir string, ca *CA) error {
	kp, err := ca.KeyPEM()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := writeNew(filepath.Join(dir, CAKeyFile), kp, 0o600); err != nil {
		return err
	}
	return writeNew(filepath.Join(dir, CACertFile), ca.CertPEM(), 0o644)
}

// ReadCA reads the CA WriteCA wrote to dir.
func ReadCA(dir string) (*CA, error) {
	certPEM, err := os.ReadFile(filepath.Join(dir, CACertFile))
	if err != nil {
		return nil, err
	}
	kp, err := os.ReadFile(filepath.Join(dir, CAKeyFile))
	if err != nil {
		return nil, err
	}
	return ParseCA(certPEM, kp)
}

// WriteNode writes node id's certificate and key to dir (created if
// missing) as NodeCertFile and NodeKeyFile, replacing older ones (that is a
// rotation: a running validator picks them up), and returns their paths.
// The key is readable by its owner only. Each file is written to a
// temporary name and renamed, so a validator never reads half of one.
func WriteNode(dir string, id uint64, n Node) (certPath, keyPath string, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", err
	}
	certPath, keyPath = filepath.Join(dir, NodeCertFile(id)), filepath.Join(dir, NodeKeyFile(id))
	if err := writeAtomic(keyPath, n.KeyPEM, 0o600); err != nil {
		return "", "", err
	}
	if err := writeAtomic(certPath, n.CertPEM, 0o644); err != nil {
		return "", "", err
	}
	return certPath, keyPath, nil
}

func writeNew(path string, data []byte, perm os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

func writeAtomic(path string, data []byte, perm os.FileMode) error {
	tmp := path + ".tmp"
	_ = os.Remove(tmp)
	if err := writeNew(tmp, data, perm); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// NodeFiles are the paths of one node's credentials: what a validator's
// SVC_VALIDATOR_PEER_TLS_CERT, _KEY and _CA name.
type NodeFiles struct {
	Cert, Key, CA string
}

// Env is the validator settings that name f.
func (f NodeFiles) Env() []string {
	return []string{"SVC_VALIDATOR_PEER_TLS_CERT=" + f.Cert, "SVC_VALIDATOR_PEER_TLS_KEY=" + f.Key, "SVC_VALIDATOR_PEER_TLS_CA=" + f.CA}
}

// Provision makes a throwaway PKI for a local or test cluster in dir: a CA
// (kept if dir already has one, so the certificates of a data directory
// that is started again stay valid) and a certificate for each of ids,
// naming hosts too. It returns each node's files.
func Provision(dir string, ids []uint64, hosts ...string) (map[uint64]NodeFiles, error) {
	ca, err := ReadCA(dir)
	if errors.Is(err, os.ErrNotExist) {
		if ca, err = NewCA("contentledger throwaway CA", 0); err == nil {
			err = WriteCA(dir, ca)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("peercert: the CA in %s: %w", dir, err)
	}
	out := make(map[uint64]NodeFiles, len(ids))
	for _, id := range ids {
		n, err := ca.IssueNode(id, hosts, 0)
		if err != nil {
			return nil, err
		}
		cert, key, err := WriteNode(dir, id, n)
		if err != nil {
			return nil, err
		}
		out[id] = NodeFiles{Cert: cert, Key: key, CA: filepath.Join(dir, CACertFile)}
	}
	return out, nil
}
