package app

import (
	"strconv"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/httpserver"
	"github.com/contentledger/contentledger/pkg/logging"
	"github.com/contentledger/contentledger/services/validator/internal/blobgateway"
	"github.com/contentledger/contentledger/services/validator/internal/chat"
	"github.com/contentledger/contentledger/services/validator/internal/epoch"
	"github.com/contentledger/contentledger/services/validator/internal/headreport"
	"github.com/contentledger/contentledger/services/validator/internal/payments"
	"github.com/contentledger/contentledger/services/validator/internal/pipeline"
	"github.com/contentledger/contentledger/services/validator/internal/segments"
	"github.com/contentledger/contentledger/services/validator/internal/settings"
	"github.com/contentledger/contentledger/services/validator/internal/state"
	"github.com/contentledger/contentledger/services/validator/internal/storage"
	"github.com/contentledger/contentledger/services/validator/internal/transport"
)

// What the configuration views (/v1/config/osgi/*) say of Config beyond
// its struct tags: each setting's component and risk, and the tunables the
// contract, the ADRs and the architecture name.

// configPrefix is the environment prefix of the validator's settings.
const configPrefix = EnvPrefix + "_"

// describeSettings describes every setting of cfg; the defaults that depend
// on the mode are cfg.Mode's.
func describeSettings(cfg Config) []settings.Setting {
	confirmations, wait := modeDefaults(cfg.Mode)
	pipe := pipeline.DefaultConfig()
	bin := pipeline.BinariesConfig{}.WithDefaults()
	return settings.Describe(cfg, settings.Options{
		Prefix:   configPrefix,
		Classify: settingClass,
		Secrets: []string{"AUTH_TOKEN", "SUBMIT_TOKENS", "OPS_READ_TOKENS", "OPERATOR_TOKENS", "MOCK_TOKENS",
			"NATS_PASSWORD", "NATS_TOKEN"},
		URLs:  []string{"IPFS_GATEWAY", "IPFS_PUBLIC_GATEWAY", "NATS_URL", "PUBLIC_URL", "CHAT_URL"},
		Enums: map[string][]string{"MODE": {string(Mock), string(Testnet), string(Mainnet)}, "LOG_LEVEL": logging.Levels()},
		Defaults: withHTTPDefaults(map[string]string{"CONFIRMATIONS": strconv.FormatUint(confirmations, 10), "PAYMENT_WAIT": wait.String(),
			"EPOCH_MAX_AHEAD": strconv.Itoa(epoch.DefaultMaxAhead), "HOLD_PER_WALLET": strconv.Itoa(pipe.HoldPerWallet),
			"HOLD_PER_CLIENT": strconv.Itoa(pipe.HoldPerClient), "HOLD_BYTES": strconv.Itoa(pipe.HoldBytes),
			"CHAIN_STATUS_STALE": payments.DefaultStatusStale.String(), "PEER_MAX_FRAME_BYTES": strconv.Itoa(transport.DefaultMaxFrameSize),
			"MAX_SNAPSHOT_BYTES": strconv.FormatInt(transport.DefaultMaxSnapshotSize, 10), "MAX_BATCH_BYTES": strconv.Itoa(pipe.MaxBatchBytes),
			"GC_SIZE_DELTA": strconv.FormatUint(pipe.GcSizeDelta, 10), "GC_STEP_BYTES": strconv.FormatUint(pipe.GcStepBytes, 10),
			"GC_RETRY_COUNT": strconv.Itoa(pipe.GcRetryCount), "GC_FORCE_TIMEOUT": pipe.GcForceTimeout.String(),
			"GC_MEMORY_THRESHOLD": strconv.FormatFloat(100*pipe.GcMemoryThreshold, 'g', -1, 64),
			"CACHE_BYTES":         strconv.Itoa(storage.DefaultCacheSize), "MEMTABLE_BYTES": strconv.Itoa(storage.DefaultMemTableSize),
			"BLOB_MAX_BYTES": strconv.FormatInt(bin.MaxBlobBytes, 10), "BLOB_TIMEOUT": blobgateway.DefaultReadTimeout.String(),
			"INTENT_TTL": bin.IntentTTL.String(), "INTENT_RETENTION": bin.IntentRetention.String(),
			"INTENTS_PER_WALLET":   strconv.Itoa(bin.MaxOpenPerWallet),
			"HEAD_REPORT_INTERVAL": headreport.DefaultInterval.String(),
			"CHAT_TIMEOUT":         chat.DefaultTimeout.String(), "CHAT_MAX_ROUNDS": strconv.Itoa(chat.DefaultMaxRounds),
			"CHAT_MAX_TOOL_RESULT_BYTES":  strconv.Itoa(chat.DefaultMaxToolResultBytes),
			"CHAT_MAX_CONVERSATION_BYTES": strconv.Itoa(chat.DefaultMaxConversationBytes)}),
	})
}

// withHTTPDefaults adds the defaults of the HTTP server settings, which are
// pkg/httpserver's (a zero in the environment takes them).
func withHTTPDefaults(defaults map[string]string) map[string]string {
	d := httpserver.Config{}.WithDefaults()
	defaults["HTTP_READ_HEADER_TIMEOUT"] = d.ReadHeaderTimeout.String()
	defaults["HTTP_READ_TIMEOUT"] = d.ReadTimeout.String()
	defaults["HTTP_WRITE_TIMEOUT"] = d.WriteTimeout.String()
	defaults["HTTP_IDLE_TIMEOUT"] = d.IdleTimeout.String()
	defaults["HTTP_MAX_HEADER_BYTES"] = strconv.Itoa(d.MaxHeaderBytes)
	defaults["HTTP_MAX_BODY_BYTES"] = strconv.FormatInt(d.MaxBodyBytes, 10)
	defaults["HTTP_MAX_CONNS"] = strconv.Itoa(d.MaxConns)
	defaults["HTTP_MAX_CONNS_PER_CLIENT"] = strconv.Itoa(d.MaxConnsPerClient)
	defaults["FORWARDED_HEADER"] = d.ForwardedHeader
	return defaults
}

// settingClass is the component a setting belongs to and the risk of
// changing it: high where a wrong value loses data, splits or stalls the
// cluster, or opens it; medium where it changes throughput or latency
// noticeably; low otherwise. ok is false for a name it does not know.
func settingClass(name string) (component, risk string, ok bool) {
	switch name {
	case "MODE", "NODE_ID", "CLUSTER_ID", "DATA_DIR":
		return "node", "high", true
	case "NO_SYNC":
		return "storage", "high", true
	case "CACHE_BYTES", "MEMTABLE_BYTES":
		return "storage", "medium", true
	case "HTTP_ADDR", "DEBUG_ADDR":
		return "api", "medium", true
	case "LOG_LEVEL":
		return "node", "low", true
	case "AUTH_TOKEN", "SUBMIT_TOKENS", "OPS_READ_TOKENS", "OPERATOR_TOKENS", "MOCK_TOKENS", "TOKENS_FILE", "OPEN_OPS_READ":
		return "api", "high", true
	case "OPERATOR_RATE":
		return "api", "medium", true
	// What this validator advertises and reports (docs/adr/0038): neither
	// changes what the cluster stores.
	case "PUBLIC_URL", "HEAD_REPORT_INTERVAL":
		return "api", "low", true
	case "RATE_PER_IP", "RATE_PER_WALLET":
		return "api", "medium", true
	// The HTTP servers (pkg/httpserver): trusting a proxy hands it the
	// client identity every limit counts by; TLS opens or closes the port
	// to plain clients.
	case "TRUSTED_PROXIES", "FORWARDED_HEADER", "HTTP_TLS_CERT", "HTTP_TLS_KEY":
		return "api", "high", true
	case "HTTP_READ_HEADER_TIMEOUT", "HTTP_READ_TIMEOUT", "HTTP_WRITE_TIMEOUT", "HTTP_IDLE_TIMEOUT", "HTTP_MAX_HEADER_BYTES",
		"HTTP_MAX_BODY_BYTES", "HTTP_MAX_CONNS", "HTTP_MAX_CONNS_PER_CLIENT":
		return "api", "medium", true
	case "PEER_ADDR", "INITIAL_CLUSTER", "JOIN", "PEER_TLS_CERT", "PEER_TLS_KEY", "PEER_TLS_CA", "PEER_PLAINTEXT":
		return "raft", "high", true
	// Too small a frame limit stalls replication, too small a snapshot
	// limit leaves a lagging validator no way to catch up, and peers that
	// disagree on the frame limit close each other's connections.
	case "PEER_MAX_FRAME_BYTES", "MAX_SNAPSHOT_BYTES":
		return "raft", "high", true
	case "TICK_INTERVAL", "SNAPSHOT_ENTRIES", "COMPACTION_MARGIN", "LOG_TRUNCATION":
		return "raft", "medium", true
	case "CHAIN_ID", "CONTRACT_ADDRESS", "CONFIRMATIONS":
		return "chain", "high", true
	case "USDC_ADDRESS":
		return "chain", "medium", true
	case "NATS_URL", "PAYMENT_STREAM", "WATCHER_BUCKET":
		return "chain", "high", true
	// Who this validator is to NATS, and how it checks the server
	// (ADR 0029): a wrong value cuts the payment feed.
	case "NATS_CREDS", "NATS_NKEY", "NATS_USER", "NATS_PASSWORD", "NATS_TOKEN", "NATS_TLS_CA", "NATS_TLS_CERT", "NATS_TLS_KEY",
		"EPOCH_MAX_AHEAD":
		return "chain", "high", true
	case "PAYMENT_WAIT", "CHAIN_STATUS_STALE":
		return "chain", "medium", true
	case "GC_SIZE_DELTA", "GC_OFF", "GC_STEP_BYTES", "GC_RETRY_COUNT", "GC_FORCE_TIMEOUT", "GC_MEMORY_THRESHOLD":
		return "gc", "medium", true
	case "NATS_EVENTS", "NATS_EVENTS_STREAM", "NATS_EVENTS_MAX_MSGS", "NATS_EVENTS_MAX_BYTES", "NATS_EVENTS_REPLICAS":
		return "events", "high", true
	case "NATS_EVENTS_DUPLICATES":
		return "events", "medium", true
	case "CONTENT_ROOT":
		return "content", "high", true
	case "MAX_MESSAGE_BYTES":
		return "content", "medium", true
	case "EPOCH_LENGTH":
		return "pipeline", "high", true
	case "MAX_PENDING", "MAX_BATCH", "MAX_BATCH_BYTES", "MICRO_BATCH", "MICRO_BATCH_BYTES", "VERIFIERS", "CLASS_AGING", "MAX_PENDING_MESSAGES",
		"HOLD_PER_WALLET", "HOLD_PER_CLIENT", "HOLD_BYTES":
		return "pipeline", "medium", true
	case "EVENTS_RETENTION", "EVENTS_RETENTION_COUNT": // the leader's values apply to every validator
		return "events", "high", true
	case "EVENTS_STREAM_PER_IP", "EVENTS_STREAM_RATE", "EVENTS_STREAM_QUEUE", "EVENTS_KEEPALIVE":
		return "events", "medium", true
	case "IPFS_GATEWAY_CHECK":
		return "blobstore", "low", true
	// Uploads are checked, and /api/blob reads, through IPFS_GATEWAY: a
	// wrong one fails them (never the ledger).
	case "IPFS_GATEWAY", "IPFS_PUBLIC_GATEWAY", "BLOB_MAX_BYTES", "BLOB_TIMEOUT", "INTENT_TTL", "INTENT_RETENTION", "INTENTS_PER_WALLET":
		return "blobstore", "medium", true
	// The operator assistant: its endpoint receives what the ops-read
	// lane shows, and its key; the rest bounds what it spends.
	case "CHAT_URL", "CHAT_KEY_FILE":
		return "chat", "high", true
	case "CHAT_RATE", "CHAT_TIMEOUT", "CHAT_MAX_ROUNDS", "CHAT_MAX_TOOL_RESULT_BYTES", "CHAT_MAX_CONVERSATION_BYTES":
		return "chat", "medium", true
	case "CHAT_MODEL":
		return "chat", "low", true
	}
	return "", "", false
}

// tunables are the tunables the contract, the ADRs (docs/adr) and the
// architecture (docs/architecture.md) name, each with its origin: which a
// setting covers, which are fixed in code, and which have nothing to tune
// yet.
func tunables() []api.Tunable {
	return []api.Tunable{
		{Name: "max_pending_messages", Origin: "contract", Status: "configurable", Key: configPrefix + "MAX_PENDING_MESSAGES"},
		{Name: "epoch length", Origin: "ADR 0022", Status: "configurable", Key: configPrefix + "EPOCH_LENGTH"},
		{Name: "message size limit", Origin: "ADR 0004", Status: "configurable", Key: configPrefix + "MAX_MESSAGE_BYTES"},
		{Name: "content_root", Origin: "ADR 0004", Status: "configurable", Key: configPrefix + "CONTENT_ROOT"},
		{Name: "payment wait", Origin: "ADR 0007", Status: "configurable", Key: configPrefix + "PAYMENT_WAIT"},
		{Name: "required confirmations", Origin: "ADR 0007", Status: "configurable", Key: configPrefix + "CONFIRMATIONS"},
		{Name: "GC debt limit", Origin: "ADR 0011", Status: "fixed", Value: api.DebtString(state.DefaultDebtLimitMicros),
			Note: "the default limit; POST /v1/gc/account/{wallet}/set-limit sets one wallet's"},
		{Name: "GC debt per deleted MB", Origin: "ADR 0011", Status: "fixed", Value: "0.10", Note: "at least 1 MB per delete"},
		{Name: "retained segment generations", Origin: "contract", Status: "fixed", Value: strconv.Itoa(segments.RetainedGenerations),
			Note: "fixed by the contract"},
		{Name: "TAR file target size", Origin: "docs/architecture.md", Status: "fixed", Value: strconv.Itoa(segments.DefaultTarTargetBytes)},
		{Name: "Pebble block cache", Origin: "docs/architecture.md", Status: "configurable", Key: configPrefix + "CACHE_BYTES"},
		{Name: "Pebble memtable", Origin: "docs/architecture.md", Status: "configurable", Key: configPrefix + "MEMTABLE_BYTES"},
		{Name: "gcSizeDeltaEstimation", Origin: "contract", Status: "configurable", Key: configPrefix + "GC_SIZE_DELTA"},
		{Name: "retryCount", Origin: "contract", Status: "configurable", Key: configPrefix + "GC_RETRY_COUNT"},
		{Name: "forceTimeout", Origin: "contract", Status: "configurable", Key: configPrefix + "GC_FORCE_TIMEOUT"},
		{Name: "memoryThreshold", Origin: "contract", Status: "configurable", Key: configPrefix + "GC_MEMORY_THRESHOLD",
			Note: "in percent of GOMEMLIMIT, else the cgroup's memory.max, else the host's memory (ADR 0033)"},
		{Name: "snapshot size limit", Origin: "ADR 0032", Status: "configurable", Key: configPrefix + "MAX_SNAPSHOT_BYTES",
			Note: "snapshots stream from disk to disk; " + configPrefix + "PEER_MAX_FRAME_BYTES bounds raft messages only"},
		{Name: "event history window", Origin: "ADR 0023", Status: "configurable", Key: configPrefix + "EVENTS_RETENTION",
			Note: "with " + configPrefix + "EVENTS_RETENTION_COUNT; the leader's values apply on every validator"},
	}
}
