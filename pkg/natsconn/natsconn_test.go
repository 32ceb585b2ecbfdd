package natsconn_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/contentledger/contentledger/pkg/natsconn"
	"github.com/contentledger/contentledger/pkg/peercert"
)

// apply runs opts on fresh nats.Options, as nats.Connect would.
func apply(t *testing.T, opts []nats.Option) nats.Options {
	t.Helper()
	o := nats.GetDefaultOptions()
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			t.Fatalf("option: %v", err)
		}
	}
	return o
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  natsconn.Config
		want error
	}{
		{"none", natsconn.Config{}, nil},
		{"creds", natsconn.Config{CredsFile: "a.creds", TLSCA: "ca.pem"}, nil},
		{"user", natsconn.Config{User: "u", Password: "p", TLSCert: "c", TLSKey: "k"}, nil},
		{"two kinds", natsconn.Config{CredsFile: "a.creds", Token: "t"}, natsconn.ErrCredentials},
		{"user without password", natsconn.Config{User: "u"}, natsconn.ErrCredentials},
		{"password without user", natsconn.Config{Password: "p"}, natsconn.ErrCredentials},
		{"cert without key", natsconn.Config{TLSCert: "c"}, natsconn.ErrTLS},
		{"key without cert", natsconn.Config{TLSKey: "k"}, natsconn.ErrTLS},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("Validate = %v, want %v", err, tc.want)
			}
			if _, oerr := tc.cfg.Options(); (oerr == nil) != (err == nil) {
				t.Fatalf("Options error %v, Validate %v", oerr, err)
			}
		})
	}
}

// TestErrorsHoldNoSecret: a refused configuration is reported by setting
// names; the password and token never appear.
func TestErrorsHoldNoSecret(t *testing.T) {
	err := natsconn.Config{Password: "hunter2-password", Token: "s3cret-token"}.Validate()
	if err == nil || strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("error %v", err)
	}
}

func TestOptions(t *testing.T) {
	o := apply(t, must(natsconn.Config{User: "watcher", Password: "pw"}.Options()))
	if o.User != "watcher" || o.Password != "pw" || o.Token != "" || o.Secure {
		t.Fatalf("user options %+v", o)
	}
	o = apply(t, must(natsconn.Config{Token: "tok"}.Options()))
	if o.Token != "tok" || o.User != "" {
		t.Fatalf("token options: token %q user %q", o.Token, o.User)
	}
	o = apply(t, must(natsconn.Config{CredsFile: credsFile(t)}.Options()))
	if o.UserJWT == nil || o.SignatureCB == nil {
		t.Fatal("a creds file sets no JWT and signature callbacks")
	}
	certs, err := peercert.Provision(t.TempDir(), []uint64{1}, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	o = apply(t, must(natsconn.Config{TLSCA: certs[1].CA, TLSCert: certs[1].Cert, TLSKey: certs[1].Key}.Options()))
	if !o.Secure || o.TLSConfig == nil || o.TLSCertCB == nil || o.RootCAsCB == nil {
		t.Fatalf("TLS options: secure %v, config %v", o.Secure, o.TLSConfig != nil)
	}
	if o := apply(t, must(natsconn.Config{}.Options())); o.Secure || o.User != "" || o.Token != "" || o.Nkey != "" {
		t.Fatal("the zero config sets credentials or TLS")
	}
}

func TestNKeyFile(t *testing.T) {
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := kp.Seed()
	pub, _ := kp.PublicKey()
	file := filepath.Join(t.TempDir(), "user.nk")
	if err := os.WriteFile(file, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	if o := apply(t, must(natsconn.Config{NKeyFile: file}.Options())); o.Nkey != pub || o.SignatureCB == nil {
		t.Fatalf("nkey %q, want %q", o.Nkey, pub)
	}
	if _, err := (natsconn.Config{NKeyFile: filepath.Join(t.TempDir(), "missing")}).Options(); !errors.Is(err, natsconn.ErrCredentials) {
		t.Fatalf("a missing seed file: %v", err)
	}
	// The seed authenticates to a server that lists the public key.
	s := startServer(t, &server.Options{Nkeys: []*server.NkeyUser{{Nkey: pub}}})
	connect(t, s, natsconn.Config{NKeyFile: file}, true)
	connect(t, s, natsconn.Config{}, false)
}

// TestConnect: the options authenticate against a server that requires a
// user and password, and a wrong password is refused.
func TestConnect(t *testing.T) {
	s := startServer(t, &server.Options{Users: []*server.User{{Username: "validator", Password: "right"}}})
	connect(t, s, natsconn.Config{User: "validator", Password: "right"}, true)
	connect(t, s, natsconn.Config{User: "validator", Password: "wrong"}, false)
	connect(t, s, natsconn.Config{}, false)
	ts := startServer(t, &server.Options{Authorization: "the-token"})
	connect(t, ts, natsconn.Config{Token: "the-token"}, true)
	connect(t, ts, natsconn.Config{Token: "other"}, false)
}

// credsFile writes a creds file of a user signed by a fresh account.
func credsFile(t *testing.T) string {
	t.Helper()
	account, _ := nkeys.CreateAccount()
	user, _ := nkeys.CreateUser()
	userPub, _ := user.PublicKey()
	token, err := jwt.NewUserClaims(userPub).Encode(account)
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := user.Seed()
	creds, err := jwt.FormatUserConfig(token, seed)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "user.creds")
	if err := os.WriteFile(file, creds, 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

func startServer(t *testing.T, opts *server.Options) *server.Server {
	t.Helper()
	opts.Host, opts.Port, opts.NoLog, opts.NoSigs = "127.0.0.1", -1, true, true
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	t.Cleanup(s.Shutdown)
	return s
}

func connect(t *testing.T, s *server.Server, cfg natsconn.Config, ok bool) {
	t.Helper()
	opts := must(cfg.Options())
	nc, err := nats.Connect(s.ClientURL(), append(opts, nats.NoReconnect())...)
	if ok != (err == nil) {
		t.Fatalf("connect with %s: %v, want ok %v", cfg.Method(), err, ok)
	}
	if err == nil {
		nc.Close()
	}
}

func must(opts []nats.Option, err error) []nats.Option {
	if err != nil {
		panic(err)
	}
	return opts
}

// TestConnectTLS: with the CA and a client certificate, the client
// verifies the server and the server verifies the client; without the
// client certificate the server refuses.
func TestConnectTLS(t *testing.T) {
	certs, err := peercert.Provision(t.TempDir(), []uint64{1, 2}, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	serverCert, err := tls.LoadX509KeyPair(certs[1].Cert, certs[1].Key)
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(certs[1].CA)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	s := startServer(t, &server.Options{TLS: true, TLSVerify: true, TLSTimeout: 5, TLSConfig: &tls.Config{
		Certificates: []tls.Certificate{serverCert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}})
	connect(t, s, natsconn.Config{TLSCA: certs[2].CA, TLSCert: certs[2].Cert, TLSKey: certs[2].Key}, true)
	connect(t, s, natsconn.Config{TLSCA: certs[2].CA}, false)
}
