package app

import (
	"fmt"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"

	"github.com/contentledger/contentledger/pkg/natsconn"
)

// NATS is the credentials and TLS settings of the validator's NATS
// connections.
func (c Config) NATS() natsconn.Config {
	return natsconn.Config{CredsFile: c.NATSCreds, NKeyFile: c.NATSNKey, User: c.NATSUser, Password: c.NATSPassword,
		Token: c.NATSToken, TLSCA: c.NATSTLSCA, TLSCert: c.NATSTLSCert, TLSKey: c.NATSTLSKey}
}

// connectNATS opens a NATS connection named name with the configured
// credentials and TLS, reconnecting for ever. Without credentials outside
// MOCK it warns: then the server's permissions cannot tell this validator
// from anyone else, nor keep others off the chain feed. A server older than
// natsconn.MinServerVersion is refused: at once when it is reached now,
// through guard when it is reached later.
func connectNATS(cfg Config, name string, guard *natsconn.VersionGuard, log *zap.Logger) (*nats.Conn, error) {
	auth := cfg.NATS()
	opts, err := auth.Options()
	if err != nil {
		return nil, fmt.Errorf("validator: SVC_VALIDATOR_NATS_*: %w", err)
	}
	if auth.Method() == "none" && cfg.VerifiesPayments() {
		log.Warn("NATS connection without credentials: anyone who may publish on chain.> can forge payments and epochs; set SVC_VALIDATOR_NATS_CREDS (or _NKEY, _USER, _TOKEN) and give the server permissions (deployments/README.md)")
	}
	opts = append(opts, nats.Name(name), nats.MaxReconnects(-1), nats.RetryOnFailedConnect(true),
		nats.ConnectHandler(guard.Handler), nats.ReconnectHandler(guard.Handler))
	nc, err := nats.Connect(cfg.NATSURL, opts...)
	if err != nil {
		return nil, fmt.Errorf("validator: NATS at %s: %w", cfg.NATSURL, err)
	}
	if err := guard.Check(nc); err != nil {
		return nil, fmt.Errorf("validator: NATS connection %s: %w", name, err)
	}
	log.Info("NATS connection", zap.String("name", name), zap.String("auth", auth.Method()), zap.Bool("tls", auth.TLS()))
	return nc, nil
}
