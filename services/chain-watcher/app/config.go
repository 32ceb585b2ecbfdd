package app

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/kelseyhightower/envconfig"

	"github.com/contentledger/contentledger/pkg/httpserver"
	"github.com/contentledger/contentledger/pkg/logging"
	"github.com/contentledger/contentledger/pkg/natsconn"

	"github.com/contentledger/contentledger/services/chain-watcher/internal/epochs"
	"github.com/contentledger/contentledger/services/chain-watcher/internal/relay"
)

// EnvPrefix is the prefix of the watcher's environment variables
// (ADR 0008: one prefix per service), e.g. WATCHER_RPC_URL.
const EnvPrefix = "WATCHER"

// Mode is the kind of chain the watcher reads, named like the validators'
// deployment modes. It picks the defaults of the settings where networks
// differ (Preset); a variable set in the environment always wins.
type Mode string

const (
	// ModeMock is a local dev chain: fast blocks, nothing at stake. It is
	// the default, and its values are the ones the watcher had before
	// modes existed.
	ModeMock Mode = "MOCK"
	// ModeTestnet is a public test network (12 s slots), where payments
	// are validated but worth nothing.
	ModeTestnet Mode = "TESTNET"
	// ModeMainnet is Ethereum mainnet, in production.
	ModeMainnet Mode = "MAINNET"
)

// Preset is what a mode supplies: the defaults of the settings that depend
// on the chain's block time and reorg risk. Everything else (endpoints,
// timeouts, NATS replicas, ranges, FINALIZED) depends on the provider or
// the deployment rather than the network, and has one default.
type Preset struct {
	Confirmations uint64
	PollInterval  time.Duration
	ReorgDepth    uint64
}

// PresetOf returns the preset of mode; "" is ModeMock. ok is false for an
// unknown mode. Why each value: DESIGN.md ("Modes and presets").
func PresetOf(mode Mode) (p Preset, ok bool) {
	switch mode {
	case ModeMock, "":
		return Preset{Confirmations: 2, PollInterval: time.Second, ReorgDepth: 128}, true
	case ModeTestnet:
		return Preset{Confirmations: 3, PollInterval: 12 * time.Second, ReorgDepth: 256}, true
	case ModeMainnet:
		return Preset{Confirmations: 12, PollInterval: 12 * time.Second, ReorgDepth: 256}, true
	}
	return Preset{}, false
}

// applyPreset fills the settings a preset covers that set does not report
// as set in the environment (by variable name, without the prefix).
func (c *Config) applyPreset(p Preset, set func(name string) bool) {
	if !set("CONFIRMATIONS") {
		c.Confirmations = p.Confirmations
	}
	if !set("POLL_INTERVAL") {
		c.PollInterval = p.PollInterval
	}
	if !set("REORG_DEPTH") {
		c.ReorgDepth = p.ReorgDepth
	}
}

// Config is the watcher's configuration, read from the environment by
// LoadConfig. Every field has a default except ContractAddress; the
// defaults of Confirmations, PollInterval and ReorgDepth come
// from the Mode's Preset, which only LoadConfig applies: a Config built in
// code carries its own values.
type Config struct {
	Mode            Mode   `envconfig:"MODE" desc:"MOCK (local dev chain; empty means MOCK), TESTNET or MAINNET: picks the defaults of CONFIRMATIONS, POLL_INTERVAL and REORG_DEPTH"`
	RPCURL          string `envconfig:"RPC_URL" default:"http://127.0.0.1:8545" desc:"Ethereum JSON-RPC endpoints (HTTP or WebSocket), comma separated, preferred first: calls go to the healthiest and fail over to the others"`
	ContractAddress string `envconfig:"CONTRACT_ADDRESS" required:"true" desc:"address of the PaymentLedger contract whose ProposalPaid and DebtPaid logs are published"`
	NATSURL         string `envconfig:"NATS_URL" default:"nats://127.0.0.1:4222" desc:"NATS server URL(s), comma separated"`
	// Credentials and TLS of the NATS connection (pkg/natsconn, ADR 0029):
	// one kind of credential at most. The watcher is the one client the
	// server lets publish on chain.> .
	NATSCreds       string        `envconfig:"NATS_CREDS" default:"" desc:"NATS .creds file (user JWT and nkey seed); unset: none"`
	NATSNKey        string        `envconfig:"NATS_NKEY" default:"" desc:"file holding the NATS user's nkey seed (SU...); unset: none"`
	NATSUser        string        `envconfig:"NATS_USER" default:"" desc:"NATS user name, with NATS_PASSWORD; unset: none"`
	NATSPassword    string        `envconfig:"NATS_PASSWORD" default:"" desc:"password of NATS_USER"`
	NATSToken       string        `envconfig:"NATS_TOKEN" default:"" desc:"NATS authorization token; unset: none"`
	NATSTLSCA       string        `envconfig:"NATS_TLS_CA" default:"" desc:"PEM CA that signs the NATS server's certificate; set (or NATS_TLS_CERT set), the connection requires TLS"`
	NATSTLSCert     string        `envconfig:"NATS_TLS_CERT" default:"" desc:"PEM client certificate presented to NATS, with NATS_TLS_KEY; re-read at every reconnect"`
	NATSTLSKey      string        `envconfig:"NATS_TLS_KEY" default:"" desc:"PEM private key of NATS_TLS_CERT"`
	Confirmations   uint64        `envconfig:"CONFIRMATIONS" desc:"a block is read once head - block >= this many blocks; default by MODE: MOCK 2, TESTNET 3, MAINNET 12"`
	Finalized       bool          `envconfig:"FINALIZED" default:"false" desc:"also read every block at or below the chain's finalized block whatever its confirmations (falls back to CONFIRMATIONS where the endpoint has no finalized tag); it only matters with CONFIRMATIONS above the finality lag (64 to 96 blocks on Ethereum)"`
	ReorgDepth      uint64        `envconfig:"REORG_DEPTH" desc:"deepest reorg handled, in blocks below the last handled block: recent block hashes and what was published from them are kept this deep (0: 128); default by MODE: MOCK 128, TESTNET and MAINNET 256"`
	PollInterval    time.Duration `envconfig:"POLL_INTERVAL" desc:"how often the chain head is polled when caught up; default by MODE: MOCK 1s, TESTNET and MAINNET 12s (one slot)"`
	StartBlock      uint64        `envconfig:"START_BLOCK" default:"0" desc:"first block read when no checkpoint exists (the contract's deployment block)"`
	MaxBlockRange   uint64        `envconfig:"MAX_BLOCK_RANGE" default:"2000" desc:"most blocks per eth_getLogs call: ranges start there, halve when the provider refuses one as too large, and grow back"`
	RangeGrowAfter  int           `envconfig:"RANGE_GROW_AFTER" default:"4" desc:"full eth_getLogs ranges that must pass in a row before a shrunk range doubles again (up to MAX_BLOCK_RANGE)"`
	RPCTimeout      time.Duration `envconfig:"RPC_TIMEOUT" default:"30s" desc:"deadline of one JSON-RPC call on one endpoint; an eth_getLogs call that exceeds it is asked again with a smaller range"`
	RPCAttempts     int           `envconfig:"RPC_ATTEMPTS" default:"3" desc:"rounds over all endpoints one JSON-RPC call makes before the watch step fails (and is retried after POLL_INTERVAL, doubling)"`
	RPCBackoff      time.Duration `envconfig:"RPC_BACKOFF" default:"250ms" desc:"first wait between two rounds over the endpoints, doubling, with jitter"`
	RPCBackoffMax   time.Duration `envconfig:"RPC_BACKOFF_MAX" default:"5s" desc:"longest wait between two rounds over the endpoints"`
	RPCCooldown     time.Duration `envconfig:"RPC_COOLDOWN" default:"5s" desc:"how long an endpoint that failed is passed over, doubling with each consecutive failure"`
	RPCCooldownMax  time.Duration `envconfig:"RPC_COOLDOWN_MAX" default:"2m" desc:"longest time an endpoint that keeps failing is passed over before it is tried again"`
	Stream          string        `envconfig:"STREAM" default:"CHAIN_EVENTS" desc:"JetStream stream of chain events (subjects chain.>)"`
	DuplicateWindow time.Duration `envconfig:"DUPLICATE_WINDOW" default:"24h" desc:"how long JetStream deduplicates a payment's message id"`
	Bucket          string        `envconfig:"BUCKET" default:"CHAIN_WATCHER" desc:"JetStream key-value bucket of the checkpoint (key cursor-<chainId>)"`
	Replicas        int           `envconfig:"REPLICAS" default:"1" desc:"replicas of the stream and the bucket in a NATS cluster"`
	EpochLength     time.Duration `envconfig:"EPOCH_LENGTH" default:"384s" desc:"epoch length, whole seconds: epoch = unix time / this (ADR 0022), from block timestamps or beacon slot times; keep it equal to the validators' EPOCH_LENGTH (0: 384s)"`
	EpochInterval   time.Duration `envconfig:"EPOCH_INTERVAL" default:"12s" desc:"how often the epoch source is read; an update is published on chain.<chainId>.epochs when the current or finalized epoch changed (0: 12s)"`
	BeaconURL       string        `envconfig:"BEACON_URL" default:"" desc:"beacon node API base URL; when set, epochs come from its head slot and finalized checkpoint (converted to the same unix-time numbering) instead of block timestamps"`
	HTTPAddr        string        `envconfig:"HTTP_ADDR" default:"127.0.0.1:8091" desc:"address of the /health and /metrics endpoints; empty disables them"`
	LogLevel        string        `envconfig:"LOG_LEVEL" default:"info" desc:"least severe level logged: debug, info, warn or error"`
	// The HTTP server's limits (pkg/httpserver, ADR 0026), as the
	// validator's. Zero takes the package's default; negative connection
	// caps: no cap.
	HTTPReadHeaderTimeout time.Duration `envconfig:"HTTP_READ_HEADER_TIMEOUT" desc:"time to read a request's headers; 0: 5s"`
	HTTPReadTimeout       time.Duration `envconfig:"HTTP_READ_TIMEOUT" desc:"time to read a whole request; 0: 30s"`
	HTTPWriteTimeout      time.Duration `envconfig:"HTTP_WRITE_TIMEOUT" desc:"time from a request's headers to the end of its answer; 0: 90s"`
	HTTPIdleTimeout       time.Duration `envconfig:"HTTP_IDLE_TIMEOUT" desc:"time a keep-alive connection waits for its next request; 0: 120s"`
	HTTPMaxHeaderBytes    int           `envconfig:"HTTP_MAX_HEADER_BYTES" desc:"largest request header block; 0: 64 KiB"`
	HTTPMaxBodyBytes      int64         `envconfig:"HTTP_MAX_BODY_BYTES" desc:"largest request body (the routes take none); larger answers 413; 0: 64 KiB"`
	HTTPMaxConns          int           `envconfig:"HTTP_MAX_CONNS" desc:"open connections in all; one more is closed at once; 0: 8192; negative: no cap"`
	HTTPMaxConnsPerClient int           `envconfig:"HTTP_MAX_CONNS_PER_CLIENT" desc:"open connections of one client (IPv6: one /64; trusted proxies exempt); 0: 256; negative: no cap"`
	HTTPTLSCert           string        `envconfig:"HTTP_TLS_CERT" desc:"PEM certificate: set with HTTP_TLS_KEY, /health and /metrics are served over HTTPS only; re-read when the files change"`
	HTTPTLSKey            string        `envconfig:"HTTP_TLS_KEY" desc:"PEM private key of HTTP_TLS_CERT"`
	TrustedProxies        []string      `envconfig:"TRUSTED_PROXIES" desc:"comma-separated addresses or CIDRs of proxies whose FORWARDED_HEADER names the client; unset: none"`
	ForwardedHeader       string        `envconfig:"FORWARDED_HEADER" desc:"X-Forwarded-For or Forwarded; empty: X-Forwarded-For"`

	// HTTPListener, when set, serves /health and /metrics instead of listening on
	// HTTPAddr: tests pass a listener on port 0 to know the address. Run
	// closes it.
	HTTPListener net.Listener `ignored:"true"`
}

// LoadConfig reads the configuration from the environment, fills the
// settings the environment does not set from the mode's preset, and
// validates it.
func LoadConfig() (Config, error) {
	var cfg Config
	if err := envconfig.Process(EnvPrefix, &cfg); err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	preset, ok := PresetOf(cfg.Mode)
	if !ok {
		return Config{}, fmt.Errorf("%w: MODE %q must be MOCK, TESTNET or MAINNET", ErrInvalidConfig, cfg.Mode)
	}
	cfg.applyPreset(preset, envSet)
	if err := cfg.Validate(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// envSet reports whether the variable name is set, as envconfig looks it
// up: WATCHER_<name>, else the bare name. Set to anything, even empty, it
// is the operator's value and the preset stays out of it.
func envSet(name string) bool {
	if _, ok := os.LookupEnv(EnvPrefix + "_" + name); ok {
		return true
	}
	_, ok := os.LookupEnv(name)
	return ok
}

// mode is the effective mode: Mode, "" meaning ModeMock.
func (c Config) mode() Mode {
	if c.Mode == "" {
		return ModeMock
	}
	return c.Mode
}

// Usage prints the environment variables, their types, defaults and
// descriptions.
func Usage() error {
	return envconfig.Usage(EnvPrefix, &Config{})
}

// maxReorgDepth bounds REORG_DEPTH: the checkpoint records up to one block
// hash per block of the window in one key-value entry (about 100 bytes
// each), which must stay well below the 1 MiB message limit of NATS.
const maxReorgDepth = 4096

// ErrInvalidConfig is wrapped by every error of Validate.
var ErrInvalidConfig = errors.New("invalid configuration")

// Validate checks values that envconfig cannot.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...))
	}
	if err := c.HTTPServer().Validate(); err != nil {
		bad("HTTP_* or TRUSTED_PROXIES: %v", err)
	}
	if _, err := logging.ParseLevel(c.LogLevel); err != nil {
		bad("LOG_LEVEL: %v", err)
	}
	if _, ok := PresetOf(c.Mode); !ok {
		bad("MODE %q must be MOCK, TESTNET or MAINNET", c.Mode)
	}
	if urls := c.RPCURLs(); len(urls) == 0 {
		bad("RPC_URL is empty")
	} else {
		for i, u := range urls {
			if err := checkRPCURL(u); err != nil {
				bad("RPC_URL endpoint %d: %v", i+1, err)
			}
		}
		if len(urls) > maxEndpoints {
			bad("RPC_URL lists %d endpoints, at most %d", len(urls), maxEndpoints)
		}
	}
	if c.RPCTimeout <= 0 {
		bad("RPC_TIMEOUT %s must be positive", c.RPCTimeout)
	}
	if c.RPCAttempts < 1 || c.RPCAttempts > 10 {
		bad("RPC_ATTEMPTS %d must be 1 to 10", c.RPCAttempts)
	}
	if c.RPCBackoff <= 0 || c.RPCBackoffMax < c.RPCBackoff {
		bad("RPC_BACKOFF %s must be positive and at most RPC_BACKOFF_MAX %s", c.RPCBackoff, c.RPCBackoffMax)
	}
	if c.RPCCooldown <= 0 || c.RPCCooldownMax < c.RPCCooldown {
		bad("RPC_COOLDOWN %s must be positive and at most RPC_COOLDOWN_MAX %s", c.RPCCooldown, c.RPCCooldownMax)
	}
	if c.RangeGrowAfter < 1 {
		bad("RANGE_GROW_AFTER %d must be at least 1", c.RangeGrowAfter)
	}
	if !common.IsHexAddress(c.ContractAddress) || common.HexToAddress(c.ContractAddress) == (common.Address{}) {
		bad("CONTRACT_ADDRESS %q is not a contract address", c.ContractAddress)
	}
	if c.NATSURL == "" {
		bad("NATS_URL is empty")
	}
	if err := c.NATS().Validate(); err != nil {
		bad("NATS_*: %v", err)
	}
	if c.Mode == ModeMainnet && c.NATS().Method() == "none" {
		// Without credentials the server cannot tell the watcher's
		// publications from anyone's (ADR 0029).
		bad("NATS_CREDS (or _NKEY, _USER with _PASSWORD, _TOKEN) is required in MAINNET mode")
	}
	if c.PollInterval <= 0 {
		bad("POLL_INTERVAL %s must be positive", c.PollInterval)
	}
	if c.MaxBlockRange == 0 {
		bad("MAX_BLOCK_RANGE must be at least 1")
	}
	if c.ReorgDepth > maxReorgDepth {
		bad("REORG_DEPTH %d must be at most %d", c.ReorgDepth, maxReorgDepth)
	}
	if !validName(c.Stream) {
		bad("STREAM %q must be letters, digits, - and _", c.Stream)
	}
	if !validName(c.Bucket) {
		bad("BUCKET %q must be letters, digits, - and _", c.Bucket)
	}
	if c.DuplicateWindow <= 0 {
		bad("DUPLICATE_WINDOW %s must be positive", c.DuplicateWindow)
	}
	if c.Replicas < 1 || c.Replicas > 5 {
		bad("REPLICAS %d must be 1 to 5", c.Replicas)
	}
	if c.EpochLength != 0 && (c.EpochLength < time.Second || c.EpochLength%time.Second != 0) {
		bad("EPOCH_LENGTH %s must be a whole number of seconds", c.EpochLength)
	}
	if c.EpochInterval < 0 {
		bad("EPOCH_INTERVAL %s must not be negative", c.EpochInterval)
	}
	if c.BeaconURL != "" {
		if u, err := url.Parse(c.BeaconURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			// Not quoted back: it may hold an API key.
			bad("BEACON_URL is not an http(s) URL with a host")
		}
	}
	return errors.Join(errs...)
}

// maxEndpoints bounds RPC_URL's list: every endpoint is a client, a health
// record and a set of metric series.
const maxEndpoints = 16

// RPCURLs returns the endpoints of RPC_URL in order: the comma-separated
// items, trimmed, empty ones dropped.
func (c Config) RPCURLs() []string {
	var out []string
	for item := range strings.SplitSeq(c.RPCURL, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// checkRPCURL accepts what go-ethereum's client dials: http(s) and ws(s)
// URLs with a host. (IPC paths are not offered: the watcher runs next to
// no node.) The URL is not quoted back, since it may hold an API key.
func checkRPCURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return errors.New("not a URL")
	}
	switch u.Scheme {
	case "http", "https", "ws", "wss":
	default:
		return fmt.Errorf("scheme %q, want http, https, ws or wss", u.Scheme)
	}
	if u.Host == "" {
		return errors.New("no host")
	}
	return nil
}

// validName accepts the names JetStream allows for streams and buckets that
// are also safe in subjects.
func validName(s string) bool {
	if s == "" || len(s) > 255 {
		return false
	}
	return !strings.ContainsFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_')
	})
}

// reorgDepth is REORG_DEPTH, 0 meaning the default.
func (c Config) reorgDepth() uint64 {
	if c.ReorgDepth == 0 {
		return relay.DefaultDepth
	}
	return c.ReorgDepth
}

// epochLength is EPOCH_LENGTH, 0 meaning the default.
func (c Config) epochLength() time.Duration {
	if c.EpochLength == 0 {
		return epochs.DefaultLength
	}
	return c.EpochLength
}

// contract returns the parsed contract address; Validate has checked it.
func (c Config) contract() common.Address { return common.HexToAddress(c.ContractAddress) }

// NATS is the credentials and TLS settings of the NATS connection.
func (c Config) NATS() natsconn.Config {
	return natsconn.Config{CredsFile: c.NATSCreds, NKeyFile: c.NATSNKey, User: c.NATSUser, Password: c.NATSPassword,
		Token: c.NATSToken, TLSCA: c.NATSTLSCA, TLSCert: c.NATSTLSCert, TLSKey: c.NATSTLSKey}
}

// HTTPServer is the configuration of the /health and /metrics server.
func (c Config) HTTPServer() httpserver.Config {
	return httpserver.Config{ReadHeaderTimeout: c.HTTPReadHeaderTimeout, ReadTimeout: c.HTTPReadTimeout,
		WriteTimeout: c.HTTPWriteTimeout, IdleTimeout: c.HTTPIdleTimeout, MaxHeaderBytes: c.HTTPMaxHeaderBytes,
		MaxBodyBytes: c.HTTPMaxBodyBytes, MaxConns: c.HTTPMaxConns, MaxConnsPerClient: c.HTTPMaxConnsPerClient,
		TLSCert: c.HTTPTLSCert, TLSKey: c.HTTPTLSKey, TrustedProxies: c.TrustedProxies, ForwardedHeader: c.ForwardedHeader}
}
