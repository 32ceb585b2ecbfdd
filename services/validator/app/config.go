package app

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/ethereum/go-ethereum/common"
	"github.com/kelseyhightower/envconfig"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/httpserver"
	"github.com/contentledger/contentledger/pkg/logging"
	"github.com/contentledger/contentledger/pkg/proposal"
	"github.com/contentledger/contentledger/services/validator/internal/blobgateway"
	"github.com/contentledger/contentledger/services/validator/internal/chat"
	"github.com/contentledger/contentledger/services/validator/internal/consensus"
	"github.com/contentledger/contentledger/services/validator/internal/pipeline"
	"github.com/contentledger/contentledger/services/validator/internal/storage"
	"github.com/contentledger/contentledger/services/validator/internal/transport"
)

// Mode is the deployment mode of the contract.
type Mode string

const (
	// Mock checks signatures but no payments.
	Mock Mode = "MOCK"
	// Testnet verifies payments against the configured contract.
	Testnet Mode = "TESTNET"
	// Mainnet verifies payments, in production.
	Mainnet Mode = "MAINNET"
)

// Config is the validator's configuration, read from the environment with
// the prefix SVC_VALIDATOR (ADR 0008). There is no default mode: a
// validator that silently skipped payment checks would be a costly mistake.
type Config struct {
	Mode      Mode   `envconfig:"MODE" desc:"MOCK, TESTNET or MAINNET; required"`
	NodeID    uint64 `envconfig:"NODE_ID" default:"1" desc:"raft id of this validator, unique in the cluster"`
	ClusterID string `envconfig:"CLUSTER_ID" default:"contentledger-local" desc:"name of the cluster"`
	DataDir   string `envconfig:"DATA_DIR" default:"./data/validator-1" desc:"directory of the Pebble database"`
	HTTPAddr  string `envconfig:"HTTP_ADDR" default:"0.0.0.0:8090" desc:"address of the HTTP API"`
	PeerAddr  string `envconfig:"PEER_ADDR" default:"0.0.0.0:7090" desc:"address raft peers connect to"`
	// InitialCluster lists the first members, as etcd's --initial-cluster
	// does: id=peerHost:port=apiURL, comma-separated. Empty: a single-node
	// cluster of NodeID. Used only to bootstrap an empty data directory and
	// to know the peers' addresses.
	InitialCluster string `envconfig:"INITIAL_CLUSTER" desc:"id=peerAddr=apiURL,... of the first members; empty: single node"`
	// Join starts an empty data directory as a new member of a running
	// cluster (added first with POST /v1/cluster/members), instead of
	// bootstrapping one; InitialCluster then lists the members to dial.
	Join bool `envconfig:"JOIN" default:"false" desc:"join a running cluster instead of bootstrapping one"`
	// Mutual TLS between validators (ADR 0025): all three or none; required
	// outside MOCK. Each certificate names its validator's NODE_ID
	// (urn:contentledger:node:<id>, made by ledgerctl certs); the files are
	// re-read when they change.
	PeerTLSCert string `envconfig:"PEER_TLS_CERT" desc:"PEM certificate this validator presents to its raft peers; must name NODE_ID (ledgerctl certs); re-read when it changes; required unless MOCK"`
	PeerTLSKey  string `envconfig:"PEER_TLS_KEY" desc:"PEM private key of PEER_TLS_CERT"`
	PeerTLSCA   string `envconfig:"PEER_TLS_CA" desc:"PEM CA (or bundle) that signs every validator's peer certificate"`
	// PeerPlaintext is TESTNET's explicit way out of peer mTLS: anyone who
	// reaches the peer port can then speak raft as any member.
	PeerPlaintext bool `envconfig:"PEER_PLAINTEXT" default:"false" desc:"TESTNET only: run the raft peer port without mutual TLS (anyone reaching it can speak raft as any member; logged as a warning at start); refused in MAINNET"`
	// The peer transport's limits (internal/transport, ADR 0032). A raft
	// message travels in one frame, so the frame limit must hold the
	// largest entry the pipeline seals (Validate checks it); a snapshot
	// streams from file to file beside the frames, bounded only by its own
	// limit and the disk.
	PeerMaxFrameBytes int   `envconfig:"PEER_MAX_FRAME_BYTES" desc:"largest raft message sent to or accepted from a peer; a larger one is dropped (sent) or closes the connection (received), so keep it equal on every validator; must hold a raft entry of MAX_BATCH proposals of MAX_MESSAGE_BYTES (at most 4 MiB of messages), refused at start otherwise; raft's append messages are sized to half of it; 0: the default"`
	MaxSnapshotBytes  int64 `envconfig:"MAX_SNAPSHOT_BYTES" desc:"largest raft snapshot (the snapshot file, streamed from disk to disk, never held in memory) sent to or accepted from a peer; a validator whose state outgrows it can no longer be caught up by snapshot; it guards against a peer that would make this one write without end (free disk is checked too); 0: the default"`
	// Access lanes (internal/access, ADR 0024): a lane is open while no
	// token opens it. Outside MOCK mode the operator lane must be guarded,
	// and the ops-read lane too unless the HTTP listener is loopback or
	// OPEN_OPS_READ says otherwise.
	AuthToken      string  `envconfig:"AUTH_TOKEN" desc:"bearer token of every lane (submit, ops-read, operator, mock): required on every route but /health* and /v1/ops/snapshots/{health,runtime,storage}; unset: none"`
	SubmitTokens   string  `envconfig:"SUBMIT_TOKENS" desc:"comma-separated bearer tokens of the submit lane (proposals, their status, content and wallet reads); unset: the lane is open unless AUTH_TOKEN or TOKENS_FILE guards it"`
	OpsReadTokens  string  `envconfig:"OPS_READ_TOKENS" desc:"comma-separated bearer tokens of the ops-read lane (every GET a dashboard, the edge or Prometheus needs)"`
	OperatorTokens string  `envconfig:"OPERATOR_TOKENS" desc:"comma-separated bearer tokens of the operator lane (membership, GC limits, execute-pending, manual pay); required outside MOCK unless AUTH_TOKEN or TOKENS_FILE gives one"`
	MockTokens     string  `envconfig:"MOCK_TOKENS" desc:"comma-separated bearer tokens of the mock lane (/api/mock/*, MOCK mode only)"`
	TokensFile     string  `envconfig:"TOKENS_FILE" desc:"file of lane tokens, one per line: <lane>[,<lane>...] <token> (lane all: every lane); re-read when it changes and on SIGHUP"`
	OpenOpsRead    bool    `envconfig:"OPEN_OPS_READ" default:"false" desc:"allow the ops-read lane without a token on a listener that is not loopback (TESTNET, MAINNET)"`
	OperatorRate   float64 `envconfig:"OPERATOR_RATE" default:"5" desc:"operator requests per second one client address may make, in bursts of twice that; 0: no limit"`
	// The HTTP servers' limits (pkg/httpserver, ADR 0026), on the API and
	// the debug listener. Zero takes the package's default (the
	// configuration views show it); negative connection caps: no cap.
	HTTPReadHeaderTimeout time.Duration `envconfig:"HTTP_READ_HEADER_TIMEOUT" desc:"time to read a request's headers; 0: the default"`
	HTTPReadTimeout       time.Duration `envconfig:"HTTP_READ_TIMEOUT" desc:"time to read a whole request, body included: a slower body is cut; 0: the default"`
	HTTPWriteTimeout      time.Duration `envconfig:"HTTP_WRITE_TIMEOUT" desc:"time from a request's headers to the end of its answer (event streams excepted); keep it above the 60s ?wait=; 0: the default"`
	HTTPIdleTimeout       time.Duration `envconfig:"HTTP_IDLE_TIMEOUT" desc:"time a keep-alive connection waits for its next request; 0: the default"`
	HTTPMaxHeaderBytes    int           `envconfig:"HTTP_MAX_HEADER_BYTES" desc:"largest request header block; 0: the default"`
	HTTPMaxBodyBytes      int64         `envconfig:"HTTP_MAX_BODY_BYTES" desc:"body limit of every route but the proposal routes (sized from MAX_MESSAGE_BYTES); larger answers 413; 0: the default"`
	HTTPMaxConns          int           `envconfig:"HTTP_MAX_CONNS" desc:"open connections in all; one more is closed at once; 0: the default; negative: no cap"`
	HTTPMaxConnsPerClient int           `envconfig:"HTTP_MAX_CONNS_PER_CLIENT" desc:"open connections of one client (IPv6: one /64; trusted proxies exempt); one more is closed at once; 0: the default; negative: no cap"`
	HTTPTLSCert           string        `envconfig:"HTTP_TLS_CERT" desc:"PEM certificate of the HTTP API (and debug listener): set with HTTP_TLS_KEY, they serve HTTPS only; re-read when the files change"`
	HTTPTLSKey            string        `envconfig:"HTTP_TLS_KEY" desc:"PEM private key of HTTP_TLS_CERT (the path is shown, never the key)"`
	TrustedProxies        []string      `envconfig:"TRUSTED_PROXIES" desc:"comma-separated addresses or CIDRs of proxies whose FORWARDED_HEADER names the client for rate, stream and connection limits; from anyone else it is ignored; unset: none"`
	ForwardedHeader       string        `envconfig:"FORWARDED_HEADER" desc:"the header trusted proxies name the client in: X-Forwarded-For or Forwarded (RFC 7239); only that one is read; empty: the default"`
	// DebugAddr serves Go's /debug/pprof profiles on a listener of its own,
	// kept off the API port so that it can be bound to loopback only.
	DebugAddr string `envconfig:"DEBUG_ADDR" desc:"address of the /debug/pprof listener; unset: off"`
	// LogLevel is the least severe level logged (pkg/logging).
	LogLevel string `envconfig:"LOG_LEVEL" default:"info" desc:"least severe level logged: debug, info, warn or error"`
	// Registration and compatibility (docs/adr/0038): the public URL
	// GET /v1/ngrok-url advertises until the operator sets one, and how
	// often a follower reports its head to the leader.
	PublicURL          string        `envconfig:"PUBLIC_URL" desc:"public URL this validator advertises on GET /v1/ngrok-url until the operator sets one (POST /v1/ngrok-url, kept across restarts): absolute http or https, no user information; unset: none"`
	HeadReportInterval time.Duration `envconfig:"HEAD_REPORT_INTERVAL" desc:"how often a follower reports its applied index and segment-chain head to the leader (POST /v1/follower/head-update, with an operator token), shown in the leader's replication views; 0: the default; negative: never"`

	ChainID         uint64 `envconfig:"CHAIN_ID" default:"1337" desc:"chain id of the payment contract (EIP-712 domain)"`
	ContractAddress string `envconfig:"CONTRACT_ADDRESS" desc:"payment contract address; required unless MOCK"`
	Confirmations   uint64 `envconfig:"CONFIRMATIONS" desc:"confirmations the chain-watcher waits for (published in /v1/blockchain/config); default by MODE as the watcher's: MOCK 2, TESTNET 3, MAINNET 12"`
	USDCAddress     string `envconfig:"USDC_ADDRESS" desc:"stablecoin token address, published for clients"`

	NATSURL          string        `envconfig:"NATS_URL" default:"nats://127.0.0.1:4222" desc:"NATS server with JetStream"`
	PaymentStream    string        `envconfig:"PAYMENT_STREAM" default:"CHAIN_EVENTS" desc:"JetStream stream the chain-watcher publishes payments to"`
	WatcherBucket    string        `envconfig:"WATCHER_BUCKET" default:"CHAIN_WATCHER" desc:"the chain-watcher's key-value bucket (its BUCKET), where it keeps the chain status shown on /v1/chain/status"`
	ChainStatusStale time.Duration `envconfig:"CHAIN_STATUS_STALE" desc:"age past which the chain-watcher's status counts as stopped (it rewrites it every 30s while it runs): /health/deep fails, and held submissions are refused 503 payment_feed_stale; 0: the default"`
	PaymentWait      time.Duration `envconfig:"PAYMENT_WAIT" desc:"how long a submission whose payment is not observed yet is held (nothing unpaid is replicated) before it is refused, retryable: 402 payment_not_found, or 503 payment_feed_stale while the chain feed is behind; keep it below HTTP_WRITE_TIMEOUT; default by MODE: MOCK 15s, TESTNET and MAINNET 60s"`
	// The leader publishes the replicated events to NATS JetStream
	// (internal/eventpub, ADR 0023). Zero values take the defaults.
	NATSEvents           string        `envconfig:"NATS_EVENTS" default:"auto" desc:"leader publishes the replicated events to NATS_EVENTS_STREAM: auto (in TESTNET and MAINNET, which use NATS_URL anyway), on (in MOCK too), off"`
	NATSEventsStream     string        `envconfig:"NATS_EVENTS_STREAM" default:"LEDGER_EVENTS" desc:"JetStream stream of the events, subjects ledger.events.<type>.<wallet>; declared by the leader"`
	NATSEventsMaxMsgs    int64         `envconfig:"NATS_EVENTS_MAX_MSGS" default:"1000000" desc:"events the stream keeps, oldest dropped first"`
	NATSEventsMaxBytes   int64         `envconfig:"NATS_EVENTS_MAX_BYTES" default:"1073741824" desc:"bytes the stream keeps, oldest events dropped first"`
	NATSEventsDuplicates time.Duration `envconfig:"NATS_EVENTS_DUPLICATES" default:"2m" desc:"duplicate window of the stream: an event published again within it is not stored twice"`
	NATSEventsReplicas   int           `envconfig:"NATS_EVENTS_REPLICAS" default:"1" desc:"copies of the stream in a NATS cluster, 1 to 5 (at most the cluster's JetStream servers; 0: 1); with 3, the stream survives the loss of one server"`
	// Credentials and TLS of every NATS connection (pkg/natsconn,
	// ADR 0029): one kind of credential at most. The server's permissions
	// are what keep anyone but the chain-watcher off chain.> .
	NATSCreds    string `envconfig:"NATS_CREDS" desc:"NATS .creds file (user JWT and nkey seed) of every NATS connection; unset: none"`
	NATSNKey     string `envconfig:"NATS_NKEY" desc:"file holding the NATS user's nkey seed (SU...); unset: none"`
	NATSUser     string `envconfig:"NATS_USER" desc:"NATS user name, with NATS_PASSWORD; unset: none"`
	NATSPassword string `envconfig:"NATS_PASSWORD" desc:"password of NATS_USER (never shown)"`
	NATSToken    string `envconfig:"NATS_TOKEN" desc:"NATS authorization token (never shown); unset: none"`
	NATSTLSCA    string `envconfig:"NATS_TLS_CA" desc:"PEM CA that signs the NATS server's certificate; set (or NATS_TLS_CERT set), NATS connections require TLS"`
	NATSTLSCert  string `envconfig:"NATS_TLS_CERT" desc:"PEM client certificate presented to NATS, with NATS_TLS_KEY; re-read at every reconnect"`
	NATSTLSKey   string `envconfig:"NATS_TLS_KEY" desc:"PEM private key of NATS_TLS_CERT (the path is shown, never the key)"`
	// EpochMaxAhead bounds the chain-watcher's epoch updates by the wall
	// clock (ADR 0029): figures never go back, so one forged update far
	// ahead would finalize every proposal for good.
	EpochMaxAhead uint64 `envconfig:"EPOCH_MAX_AHEAD" desc:"epochs an epoch update may run ahead of unix time / EPOCH_LENGTH; one further ahead is refused, logged and counted (validator_epoch_updates_ahead_total); 0: 1"`

	ContentRoot       string        `envconfig:"CONTENT_ROOT" default:"ledger" desc:"first segment of every content path"`
	MaxMessageBytes   int           `envconfig:"MAX_MESSAGE_BYTES" default:"1048576" desc:"largest message accepted"`
	EpochLength       time.Duration `envconfig:"EPOCH_LENGTH" default:"384s" desc:"length of an epoch: MOCK mode's clock, and on a chain the wall-clock estimate (unix time / length) until the chain-watcher's first epoch update; keep it equal to the watcher's EPOCH_LENGTH"`
	TickInterval      time.Duration `envconfig:"TICK_INTERVAL" default:"100ms" desc:"raft tick; 100ms or more in production"`
	SnapshotEntries   uint64        `envconfig:"SNAPSHOT_ENTRIES" default:"10000" desc:"applied entries between raft snapshots"`
	CompactionMargin  uint64        `envconfig:"COMPACTION_MARGIN" default:"5000" desc:"entries kept in the raft log behind a snapshot, for followers slightly behind"`
	LogTruncation     time.Duration `envconfig:"LOG_TRUNCATION" default:"250ms" desc:"how often the leader truncates the raft log up to what every validator holds, past the snapshots; negative: only behind snapshots"`
	MaxPending        int           `envconfig:"MAX_PENDING" default:"10000" desc:"proposals in flight before intake answers 429"`
	MaxBatch          int           `envconfig:"MAX_BATCH" default:"512" desc:"proposals per raft entry"`
	GcSizeDelta       uint64        `envconfig:"GC_SIZE_DELTA" desc:"the contract's gcSizeDeltaEstimation: segment bytes written since the last compaction that make the leader propose COMPACT at the next finalized epoch (ADR 0033); 0: the default"`
	GcOff             bool          `envconfig:"GC_OFF" default:"false" desc:"true: the leader proposes no compaction (COMPACT) and storage only grows; for comparisons"`
	GcStepBytes       uint64        `envconfig:"GC_STEP_BYTES" desc:"node bytes one compaction step rewrites; writes wait while a step applies (ADR 0033); 0: the default"`
	GcRetryCount      int           `envconfig:"GC_RETRY_COUNT" desc:"the contract's retryCount: compaction cycles failed in a row after which the leader gives the run up; 0: the default"`
	GcForceTimeout    time.Duration `envconfig:"GC_FORCE_TIMEOUT" desc:"the contract's forceTimeout: longest a compaction step may hold writes on the leader; a longer one fails its cycle and halves the next steps; 0: the default"`
	GcMemoryThreshold float64       `envconfig:"GC_MEMORY_THRESHOLD" desc:"the contract's memoryThreshold, in percent: least free memory (of GOMEMLIMIT, else the cgroup's memory.max, else the host's) for the leader to propose the next compaction step; 0: the default"`
	MaxBatchBytes     int           `envconfig:"MAX_BATCH_BYTES" desc:"encoded proposals per raft entry (a single larger proposal goes alone); keep a raft entry within PEER_MAX_FRAME_BYTES; 0: the default"`
	MicroBatch        int           `envconfig:"MICRO_BATCH" default:"64" desc:"proposals of one wallet and organization released together from the packing buffer"`
	MicroBatchBytes   int           `envconfig:"MICRO_BATCH_BYTES" default:"262144" desc:"message bytes of one micro-batch of the packing buffer"`
	HoldPerWallet     int           `envconfig:"HOLD_PER_WALLET" desc:"submissions of one wallet held for their payment at once; past it they are refused at once, 402 payment_not_found, retryable; 0: the default"`
	HoldPerClient     int           `envconfig:"HOLD_PER_CLIENT" desc:"submissions of one client address (IPv6: its /64) held for their payment at once; 0: the default"`
	HoldBytes         int           `envconfig:"HOLD_BYTES" desc:"message bytes of all submissions held for their payment on this validator; 0: the default"`
	Verifiers         int           `envconfig:"VERIFIERS" default:"0" desc:"workers matching payments to accepted proposals; 0: one per core"`
	RatePerIP         float64       `envconfig:"RATE_PER_IP" default:"2000" desc:"proposals per second one client address may submit, in bursts of twice that; 0: no limit"`
	RatePerWallet     float64       `envconfig:"RATE_PER_WALLET" default:"500" desc:"proposals per second one wallet may submit, in bursts of twice that; 0: no limit"`
	ClassAging        time.Duration `envconfig:"CLASS_AGING" default:"2s" desc:"wait after which a queued proposal ranks one payment class higher when capacity is short"`
	// MaxPendingMessages is the contract's max_pending_messages.
	MaxPendingMessages int  `envconfig:"MAX_PENDING_MESSAGES" default:"2048" desc:"proposals proposed to raft and not yet applied before the sender holds back (backpressure)"`
	NoSync             bool `envconfig:"NO_SYNC" default:"false" desc:"skip fsync; tests and benchmarks only"`

	// Memory of the Pebble database (docs/architecture.md, Storage): with
	// the Go heap, most of what a validator's resident memory is.
	CacheBytes    int64  `envconfig:"CACHE_BYTES" desc:"Pebble's block cache, which also holds the live memtables; at least 4 × MEMTABLE_BYTES; 0: the default"`
	MemTableBytes uint64 `envconfig:"MEMTABLE_BYTES" desc:"size of one Pebble memtable (1 MiB to 4 GiB); 0: the default"`

	// Event history and streams (ADR 0023, contract Limits). Pruning the
	// history is part of apply: the leader writes its two retention settings
	// into every batch it seals, and every validator prunes by those. Zero
	// takes the default.
	EventsRetention      time.Duration `envconfig:"EVENTS_RETENTION" default:"72h" desc:"event history kept, measured on the leader's batch timestamps; the leader's value applies on every validator; 0: 72h"`
	EventsRetentionCount uint64        `envconfig:"EVENTS_RETENTION_COUNT" default:"1000000" desc:"most events kept; the leader's value applies on every validator; 0: 1000000"`
	EventsStreamPerIP    int           `envconfig:"EVENTS_STREAM_PER_IP" default:"10" desc:"concurrent event streams one client (by address, IPv6 by /64, behind TRUSTED_PROXIES the forwarded one) may hold across both stream routes; 0: 10"`
	EventsStreamRate     float64       `envconfig:"EVENTS_STREAM_RATE" default:"1000" desc:"events per second one stream sends at most; faster events wait in its queue; 0: 1000"`
	EventsStreamQueue    int           `envconfig:"EVENTS_STREAM_QUEUE" default:"4096" desc:"events queued for one stream; on overflow the oldest are dropped and the client gets a dropped event; 0: 4096"`
	EventsKeepAlive      time.Duration `envconfig:"EVENTS_KEEPALIVE" default:"15s" desc:"interval of the keep-alive comments on an idle event stream; 0: 15s"`

	// The IPFS gateway clients fetch binaries from: validators store their
	// CIDs only, and check that the gateway answers (internal/blobgateway),
	// for the runtime snapshot's blob store.
	IPFSGateway      string        `envconfig:"IPFS_GATEWAY" desc:"base URL of the IPFS gateway clients fetch binaries from, http or https (e.g. https://ipfs.example; /ipfs/<cid> is appended); checked every IPFS_GATEWAY_CHECK and published, credentials redacted, in the runtime snapshot; unset: none"`
	IPFSGatewayCheck time.Duration `envconfig:"IPFS_GATEWAY_CHECK" default:"60s" desc:"interval of the IPFS gateway checks (a GET of the empty directory, timing out after 10s or the interval if shorter); at least 1s; 0: 60s"`
	// Binary uploads (docs/adr/0037): the intent flow checks an upload
	// through IPFS_GATEWAY, and /api/blob reads binaries through it.
	IPFSPublicGateway string        `envconfig:"IPFS_PUBLIC_GATEWAY" desc:"base URL of the IPFS gateway /api/cid/gateway/{blobId} redirects clients to; unset: IPFS_GATEWAY when it carries no credentials"`
	BlobMaxBytes      int64         `envconfig:"BLOB_MAX_BYTES" desc:"largest binary an upload intent may declare and /api/blob serves; 0: 1 GiB"`
	BlobTimeout       time.Duration `envconfig:"BLOB_TIMEOUT" desc:"longest one read of a binary through the gateway takes (an upload's check, an /api/blob answer); 0: 5m"`
	IntentTTL         time.Duration `envconfig:"INTENT_TTL" desc:"how long a declared upload intent waits for its upload before the leader expires it; at least 1s; 0: 1h"`
	IntentRetention   time.Duration `envconfig:"INTENT_RETENTION" desc:"how long a completed or expired upload intent stays readable before it is deleted; 0: 24h"`
	IntentsPerWallet  int           `envconfig:"INTENTS_PER_WALLET" desc:"upload intents one wallet may have open at once; 0: 16"`

	// The operator assistant (internal/chat, ADR 0040): POST /v1/chat and
	// the /chat page. Without CHAT_URL there is none, and /v1/chat answers
	// 503 chat_not_configured. Zero limits take the package's defaults.
	ChatURL                  string        `envconfig:"CHAT_URL" desc:"base URL of an OpenAI-compatible chat-completions API for the operator assistant, http or https, no credentials (e.g. http://127.0.0.1:11434/v1 for Ollama; /chat/completions is appended); the model reads this validator's ops-read routes through it; unset: no assistant, POST /v1/chat answers 503 chat_not_configured"`
	ChatModel                string        `envconfig:"CHAT_MODEL" desc:"model the assistant asks the endpoint for (one that supports tool calls); required with CHAT_URL"`
	ChatKeyFile              string        `envconfig:"CHAT_KEY_FILE" desc:"file holding the endpoint's API key, one line, sent to CHAT_URL as a bearer token and never to the model (the path is shown, never the key); read at start; outside MOCK refused with a plain-http CHAT_URL that is not loopback; unset: no key"`
	ChatTimeout              time.Duration `envconfig:"CHAT_TIMEOUT" desc:"time one answer may take, every completion and read included (then 504 timeout); below HTTP_WRITE_TIMEOUT; 0: the default"`
	ChatMaxRounds            int           `envconfig:"CHAT_MAX_ROUNDS" desc:"completions of one answer in which the model may read routes; one more, without tools, asks for its answer; 0: the default"`
	ChatMaxToolResultBytes   int           `envconfig:"CHAT_MAX_TOOL_RESULT_BYTES" desc:"bytes of a route's answer handed to the model, the rest cut; 0: the default"`
	ChatMaxConversationBytes int           `envconfig:"CHAT_MAX_CONVERSATION_BYTES" desc:"largest conversation one POST /v1/chat may carry (413 past it, and past HTTP_MAX_BODY_BYTES); 0: the default"`
	ChatRate                 float64       `envconfig:"CHAT_RATE" default:"0.2" desc:"questions per second one client address may put to the assistant, in bursts of twice that (at least one); past it 429 rate_limited; 0: no limit"`
}

// Binaries is the intent flow's configuration.
func (c Config) Binaries() pipeline.BinariesConfig {
	return pipeline.BinariesConfig{IntentTTL: c.IntentTTL, IntentRetention: c.IntentRetention,
		MaxOpenPerWallet: c.IntentsPerWallet, MaxBlobBytes: c.BlobMaxBytes}
}

// PublicGateway is the gateway clients are sent to for a blob: the
// public one, else the gateway the validator reads when its URL carries
// no credentials; nil when there is none.
func (c Config) PublicGateway() *url.URL {
	raw := c.IPFSPublicGateway
	if raw == "" {
		raw = c.IPFSGateway
	}
	u, err := blobgateway.ParseBase(raw)
	if err != nil || raw == "" || u.User != nil {
		return nil
	}
	return u
}

// EnvPrefix is the prefix of the validator's environment variables
// (ADR 0008), e.g. SVC_VALIDATOR_MODE.
const EnvPrefix = "SVC_VALIDATOR"

// LoadConfig reads the configuration from the environment, fills the
// settings whose default depends on the mode where the environment does not
// set them, and validates it.
func LoadConfig() (Config, error) {
	var cfg Config
	if err := envconfig.Process(EnvPrefix, &cfg); err != nil {
		return Config{}, err
	}
	cfg.applyModeDefaults(func(name string) bool {
		// As envconfig looks a variable up: prefixed, else bare. Set to
		// anything, it is the operator's value.
		if _, ok := os.LookupEnv(EnvPrefix + "_" + name); ok {
			return true
		}
		_, ok := os.LookupEnv(name)
		return ok
	})
	return cfg, cfg.Validate()
}

// applyModeDefaults fills the settings whose default depends on the mode
// (modeDefaults) unless set reports them set.
func (c *Config) applyModeDefaults(set func(name string) bool) {
	confirmations, wait := modeDefaults(c.Mode)
	if !set("CONFIRMATIONS") {
		c.Confirmations = confirmations
	}
	if !set("PAYMENT_WAIT") {
		c.PaymentWait = wait
	}
}

// modeDefaults are the defaults that follow the chain's block time and the
// confirmations its chain-watcher waits for (the watcher's WATCHER_MODE
// presets). An unknown mode gets MOCK's, and is refused by Validate.
func modeDefaults(m Mode) (confirmations uint64, paymentWait time.Duration) {
	switch m {
	case Testnet:
		return 3, time.Minute
	case Mainnet:
		return 12, time.Minute
	}
	return 2, 15 * time.Second
}

// Logger is the validator's logger, at LOG_LEVEL: the command builds it
// before Run, which logs to it.
func (c Config) Logger() (*zap.Logger, error) {
	return logging.New(c.LogLevel)
}

// Validate reports a configuration that cannot run.
func (c Config) Validate() error {
	var errs []error
	if _, err := logging.ParseLevel(c.LogLevel); err != nil {
		errs = append(errs, fmt.Errorf("SVC_VALIDATOR_LOG_LEVEL: %w", err))
	}
	switch c.Mode {
	case Mock, Testnet, Mainnet:
	default:
		errs = append(errs, fmt.Errorf("SVC_VALIDATOR_MODE is %q; set MOCK, TESTNET or MAINNET", c.Mode))
	}
	if c.Mode != Mock && !common.IsHexAddress(c.ContractAddress) {
		errs = append(errs, fmt.Errorf("SVC_VALIDATOR_CONTRACT_ADDRESS %q is not an address (required in %s mode)", c.ContractAddress, c.Mode))
	}
	if c.ContractAddress != "" && !common.IsHexAddress(c.ContractAddress) {
		errs = append(errs, fmt.Errorf("SVC_VALIDATOR_CONTRACT_ADDRESS %q is not an address", c.ContractAddress))
	}
	if c.NodeID == 0 {
		errs = append(errs, errors.New("SVC_VALIDATOR_NODE_ID must not be 0"))
	}
	if c.DataDir == "" {
		errs = append(errs, errors.New("SVC_VALIDATOR_DATA_DIR is empty"))
	}
	if c.MaxMessageBytes <= 0 || c.EpochLength <= 0 || c.PaymentWait <= 0 {
		errs = append(errs, errors.New("SVC_VALIDATOR_MAX_MESSAGE_BYTES, EPOCH_LENGTH and PAYMENT_WAIT must be positive"))
	}
	if c.RatePerIP < 0 || c.RatePerWallet < 0 || c.Verifiers < 0 || c.ClassAging < 0 || c.OperatorRate < 0 {
		errs = append(errs, errors.New("SVC_VALIDATOR_RATE_PER_IP, RATE_PER_WALLET, VERIFIERS, CLASS_AGING and OPERATOR_RATE must not be negative"))
	}
	if _, err := c.staticTokens(); err != nil {
		errs = append(errs, err)
	}
	if c.EventsRetention < 0 || c.EventsStreamPerIP < 0 || c.EventsStreamRate < 0 || c.EventsStreamQueue < 0 || c.EventsKeepAlive < 0 {
		errs = append(errs, errors.New("SVC_VALIDATOR_EVENTS_RETENTION, EVENTS_STREAM_PER_IP, EVENTS_STREAM_RATE, EVENTS_STREAM_QUEUE and EVENTS_KEEPALIVE must not be negative"))
	}
	if c.MaxPending <= 0 || c.MaxBatch <= 0 || c.MaxPendingMessages <= 0 || c.MicroBatch <= 0 || c.MicroBatchBytes <= 0 {
		errs = append(errs, errors.New("SVC_VALIDATOR_MAX_PENDING, MAX_BATCH, MAX_PENDING_MESSAGES, MICRO_BATCH and MICRO_BATCH_BYTES must be positive"))
	}
	if err := c.validatePeerLimits(); err != nil {
		errs = append(errs, err)
	}
	if c.HoldPerWallet < 0 || c.HoldPerClient < 0 || c.HoldBytes < 0 || c.ChainStatusStale < 0 || c.MaxBatchBytes < 0 {
		errs = append(errs, errors.New("SVC_VALIDATOR_HOLD_PER_WALLET, HOLD_PER_CLIENT, HOLD_BYTES, CHAIN_STATUS_STALE and MAX_BATCH_BYTES must not be negative"))
	}
	if write := c.HTTPServer().WithDefaults().WriteTimeout; c.VerifiesPayments() && c.PaymentWait >= write {
		errs = append(errs, fmt.Errorf("SVC_VALIDATOR_PAYMENT_WAIT %s must be below HTTP_WRITE_TIMEOUT %s: a held submission is answered within its request", c.PaymentWait, write))
	}
	if tlsFiles := []string{c.PeerTLSCert, c.PeerTLSKey, c.PeerTLSCA}; slices.Contains(tlsFiles, "") && slices.ContainsFunc(tlsFiles, func(f string) bool { return f != "" }) {
		errs = append(errs, errors.New("SVC_VALIDATOR_PEER_TLS_CERT, _KEY and _CA must be set together"))
	}
	if err := c.validatePeerTLS(); err != nil {
		errs = append(errs, err)
	}
	if err := c.HTTPServer().Validate(); err != nil {
		errs = append(errs, fmt.Errorf("SVC_VALIDATOR_HTTP_* or TRUSTED_PROXIES: %w", err))
	}
	if c.PublicURL != "" {
		if err := api.CheckPublicURL(c.PublicURL); err != nil {
			errs = append(errs, fmt.Errorf("SVC_VALIDATOR_PUBLIC_URL %w", err))
		}
	}
	if c.IPFSGateway != "" {
		if _, err := blobgateway.ParseBase(c.IPFSGateway); err != nil {
			errs = append(errs, fmt.Errorf("SVC_VALIDATOR_IPFS_GATEWAY: %w", err))
		}
	}
	if c.IPFSPublicGateway != "" {
		if _, err := blobgateway.ParseBase(c.IPFSPublicGateway); err != nil {
			errs = append(errs, fmt.Errorf("SVC_VALIDATOR_IPFS_PUBLIC_GATEWAY: %w", err))
		}
	}
	if c.BlobMaxBytes < 0 || c.BlobTimeout < 0 {
		errs = append(errs, errors.New("SVC_VALIDATOR_BLOB_MAX_BYTES and SVC_VALIDATOR_BLOB_TIMEOUT may not be negative (0: the default)"))
	}
	if err := c.Binaries().Validate(); err != nil {
		errs = append(errs, fmt.Errorf("SVC_VALIDATOR_INTENT_*: %w", err))
	}
	if c.IPFSGatewayCheck < 0 || c.IPFSGatewayCheck > 0 && c.IPFSGatewayCheck < minGatewayCheck {
		errs = append(errs, fmt.Errorf("SVC_VALIDATOR_IPFS_GATEWAY_CHECK is %s; give %s or more (0: %s)", c.IPFSGatewayCheck, minGatewayCheck,
			blobgateway.DefaultInterval))
	}
	if err := c.validateEventPublishing(); err != nil {
		errs = append(errs, err)
	}
	if err := c.validateChat(); err != nil {
		errs = append(errs, err)
	}
	if err := c.NATS().Validate(); err != nil {
		errs = append(errs, fmt.Errorf("SVC_VALIDATOR_NATS_*: %w", err))
	}
	if c.Mode == Mainnet && c.NATS().Method() == "none" {
		// Without credentials the server cannot keep others off chain.>:
		// anyone who may publish there forges payments (ADR 0029).
		errs = append(errs, errors.New("SVC_VALIDATOR_NATS_CREDS (or _NKEY, _USER with _PASSWORD, _TOKEN) is required in MAINNET mode"))
	}
	if members, err := ParseCluster(c.InitialCluster); err != nil {
		errs = append(errs, err)
	} else if len(members) > 0 && !slices.ContainsFunc(members, func(m Member) bool { return m.ID == c.NodeID }) {
		errs = append(errs, fmt.Errorf("SVC_VALIDATOR_INITIAL_CLUSTER does not name this node (%d)", c.NodeID))
	}
	if err := c.StorageOptions().Validate(); err != nil {
		errs = append(errs, fmt.Errorf("SVC_VALIDATOR_CACHE_BYTES or MEMTABLE_BYTES: %w", err))
	}
	if strings.Contains(c.ContentRoot, "/") || c.ContentRoot == "" {
		errs = append(errs, fmt.Errorf("SVC_VALIDATOR_CONTENT_ROOT %q must be one path segment", c.ContentRoot))
	}
	return errors.Join(errs...)
}

// Member is one validator of the cluster.
type Member struct {
	ID       uint64 `json:"id"`
	PeerAddr string `json:"peerAddr"` // host:port of raft traffic
	APIURL   string `json:"apiUrl"`   // base URL of the HTTP API
}

// ParseCluster parses id=peerAddr=apiURL,... (see Config.InitialCluster).
func ParseCluster(s string) ([]Member, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []Member
	seen := map[uint64]bool{}
	for _, item := range strings.Split(s, ",") {
		parts := strings.Split(strings.TrimSpace(item), "=")
		if len(parts) != 3 {
			return nil, fmt.Errorf("SVC_VALIDATOR_INITIAL_CLUSTER item %q is not id=peerAddr=apiURL", item)
		}
		id, err := strconv.ParseUint(parts[0], 10, 64)
		if err != nil || id == 0 {
			return nil, fmt.Errorf("SVC_VALIDATOR_INITIAL_CLUSTER item %q: id must be a positive integer", item)
		}
		if seen[id] {
			return nil, fmt.Errorf("SVC_VALIDATOR_INITIAL_CLUSTER names node %d twice", id)
		}
		seen[id] = true
		if _, _, err := net.SplitHostPort(parts[1]); err != nil {
			return nil, fmt.Errorf("SVC_VALIDATOR_INITIAL_CLUSTER item %q: peer address: %v", item, err)
		}
		u, err := url.Parse(parts[2])
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("SVC_VALIDATOR_INITIAL_CLUSTER item %q: API URL must be http(s)://host:port", item)
		}
		out = append(out, Member{ID: id, PeerAddr: parts[1], APIURL: strings.TrimRight(parts[2], "/")})
	}
	return out, nil
}

// minGatewayCheck is the shortest interval of the gateway checks: a gateway
// is somebody's service, not to be polled in a loop.
const minGatewayCheck = time.Second

// Chat is the configuration of the operator assistant.
func (c Config) Chat() chat.Config {
	return chat.Config{URL: c.ChatURL, Model: c.ChatModel, KeyFile: c.ChatKeyFile, Timeout: c.ChatTimeout,
		MaxRounds: c.ChatMaxRounds, MaxToolResultBytes: c.ChatMaxToolResultBytes, MaxConversationBytes: c.ChatMaxConversationBytes}
}

// validateChat refuses an assistant that cannot run, and outside MOCK one
// whose key would travel in clear text to another host (ADR 0040).
func (c Config) validateChat() error {
	cfg := c.Chat()
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("SVC_VALIDATOR_CHAT_*: %w", err)
	}
	if c.ChatRate < 0 {
		return errors.New("SVC_VALIDATOR_CHAT_RATE must not be negative (0: no limit)")
	}
	if !cfg.Enabled() {
		return nil
	}
	if c.Mode != Mock && cfg.CleartextKey() {
		return fmt.Errorf("SVC_VALIDATOR_CHAT_KEY_FILE would send the key in clear text: SVC_VALIDATOR_CHAT_URL is plain http to a host "+
			"that is not loopback; in %s use an https URL, or an endpoint on this host", c.Mode)
	}
	if timeout, write := cfg.WithDefaults().Timeout, c.HTTPServer().WithDefaults().WriteTimeout; timeout >= write {
		return fmt.Errorf("SVC_VALIDATOR_CHAT_TIMEOUT %s must be below HTTP_WRITE_TIMEOUT %s: an answer is given within its request", timeout, write)
	}
	return nil
}

// PeerTLS reports whether the raft peer port runs mutual TLS.
func (c Config) PeerTLS() bool { return c.PeerTLSCert != "" }

// validatePeerTLS refuses a peer port without mutual TLS outside MOCK
// (ADR 0025), unless TESTNET opts out explicitly.
func (c Config) validatePeerTLS() error {
	const howTo = "set SVC_VALIDATOR_PEER_TLS_CERT, _KEY and _CA (ledgerctl certs makes a CA and node certificates)"
	switch {
	case c.PeerPlaintext && c.Mode == Mainnet:
		return errors.New("SVC_VALIDATOR_PEER_PLAINTEXT is refused in MAINNET: the raft peer port requires mutual TLS; " + howTo)
	case c.PeerPlaintext && c.PeerTLS():
		return errors.New("SVC_VALIDATOR_PEER_PLAINTEXT=true contradicts SVC_VALIDATOR_PEER_TLS_CERT: unset one")
	case c.PeerTLS() || c.Mode == Mock || c.Mode == Testnet && c.PeerPlaintext:
		return nil
	case c.Mode == Testnet:
		return errors.New("the raft peer port requires mutual TLS in TESTNET: " + howTo +
			", or set SVC_VALIDATOR_PEER_PLAINTEXT=true to run it open")
	}
	return fmt.Errorf("the raft peer port requires mutual TLS in %s: %s", c.Mode, howTo)
}

// Sizes of what a raft entry and message carry beside its proposals, for
// the frame limit's check (largestEntry).
const (
	// proposalAllowance is what a batch item carries beyond the fields of
	// its form: the digest, the acceptance time, the payment, the rejection
	// reason and the item's framing in the batch (TestProposalAllowance).
	proposalAllowance = 1 << 10
	// raftEnvelope is a raft message's own fields and an entry's, and the
	// metadata of a MsgSnap (its ConfState lists every member).
	raftEnvelope = 4 << 10
)

// largestEntry bounds the bytes of the largest raft entry the pipeline
// seals: a batch of at most the pipeline's MaxBatchBytes of encoded
// proposals, each framed, or one larger proposal alone (its message, the
// rest of its form, and what intake adds).
func (c Config) largestEntry() int64 {
	single := int64(c.MaxMessageBytes) + proposal.FormFieldsBytes + proposalAllowance
	batch := min(int64(c.maxBatchBytes())+int64(c.MaxBatch)*proposalAllowance, int64(c.MaxBatch)*single)
	return max(batch, single)
}

// maxBatchBytes is the pipeline's MaxBatchBytes, its default for 0.
func (c Config) maxBatchBytes() int {
	return cmp.Or(c.MaxBatchBytes, pipeline.DefaultConfig().MaxBatchBytes)
}

// peerFrameBytes is the transport's frame limit, the default for 0.
func (c Config) peerFrameBytes() int {
	return cmp.Or(c.PeerMaxFrameBytes, transport.DefaultMaxFrameSize)
}

// raftMaxSizePerMsg sizes raft's append messages to the frame limit. raft
// packs entries into one MsgApp up to this many bytes of entries (always at
// least one entry, which largestEntry bounds): half the frame leaves room
// for the per-entry encoding overhead, at most about as large as the
// entries themselves when they are tiny. Never above raft's default.
func (c Config) raftMaxSizePerMsg() uint64 {
	return uint64(min(consensus.DefaultMaxSizePerMsg, max(c.peerFrameBytes()-raftEnvelope, 2)/2))
}

// validatePeerLimits refuses transport limits the transport would refuse,
// and a frame limit below the largest entry: every message carrying that
// entry would be dropped, raft would resend it for ever, and replication
// would stall at it.
func (c Config) validatePeerLimits() error {
	frame := c.peerFrameBytes()
	switch {
	case c.PeerMaxFrameBytes < 0 || c.MaxSnapshotBytes < 0:
		return errors.New("SVC_VALIDATOR_PEER_MAX_FRAME_BYTES and MAX_SNAPSHOT_BYTES must not be negative (0: the default)")
	case frame < transport.MinFrameSize || frame > transport.MaxFrameSizeLimit:
		return fmt.Errorf("SVC_VALIDATOR_PEER_MAX_FRAME_BYTES %d must be within [%d, %d]", frame, transport.MinFrameSize, transport.MaxFrameSizeLimit)
	case c.MaxBatch <= 0 || c.MaxMessageBytes <= 0:
		return nil // refused on their own
	}
	if need := c.largestEntry() + raftEnvelope; int64(frame) < need {
		return fmt.Errorf("SVC_VALIDATOR_PEER_MAX_FRAME_BYTES %d cannot carry a raft entry of SVC_VALIDATOR_MAX_BATCH %d proposals of "+
			"SVC_VALIDATOR_MAX_MESSAGE_BYTES %d: replication would stall at the first such entry; set it to %d or more, "+
			"or lower MAX_BATCH_BYTES, MAX_BATCH or MAX_MESSAGE_BYTES", frame, c.MaxBatch, c.MaxMessageBytes, need)
	}
	return nil
}

// VerifiesPayments reports whether the mode checks payments.
func (c Config) VerifiesPayments() bool { return c.Mode != Mock }

// StorageOptions is the configuration of the validator's Pebble database,
// without its logger.
func (c Config) StorageOptions() storage.Options {
	return storage.Options{Dir: c.DataDir, CacheSize: c.CacheBytes, MemTableSize: c.MemTableBytes, NoSync: c.NoSync}
}

// HTTPServer is the configuration of the validator's HTTP servers.
func (c Config) HTTPServer() httpserver.Config {
	return httpserver.Config{ReadHeaderTimeout: c.HTTPReadHeaderTimeout, ReadTimeout: c.HTTPReadTimeout,
		WriteTimeout: c.HTTPWriteTimeout, IdleTimeout: c.HTTPIdleTimeout, MaxHeaderBytes: c.HTTPMaxHeaderBytes,
		MaxBodyBytes: c.HTTPMaxBodyBytes, MaxConns: c.HTTPMaxConns, MaxConnsPerClient: c.HTTPMaxConnsPerClient,
		TLSCert: c.HTTPTLSCert, TLSKey: c.HTTPTLSKey, TrustedProxies: c.TrustedProxies, ForwardedHeader: c.ForwardedHeader}
}

// apiScheme is the scheme of this validator's API URL.
func (c Config) apiScheme() string {
	if c.HTTPTLSCert != "" {
		return "https"
	}
	return "http"
}
