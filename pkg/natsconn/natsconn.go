// Package natsconn builds the options of a NATS connection from the
// credentials and TLS files a service is configured with, so that every
// connection of the validator and the chain-watcher authenticates the same
// way (ADR 0029).
package natsconn

import (
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
)

// Config is how a client proves who it is to NATS and checks the server.
// At most one kind of credential is set: a creds file (a user JWT and its
// nkey seed, as nsc writes it), an nkey seed file, a user and password, or
// a token. The zero Config connects without credentials or TLS.
type Config struct {
	// CredsFile is a .creds file: user JWT and nkey seed (decentralized
	// auth with operator and accounts).
	CredsFile string
	// NKeyFile holds a user nkey seed (SU...), for servers that list
	// users by public nkey.
	NKeyFile string
	// User and Password: both or neither.
	User, Password string
	// Token is a server-wide or per-user authorization token.
	Token string
	// TLSCA is a PEM CA (or bundle) that signs the server's certificate;
	// setting it, or a client certificate, requires TLS.
	TLSCA string
	// TLSCert and TLSKey are the client's PEM certificate and key, for a
	// server that verifies clients (or maps them to users); both or
	// neither.
	TLSCert, TLSKey string
}

// Errors of Validate name the settings by their suffix (CREDS, USER,
// TLS_CERT...), never their values: a caller prefixes its own
// environment names.
var (
	// ErrCredentials: more than one kind of credential is set, or a user
	// without its password.
	ErrCredentials = errors.New("natsconn: credentials")
	// ErrTLS: a client certificate without its key, or a key without one.
	ErrTLS = errors.New("natsconn: TLS")
)

// Validate reports a configuration that cannot connect.
func (c Config) Validate() error {
	var kinds []string
	for _, k := range []struct {
		name string
		set  bool
	}{{"CREDS", c.CredsFile != ""}, {"NKEY", c.NKeyFile != ""}, {"USER", c.User != "" || c.Password != ""}, {"TOKEN", c.Token != ""}} {
		if k.set {
			kinds = append(kinds, k.name)
		}
	}
	var errs []error
	if len(kinds) > 1 {
		errs = append(errs, fmt.Errorf("%w: %v are set; give one kind of credential", ErrCredentials, kinds))
	}
	if (c.User == "") != (c.Password == "") {
		errs = append(errs, fmt.Errorf("%w: USER and PASSWORD go together", ErrCredentials))
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		errs = append(errs, fmt.Errorf("%w: TLS_CERT and TLS_KEY go together", ErrTLS))
	}
	return errors.Join(errs...)
}

// Method names the kind of credential (creds, nkey, user, token, none),
// for logs: it tells an operator what was configured without any secret.
func (c Config) Method() string {
	switch {
	case c.CredsFile != "":
		return "creds"
	case c.NKeyFile != "":
		return "nkey"
	case c.User != "":
		return "user"
	case c.Token != "":
		return "token"
	}
	return "none"
}

// TLS reports whether the connection requires TLS.
func (c Config) TLS() bool { return c.TLSCA != "" || c.TLSCert != "" }

// Options returns the nats.Options that carry the credentials and TLS
// settings, to append to a connection's own (name, reconnects, handlers).
// The nkey seed file is read here, and nats.Connect checks the creds and
// TLS files when it applies the options; the creds file and the client
// certificate are read again at every reconnect, so rotated files take
// effect then.
func (c Config) Options() ([]nats.Option, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	var opts []nats.Option
	switch {
	case c.CredsFile != "":
		opts = append(opts, nats.UserCredentials(c.CredsFile))
	case c.NKeyFile != "":
		opt, err := nats.NkeyOptionFromSeed(c.NKeyFile)
		if err != nil {
			// The nkeys library's error names no seed bytes, only the
			// file's trouble.
			return nil, fmt.Errorf("%w: NKEY file %s: %v", ErrCredentials, c.NKeyFile, err)
		}
		opts = append(opts, opt)
	case c.User != "":
		opts = append(opts, nats.UserInfo(c.User, c.Password))
	case c.Token != "":
		opts = append(opts, nats.Token(c.Token))
	}
	if c.TLSCA != "" {
		opts = append(opts, nats.RootCAs(c.TLSCA))
	}
	if c.TLSCert != "" {
		opts = append(opts, nats.ClientCert(c.TLSCert, c.TLSKey))
	}
	if c.TLS() {
		opts = append(opts, nats.Secure())
	}
	return opts, nil
}
