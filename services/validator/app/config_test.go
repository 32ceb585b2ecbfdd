package app

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/pkg/proposal"
	"github.com/contentledger/contentledger/services/validator/internal/blobgateway"
	"github.com/contentledger/contentledger/services/validator/internal/consensus"
	"github.com/contentledger/contentledger/services/validator/internal/pipeline"
	"github.com/contentledger/contentledger/services/validator/internal/transport"
)

func TestParseCluster(t *testing.T) {
	got, err := ParseCluster("1=127.0.0.1:7090=http://127.0.0.1:8090, 2=10.0.0.2:7090=https://v2.example:8090/")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[1] != (Member{ID: 2, PeerAddr: "10.0.0.2:7090", APIURL: "https://v2.example:8090"}) {
		t.Fatalf("parsed %+v", got)
	}
	if m, err := ParseCluster(" "); err != nil || m != nil {
		t.Fatalf("empty: %v %v", m, err)
	}
	for _, bad := range []string{"1=a=http://x", "0=h:1=http://x", "1=h:1=http://x,1=h:2=http://y", "1=h:1=ftp://x", "1=h:1", "x=h:1=http://x"} {
		if _, err := ParseCluster(bad); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

func TestValidateNamesThisNode(t *testing.T) {
	c := Config{Mode: Mock, NodeID: 3, DataDir: "d", ContentRoot: "ledger", MaxMessageBytes: 1, EpochLength: 1, PaymentWait: 1,
		InitialCluster: "1=h:1=http://a:1,2=h:2=http://b:2"}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "does not name this node") {
		t.Fatalf("got %v", err)
	}
	c.Mode = ""
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "MODE") {
		t.Fatalf("no mode: %v", err)
	}
}

func TestValidateQueueAndLimitSettings(t *testing.T) {
	ok := Config{Mode: Mock, NodeID: 1, DataDir: "d", ContentRoot: "ledger", MaxMessageBytes: 1, EpochLength: 1, PaymentWait: 1,
		MaxPending: 1, MaxBatch: 1, MaxPendingMessages: 1, MicroBatch: 1, MicroBatchBytes: 1}
	if err := ok.Validate(); err != nil {
		t.Fatalf("a valid configuration: %v", err)
	}
	for name, edit := range map[string]func(*Config){
		"MAX_PENDING":          func(c *Config) { c.MaxPending = 0 },
		"MAX_BATCH":            func(c *Config) { c.MaxBatch = -1 },
		"MAX_PENDING_MESSAGES": func(c *Config) { c.MaxPendingMessages = 0 },
		"MICRO_BATCH":          func(c *Config) { c.MicroBatch = 0 },
		"MICRO_BATCH_BYTES":    func(c *Config) { c.MicroBatchBytes = -1 },
		"RATE_PER_IP":          func(c *Config) { c.RatePerIP = -1 },
		"RATE_PER_WALLET":      func(c *Config) { c.RatePerWallet = -0.5 },
		"VERIFIERS":            func(c *Config) { c.Verifiers = -2 },
		"CLASS_AGING":          func(c *Config) { c.ClassAging = -1 },
	} {
		c := ok
		edit(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestValidateStorageSizes: the cache and memtable sizes Pebble would not
// open with are refused at start, naming the settings and the rule.
func TestValidateStorageSizes(t *testing.T) {
	ok := Config{Mode: Mock, NodeID: 1, DataDir: "d", ContentRoot: "ledger", MaxMessageBytes: 1, EpochLength: 1, PaymentWait: 1,
		MaxPending: 1, MaxBatch: 1, MaxPendingMessages: 1, MicroBatch: 1, MicroBatchBytes: 1, CacheBytes: 64 << 20, MemTableBytes: 16 << 20}
	if err := ok.Validate(); err != nil {
		t.Fatalf("a valid configuration: %v", err)
	}
	for want, edit := range map[string]func(*Config){
		"CacheSize -1 is negative":          func(c *Config) { c.CacheBytes = -1 },
		"MemTableSize 524288 is not within": func(c *Config) { c.MemTableBytes = 512 << 10 },
		"is below 4 × MemTableSize":         func(c *Config) { c.MemTableBytes = 32 << 20 },
	} {
		c := ok
		edit(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "SVC_VALIDATOR_CACHE_BYTES or MEMTABLE_BYTES") ||
			!strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", want, err)
		}
	}
}

// TestModeDefaults: CONFIRMATIONS and PAYMENT_WAIT follow the mode unless the
// environment sets them, 0 included.
func TestModeDefaults(t *testing.T) {
	t.Setenv("SVC_VALIDATOR_CONTRACT_ADDRESS", "0x00000000000000000000000000000000000000c1")
	for _, name := range []string{"CERT", "KEY", "CA"} { // required outside MOCK; Validate does not read them
		t.Setenv("SVC_VALIDATOR_PEER_TLS_"+name, "peer."+name)
	}
	t.Setenv("SVC_VALIDATOR_NATS_TOKEN", "nats-token") // required in MAINNET
	for mode, want := range map[Mode]struct {
		confirmations uint64
		wait          time.Duration
	}{Mock: {2, 15 * time.Second}, Testnet: {3, time.Minute}, Mainnet: {12, time.Minute}} {
		t.Setenv("SVC_VALIDATOR_MODE", string(mode))
		cfg, err := LoadConfig()
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		if cfg.Confirmations != want.confirmations || cfg.PaymentWait != want.wait {
			t.Errorf("%s: confirmations %d, payment wait %s; want %d, %s", mode, cfg.Confirmations, cfg.PaymentWait, want.confirmations, want.wait)
		}
	}
	t.Setenv("SVC_VALIDATOR_CONFIRMATIONS", "0")
	t.Setenv("SVC_VALIDATOR_PAYMENT_WAIT", "30s")
	cfg, err := LoadConfig()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Confirmations != 0 || cfg.PaymentWait != 30*time.Second {
		t.Errorf("set in the environment: confirmations %d, payment wait %s; want 0, 30s", cfg.Confirmations, cfg.PaymentWait)
	}
	t.Setenv("SVC_VALIDATOR_MODE", "PRODUCTION")
	if _, err := LoadConfig(); err == nil || !strings.Contains(err.Error(), "MODE") {
		t.Errorf("an unknown mode: %v", err)
	}
}

// TestLogLevel: SVC_VALIDATOR_LOG_LEVEL is info unless set, and a value
// that is not one of the four levels refuses to start, naming the setting.
func TestLogLevel(t *testing.T) {
	t.Setenv("SVC_VALIDATOR_MODE", string(Mock))
	cfg, err := LoadConfig()
	if err != nil || cfg.LogLevel != "info" {
		t.Fatalf("unset: %q %v", cfg.LogLevel, err)
	}
	t.Setenv("SVC_VALIDATOR_LOG_LEVEL", "error")
	if cfg, err = LoadConfig(); err != nil || cfg.LogLevel != "error" {
		t.Fatalf("error: %q %v", cfg.LogLevel, err)
	}
	for _, bad := range []string{"trace", "Info", "panic"} {
		t.Setenv("SVC_VALIDATOR_LOG_LEVEL", bad)
		if _, err := LoadConfig(); err == nil || !strings.Contains(err.Error(), "SVC_VALIDATOR_LOG_LEVEL") ||
			!strings.Contains(err.Error(), "want one of debug, info, warn, error") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

// TestValidateIPFSGateway: the gateway must be an http(s) URL with a host
// that /ipfs/<cid> can be appended to, and the check interval 1s or more
// (0 takes the default); the errors name the variable and never repeat a
// password.
func TestValidateIPFSGateway(t *testing.T) {
	ok := Config{Mode: Mock, NodeID: 1, DataDir: "d", ContentRoot: "ledger", MaxMessageBytes: 1, EpochLength: 1, PaymentWait: 1,
		MaxPending: 1, MaxBatch: 1, MaxPendingMessages: 1, MicroBatch: 1, MicroBatchBytes: 1}
	for _, good := range []Config{
		{IPFSGateway: "https://ipfs.example"},
		{IPFSGateway: "http://user:secret@127.0.0.1:8080/", IPFSGatewayCheck: time.Second},
		{IPFSGatewayCheck: 5 * time.Minute},
	} {
		c := ok
		c.IPFSGateway, c.IPFSGatewayCheck = good.IPFSGateway, good.IPFSGatewayCheck
		if err := c.Validate(); err != nil {
			t.Errorf("%q every %s: %v", good.IPFSGateway, good.IPFSGatewayCheck, err)
		}
	}
	for raw, says := range map[string]string{
		"ipfs.example":                       "SVC_VALIDATOR_IPFS_GATEWAY: the scheme",
		"ftp://ipfs.example":                 "SVC_VALIDATOR_IPFS_GATEWAY: the scheme",
		"https://":                           "SVC_VALIDATOR_IPFS_GATEWAY: the URL names no host",
		"https://ipfs.example/ipfs":          "SVC_VALIDATOR_IPFS_GATEWAY: the URL ends in /ipfs",
		"https://u:secret@ipfs.example/?x=1": "SVC_VALIDATOR_IPFS_GATEWAY: the URL has a query",
	} {
		c := ok
		c.IPFSGateway = raw
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), says) || strings.Contains(err.Error(), "secret") {
			t.Errorf("%q: %v, want it to say %q", raw, err, says)
		}
	}
	for _, d := range []time.Duration{-time.Second, 500 * time.Millisecond} {
		c := ok
		c.IPFSGatewayCheck = d
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "SVC_VALIDATOR_IPFS_GATEWAY_CHECK") {
			t.Errorf("a check every %s: %v", d, err)
		}
	}

	// From the environment: no gateway by default, checked every minute
	// once one is set.
	t.Setenv("SVC_VALIDATOR_MODE", "MOCK")
	cfg, err := LoadConfig()
	if err != nil || cfg.IPFSGateway != "" || cfg.IPFSGatewayCheck != blobgateway.DefaultInterval {
		t.Fatalf("defaults: gateway %q every %s, %v", cfg.IPFSGateway, cfg.IPFSGatewayCheck, err)
	}
	t.Setenv("SVC_VALIDATOR_IPFS_GATEWAY", "gateway.example:8080")
	if _, err := LoadConfig(); err == nil || !strings.Contains(err.Error(), "SVC_VALIDATOR_IPFS_GATEWAY") {
		t.Fatalf("a gateway without a scheme: %v", err)
	}
}

// TestMainnetNeedsNATSCredentials: in MAINNET a validator without NATS
// credentials refuses to start (anyone could publish its chain feed);
// elsewhere it only warns.
func TestMainnetNeedsNATSCredentials(t *testing.T) {
	base := Config{NodeID: 1, DataDir: "d", ContentRoot: "ledger", MaxMessageBytes: 1, EpochLength: 1, PaymentWait: 1,
		MaxPending: 1, MaxBatch: 1, MaxPendingMessages: 1, MicroBatch: 1, MicroBatchBytes: 1,
		ContractAddress: "0x00000000000000000000000000000000000000c1", NATSURL: "nats://127.0.0.1:4222",
		PeerTLSCert: "c", PeerTLSKey: "k", PeerTLSCA: "ca"}
	for _, tc := range []struct {
		mode   Mode
		token  string
		refuse bool
	}{{Mainnet, "", true}, {Mainnet, "nats-token", false}, {Testnet, "", false}, {Mock, "", false}} {
		c := base
		c.Mode, c.NATSToken = tc.mode, tc.token
		err := c.Validate()
		if refused := err != nil && strings.Contains(err.Error(), "required in MAINNET"); refused != tc.refuse {
			t.Errorf("%s with token %q: %v", tc.mode, tc.token, err)
		}
	}
}

// TestValidatePeerTLS: outside MOCK the raft peer port requires mutual TLS;
// TESTNET may opt out explicitly, MAINNET may not.
func TestValidatePeerTLS(t *testing.T) {
	base := Config{NodeID: 1, DataDir: "d", ContentRoot: "ledger", MaxMessageBytes: 1, EpochLength: 1, PaymentWait: 1,
		MaxPending: 1, MaxBatch: 1, MaxPendingMessages: 1, MicroBatch: 1, MicroBatchBytes: 1,
		ContractAddress: "0x00000000000000000000000000000000000000c1", NATSURL: "nats://127.0.0.1:4222", NATSToken: "nats-token"}
	withTLS := func(c Config) Config { c.PeerTLSCert, c.PeerTLSKey, c.PeerTLSCA = "c", "k", "ca"; return c }
	plaintext := func(c Config) Config { c.PeerPlaintext = true; return c }
	for _, tc := range []struct {
		mode   Mode
		edit   func(Config) Config
		refuse string // "" when valid
	}{
		{Mock, func(c Config) Config { return c }, ""},
		{Mock, withTLS, ""},
		{Testnet, withTLS, ""},
		{Mainnet, withTLS, ""},
		{Testnet, func(c Config) Config { return c }, "SVC_VALIDATOR_PEER_PLAINTEXT=true"},
		{Testnet, plaintext, ""},
		{Mainnet, func(c Config) Config { return c }, "requires mutual TLS in MAINNET"},
		{Mainnet, plaintext, "SVC_VALIDATOR_PEER_PLAINTEXT is refused in MAINNET"},
		{Testnet, func(c Config) Config { return plaintext(withTLS(c)) }, "contradicts"},
	} {
		c := base
		c.Mode = tc.mode
		c = tc.edit(c)
		err := c.Validate()
		if tc.refuse == "" && err != nil || tc.refuse != "" && (err == nil || !strings.Contains(err.Error(), tc.refuse)) {
			t.Errorf("%s tls=%v plaintext=%v: %v, want %q", tc.mode, c.PeerTLS(), c.PeerPlaintext, err, tc.refuse)
		}
	}
}

// TestValidatePeerLimits: the transport's limits are checked at start with
// the variable's name, and a frame limit that cannot carry the largest
// batch the pipeline seals is refused with the size it needs.
func TestValidatePeerLimits(t *testing.T) {
	ok := Config{Mode: Mock, NodeID: 1, DataDir: "d", ContentRoot: "ledger", MaxMessageBytes: 1 << 20, EpochLength: 1, PaymentWait: 1,
		MaxPending: 1, MaxBatch: 512, MaxPendingMessages: 1, MicroBatch: 1, MicroBatchBytes: 1}
	if err := ok.Validate(); err != nil {
		t.Fatalf("the defaults (0: the transport's): %v", err)
	}
	if got := ok.raftMaxSizePerMsg(); got != consensus.DefaultMaxSizePerMsg {
		t.Errorf("raft's append messages with the default frame: %d bytes, want raft's default %d", got, consensus.DefaultMaxSizePerMsg)
	}
	small := ok
	small.MaxBatch, small.MaxMessageBytes = 8, 16<<10
	need := small.largestEntry() + raftEnvelope
	small.PeerMaxFrameBytes = int(need)
	if err := small.Validate(); err != nil {
		t.Fatalf("a %d-byte frame for 8 proposals of 16 KiB: %v", need, err)
	}
	for name, tc := range map[string]struct {
		edit func(*Config)
		says string
	}{
		"frame below the largest entry": {func(c *Config) { c.PeerMaxFrameBytes-- }, fmt.Sprintf("set it to %d or more", need)},
		"more proposals per batch":      {func(c *Config) { c.MaxBatch = 16 }, "SVC_VALIDATOR_MAX_BATCH 16"},
		"the default batch":             {func(c *Config) { c.MaxBatch, c.MaxMessageBytes = 512, 1<<20 }, "SVC_VALIDATOR_PEER_MAX_FRAME_BYTES"},
		"frame below the transport's":   {func(c *Config) { c.PeerMaxFrameBytes = transport.MinFrameSize - 1 }, "must be within"},
		"frame above the transport's":   {func(c *Config) { c.PeerMaxFrameBytes = transport.MaxFrameSizeLimit + 1 }, "must be within"},
		"negative frame":                {func(c *Config) { c.PeerMaxFrameBytes = -1 }, "must not be negative"},
		"negative snapshot limit":       {func(c *Config) { c.MaxSnapshotBytes = -1 }, "MAX_SNAPSHOT_BYTES"},
	} {
		c := small
		tc.edit(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v, want it to say %q", name, err, tc.says)
		}
	}
}

// TestLargestEntryFitsItsFrame holds largestEntry and raftMaxSizePerMsg to
// what raft really sends: the largest batch a configuration allows, with
// long fields and a payment in every item, marshaled as the append message
// that carries it, fits the smallest frame Validate accepts; so does an
// append message raft fills with tiny entries up to its size limit.
func TestLargestEntryFitsItsFrame(t *testing.T) {
	for _, c := range []Config{
		{MaxBatch: 8, MaxMessageBytes: 16 << 10},
		{MaxBatch: 512, MaxMessageBytes: 1 << 20},
		{MaxBatch: 1, MaxMessageBytes: 1},
		{MaxBatch: 64, MaxMessageBytes: 100 << 10},
	} {
		c.PeerMaxFrameBytes = int(c.largestEntry() + raftEnvelope)
		batch := &ledgerpb.ProposalBatch{SealedAtMs: 1 << 62, Epoch: 1 << 62, EventWindowMs: 1 << 62, EventMax: 1 << 62}
		left := max(min(c.MaxBatch*c.MaxMessageBytes, pipeline.DefaultConfig().MaxBatchBytes), c.MaxMessageBytes)
		for range c.MaxBatch {
			n := min(c.MaxMessageBytes, left)
			left -= n
			batch.Items = append(batch.Items, longBatchItem(n))
		}
		data, err := proto.Marshal(&ledgerpb.Entry{Op: &ledgerpb.Entry_Batch{Batch: batch}})
		if err != nil {
			t.Fatal(err)
		}
		app := appendMessage(&raftpb.Entry{Term: proto.Uint64(1 << 62), Index: proto.Uint64(1 << 62), Type: raftpb.EntryNormal.Enum(), Data: data})
		if size := proto.Size(app); size > c.PeerMaxFrameBytes {
			t.Errorf("MAX_BATCH %d of %d bytes: the entry's append message is %d bytes, the frame %d", c.MaxBatch, c.MaxMessageBytes, size, c.PeerMaxFrameBytes)
		}
		// One proposal alone: its message and a form's other fields at their
		// longest (a path filling them).
		single := longBatchItem(c.MaxMessageBytes)
		single.Proposal.Path = strings.Repeat("p", proposal.FormFieldsBytes-1<<10)
		data, err = proto.Marshal(&ledgerpb.Entry{Op: &ledgerpb.Entry_Batch{Batch: &ledgerpb.ProposalBatch{SealedAtMs: 1 << 62, Items: []*ledgerpb.BatchItem{single}}}})
		if err != nil {
			t.Fatal(err)
		}
		app = appendMessage(&raftpb.Entry{Term: proto.Uint64(1 << 62), Index: proto.Uint64(1 << 62), Type: raftpb.EntryNormal.Enum(), Data: data})
		if size := proto.Size(app); size > c.PeerMaxFrameBytes {
			t.Errorf("one proposal of %d bytes with a long path: its append message is %d bytes, the frame %d", c.MaxMessageBytes, size, c.PeerMaxFrameBytes)
		}
		// raft adds entries while their sizes sum to at most MaxSizePerMsg.
		tiny := appendMessage()
		for sum := uint64(0); ; {
			e := &raftpb.Entry{Term: proto.Uint64(1), Index: proto.Uint64(1), Type: raftpb.EntryNormal.Enum()}
			if sum += uint64(proto.Size(e)); sum > c.raftMaxSizePerMsg() {
				break
			}
			tiny.Entries = append(tiny.Entries, e)
		}
		if size := proto.Size(tiny); size > c.PeerMaxFrameBytes {
			t.Errorf("frame %d: an append message of %d empty entries is %d bytes", c.PeerMaxFrameBytes, len(tiny.Entries), size)
		}
	}
}

// appendMessage is a MsgApp of entries with every other field at its
// longest.
func appendMessage(entries ...*raftpb.Entry) *raftpb.Message {
	long := proto.Uint64(1 << 62)
	return &raftpb.Message{Type: raftpb.MsgApp.Enum(), To: long, From: long, Term: long, LogTerm: long, Index: long, Commit: long,
		Entries: entries}
}

// longBatchItem is a committed batch item with a message of n bytes, a
// path of 100 bytes and every other field at its longest.
func longBatchItem(n int) *ledgerpb.BatchItem {
	b32 := bytes.Repeat([]byte{0xff}, 32)
	b20 := bytes.Repeat([]byte{0xff}, 20)
	return &ledgerpb.BatchItem{
		Proposal: &ledgerpb.Proposal{Id: b32, Action: ledgerpb.Action_ACTION_DELETE, Wallet: b20, Organization: strings.Repeat("o", 32),
			Path: strings.Repeat("p", 100), ContentType: strings.Repeat("c", 32), Tier: ledgerpb.Tier_TIER_PRIORITY,
			Message: make([]byte, n), Signature: make([]byte, 65), EthereumTxHash: b32, AcceptedAtMs: 1 << 62, Digest: b32, Epoch: 1 << 62},
		Payment: &ledgerpb.Payment{ChainId: 1 << 62, Contract: b20, ProposalId: b32, Payer: b20, Amount: b32, Tier: ledgerpb.Tier_TIER_PRIORITY,
			Token: ledgerpb.PaymentToken_PAYMENT_TOKEN_USDC, PreferredValidator: b20, PaidAt: 1 << 62, TxHash: b32, BlockHash: b32,
			BlockNumber: 1 << 62, LogIndex: 1 << 31, Removed: true, Confirmations: 1 << 62},
		Rejection: strings.Repeat("r", 48),
	}
}

// TestProposalAllowance: a batch item's fields other than its message, at
// their longest with a path of 100 bytes, take well under the allowance.
func TestProposalAllowance(t *testing.T) {
	if size := proto.Size(longBatchItem(0)); size > proposalAllowance*3/4 {
		t.Fatalf("a batch item without its message is %d bytes, the allowance %d", size, proposalAllowance)
	}
}
