package app

import (
	"cmp"
	"fmt"
	"net/http"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/payment"
	"github.com/contentledger/contentledger/pkg/proposal"
	"github.com/contentledger/contentledger/pkg/signing"
	httpapi "github.com/contentledger/contentledger/services/validator/internal/api"
	"github.com/contentledger/contentledger/services/validator/internal/blobgateway"
	"github.com/contentledger/contentledger/services/validator/internal/chat"
	"github.com/contentledger/contentledger/services/validator/internal/headreport"
	"github.com/contentledger/contentledger/services/validator/internal/metrics"
	"github.com/contentledger/contentledger/services/validator/internal/payments"
	"github.com/contentledger/contentledger/services/validator/internal/pipeline"
	"github.com/contentledger/contentledger/services/validator/internal/rate"
	"github.com/contentledger/contentledger/services/validator/internal/segments"
	"github.com/contentledger/contentledger/services/validator/internal/ui"
)

// The configuration of each part, from Config and the parts built before
// it.

// domain is the EIP-712 signing domain of proposals: the chain and the
// payment contract.
func (c Config) domain() signing.Domain {
	return signing.Domain{ChainID: c.ChainID, VerifyingContract: common.HexToAddress(c.ContractAddress)}
}

func (v *validator) pipelineConfig() pipeline.Config {
	cfg := v.cfg
	p := pipeline.DefaultConfig()
	p.Events, p.Now = v.opsEvents, v.now
	p.VerifyPayments = cfg.VerifiesPayments()
	d := cfg.domain()
	p.Domain, p.Contract, p.ChainID = d, d.VerifyingContract, cfg.ChainID
	p.PaymentWait, p.MaxPending, p.MaxBatch, p.MaxPendingMessages = cfg.PaymentWait, cfg.MaxPending, cfg.MaxBatch, cfg.MaxPendingMessages
	p.MaxBatchBytes = cfg.maxBatchBytes()
	p.GcSizeDelta = cmp.Or(cfg.GcSizeDelta, p.GcSizeDelta)
	if cfg.GcOff {
		p.GcSizeDelta = 0
	}
	p.GcStepBytes = cmp.Or(cfg.GcStepBytes, p.GcStepBytes)
	p.GcRetryCount = cmp.Or(cfg.GcRetryCount, p.GcRetryCount)
	p.GcForceTimeout = cmp.Or(cfg.GcForceTimeout, p.GcForceTimeout)
	if cfg.GcMemoryThreshold != 0 {
		p.GcMemoryThreshold = cfg.GcMemoryThreshold / 100
	}
	p.EventWindow, p.EventMax = cfg.EventsRetention, cfg.EventsRetentionCount
	p.ClassAging, p.MicroBatch, p.MicroBatchBytes = cfg.ClassAging, cfg.MicroBatch, cfg.MicroBatchBytes
	p.HoldPerWallet = cmp.Or(cfg.HoldPerWallet, p.HoldPerWallet)
	p.HoldPerClient = cmp.Or(cfg.HoldPerClient, p.HoldPerClient)
	p.HoldBytes = cmp.Or(cfg.HoldBytes, p.HoldBytes)
	p.Confirmations = cfg.Confirmations
	if v.chainStatus != nil {
		p.Feed = &chainFeed{status: v.chainStatus, follower: v.follower}
	}
	if cfg.Verifiers > 0 {
		p.Verifiers = cfg.Verifiers
	}
	if cfg.RatePerWallet > 0 {
		p.WalletLimiter = rate.NewLimiter(cfg.RatePerWallet)
	}
	return p
}

// eventHub is the hub of an SSE stream route (events.Hub): the route for
// the API, its figures for /metrics.
type eventHub interface {
	httpapi.EventStreams
	metrics.EventStream
}

// apiHandler builds the HTTP API over the parts built so far.
func (v *validator) apiHandler(streams, opsStreams eventHub, gateway *blobgateway.Checker) (http.Handler, error) {
	cfg := v.cfg
	form := proposal.DefaultOptions()
	form.ContentRoot, form.MaxMessageBytes, form.RequireTxHash = cfg.ContentRoot, cfg.MaxMessageBytes, cfg.VerifiesPayments()
	apiCfg := httpapi.Config{NodeID: cfg.NodeID, DataDir: cfg.DataDir, Access: v.access, Form: form,
		Blockchain: blockchainConfig(cfg), Version: v.version, Clients: v.clients, MaxBodyBytes: cfg.HTTPMaxBodyBytes,
		PublicGateway: cfg.PublicGateway(), PublicURL: cfg.PublicURL,
		MaxBlobBytes: cfg.Binaries().WithDefaults().MaxBlobBytes}
	if cfg.RatePerIP > 0 {
		apiCfg.IPLimiter = rate.NewLimiter(cfg.RatePerIP)
	}
	if cfg.OperatorRate > 0 {
		apiCfg.OperatorLimiter = rate.NewLimiter(cfg.OperatorRate)
	}
	if cfg.ChatRate > 0 {
		apiCfg.ChatLimiter = rate.NewLimiter(cfg.ChatRate)
	}
	// A nil pointer in an interface would not be nil: the parts absent in
	// MOCK mode are set only when present.
	var debts pipeline.DebtIndex
	deps := httpapi.Deps{Proposals: v.pipe, Content: v.machine, Cluster: v.clusterView,
		Database: v.db, RaftLog: v.node, NATS: v.natsClients(), EventStreams: streams, EventPublisher: v.publishing,
		OpsEvents: v.opsEvents, OpsEventStreams: opsStreams, Settings: describeSettings(cfg), Tunables: tunables(),
		Transactions: payments.NewTransactions(payments.TransactionsConfig{NodeID: cfg.NodeID, Records: v.machine,
			Index: v.index, Chain: v.chainStatus, Now: v.now})}
	collect := metrics.Sources{NodeID: cfg.NodeID, Mode: string(cfg.Mode), Version: v.version, Raft: v.node, Leadership: v.leadership,
		State: v.machine, Pipeline: v.pipe, Peers: v.peers, DB: v.db,
		EventStreams: map[string]metrics.EventStream{"/v1/events/stream": streams, "/v1/ops/events/stream": opsStreams}}
	if v.publishing.pub != nil {
		collect.Publisher = v.publishing.pub
	}
	deps.Probes = map[string]httpapi.Probe{"wal": v.db.ProbeWAL, "state": v.machine.Probe, "raft": v.node.Probe, "peers": v.peers.ProbeQuorum}
	if v.index != nil {
		debts, deps.PaymentIndex, collect.Payments = v.index, v.index, v.index
		collect.Epochs = v.clock
		deps.ChainStatus = v.chainStatus
		deps.Probes["nats"], deps.Probes["chain"] = v.follower.Probe, v.chainStatus.Probe
	}
	if gateway != nil {
		deps.Gateway, deps.Probes["gateway"] = gateway, gateway.Probe
	}
	deps.Binaries, deps.Blobs = v.binaries, v.machine
	if v.blobReader != nil {
		deps.BlobReader = v.blobReader
	}
	deps.GC = pipeline.NewGC(v.pipe, debts)
	deps.Compactions = pipeline.NewCompactions(v.pipe)
	deps.ClientRegistrations, deps.Heads, deps.HeadReports = pipeline.NewClients(v.pipe, v.machine), v.machine, headreport.NewBook()
	deps.PublicURL = v.db.PublicURL()
	deps.Collectors = []prometheus.Collector{metrics.NewCollector(collect)}
	if cfg.Mode == Mock {
		deps.MockEpochs = v.clock
	}
	var err error
	if deps.Streams, err = v.streams(); err != nil {
		return nil, err
	}
	if deps.Segments, err = segments.New(segments.Config{NodeID: cfg.NodeID, Now: v.now}, v.machine); err != nil {
		return nil, err
	}
	assistant, err := chat.New(cfg.Chat(), v.log.Named("chat"))
	if err != nil {
		return nil, fmt.Errorf("validator: SVC_VALIDATOR_CHAT_*: %w", err)
	}
	pages := ui.Options{ChatSettings: ui.ChatSettings{URL: configPrefix + "CHAT_URL", Model: configPrefix + "CHAT_MODEL",
		KeyFile: configPrefix + "CHAT_KEY_FILE"}}
	if assistant != nil { // a nil *Assistant in the interface would not be nil
		deps.Chat, pages.ChatModel = assistant, assistant.Model()
	}
	if deps.UI, err = ui.Render(pages); err != nil {
		return nil, err
	}
	return httpapi.New(apiCfg, deps, v.log.Named("api")), nil
}

// natsClients names the validator's NATS connections: the one payment
// verification needs (none in MOCK mode), and the event publisher's own
// when the mode needs no other (see newEventPublishing).
func (v *validator) natsClients() []httpapi.NATSClient {
	var out []httpapi.NATSClient
	if v.nc != nil {
		uses := []string{httpapi.NATSUsePayments, httpapi.NATSUseChainStatus}
		if v.publishing.nc == v.nc {
			uses = append(uses, httpapi.NATSUseEvents)
		}
		out = append(out, httpapi.NATSClient{Conn: v.nc, Uses: append(uses, httpapi.NATSUseStreams)})
	}
	if v.publishing.own {
		out = append(out, httpapi.NATSClient{Conn: v.publishing.nc, Uses: []string{httpapi.NATSUseEvents, httpapi.NATSUseStreams}})
	}
	return out
}

// streams reads the JetStream streams the ledger uses, on the validator's
// NATS connection; nil (a validator without NATS) when it has none.
func (v *validator) streams() (httpapi.Streams, error) {
	nc := cmp.Or(v.nc, v.publishing.nc)
	if nc == nil {
		return nil, nil
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("validator: JetStream: %w", err)
	}
	var names []string
	if v.chainStatus != nil {
		names = append(names, v.cfg.PaymentStream)
	}
	if v.cfg.PublishesEvents() {
		names = append(names, v.cfg.eventStream().Name)
	}
	return payments.NewStreams(js, names, v.now), nil
}

// blockchainConfig is the body of /v1/blockchain/config.
func blockchainConfig(cfg Config) api.BlockchainConfig {
	d := cfg.domain()
	tokens := map[string]api.Token{}
	for _, t := range payment.Tokens {
		tok := api.Token{Index: uint8(t), Decimals: t.Decimals()}
		if t == payment.USDC && cfg.USDCAddress != "" {
			tok.Address = common.HexToAddress(cfg.USDCAddress).Hex()
		}
		tokens[t.String()] = tok
	}
	return api.BlockchainConfig{
		ContractVersion:       "blockchain.config.v1",
		Mode:                  string(cfg.Mode),
		ChainID:               cfg.ChainID,
		ContractAddress:       d.VerifyingContract.Hex(),
		PaymentsVerified:      cfg.VerifiesPayments(),
		RequiredConfirmations: cfg.Confirmations,
		Prices:                api.Prices(),
		Tokens:                tokens,
		EIP712: api.EIP712Domain{
			Name: signing.DomainName, Version: signing.DomainVersion,
			ChainID: d.ChainID, VerifyingContract: d.VerifyingContract.Hex(),
		},
		EpochLengthSeconds: uint64(cfg.EpochLength / time.Second),
		ContentRoot:        cfg.ContentRoot,
		MaxMessageBytes:    cfg.MaxMessageBytes,
	}
}
