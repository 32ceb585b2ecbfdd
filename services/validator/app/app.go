// Package app runs one validator: Pebble storage, the raft node, the state
// machine, the payment index fed from NATS, the proposal pipeline and the
// HTTP API. cmd/validator, tools/devnet and the tests all start it through
// Run, so they run the same code.
package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/buildinfo"
	"github.com/contentledger/contentledger/pkg/payment"
	"github.com/contentledger/contentledger/pkg/proposal"
	"github.com/contentledger/contentledger/pkg/signing"
	httpapi "github.com/contentledger/contentledger/services/validator/internal/api"
	"github.com/contentledger/contentledger/services/validator/internal/blobgateway"
	"github.com/contentledger/contentledger/services/validator/internal/consensus"
	"github.com/contentledger/contentledger/services/validator/internal/consensus/cluster"
	"github.com/contentledger/contentledger/services/validator/internal/epoch"
	"github.com/contentledger/contentledger/services/validator/internal/events"
	"github.com/contentledger/contentledger/services/validator/internal/metrics"
	"github.com/contentledger/contentledger/services/validator/internal/opsevents"
	"github.com/contentledger/contentledger/services/validator/internal/payments"
	"github.com/contentledger/contentledger/services/validator/internal/pipeline"
	"github.com/contentledger/contentledger/services/validator/internal/rate"
	"github.com/contentledger/contentledger/services/validator/internal/segments"
	"github.com/contentledger/contentledger/services/validator/internal/state"
	"github.com/contentledger/contentledger/services/validator/internal/storage"
	"github.com/contentledger/contentledger/services/validator/internal/transport"
	"github.com/contentledger/contentledger/services/validator/internal/ui"
)

// Run starts the validator and serves until ctx ends, then stops every part
// in reverse order. ready, when not nil, receives the HTTP address once the
// listener is open.
func Run(ctx context.Context, cfg Config, log *zap.Logger, ready chan<- string) (err error) {
	if err := cfg.Validate(); err != nil {
		return err
	}
	log = log.With(zap.Uint64("node", cfg.NodeID))
	version := buildinfo.Version()

	db, err := storage.Open(storage.Options{Dir: cfg.DataDir, NoSync: cfg.NoSync, Logger: log.Named("pebble")})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, db.Close()) }()

	machine, err := state.Open(db, state.Options{Logger: log.Named("state")})
	if err != nil {
		return err
	}
	// The HTTP listener opens first, so that a single node's address book
	// entry carries the address it really serves on.
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("validator: listen on %s: %w", cfg.HTTPAddr, err)
	}
	defer ln.Close()
	// Every validator runs the peer transport, so a single node can grow
	// into a cluster through membership changes.
	tlsConfig, err := peerTLS(cfg)
	if err != nil {
		return err
	}
	peers, err := transport.New(transport.Config{NodeID: cfg.NodeID, ClusterID: cfg.ClusterID, ListenAddr: cfg.PeerAddr,
		TLS: tlsConfig, Logger: log.Named("transport")})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, peers.Close()) }()
	initial, _ := ParseCluster(cfg.InitialCluster) // validated above
	if len(initial) == 0 {
		initial = []Member{{ID: cfg.NodeID, PeerAddr: peers.Addr(), APIURL: "http://" + ln.Addr().String()}}
	}
	peerIDs := make([]uint64, len(initial))
	bootstrap := make([]api.Member, len(initial)) // for the membership, which names them
	for i, m := range initial {
		peerIDs[i] = m.ID
		bootstrap[i] = api.Member{ID: m.ID, PeerAddr: m.PeerAddr, APIURL: m.APIURL}
	}
	// Both ends must know each other before the first message: a node
	// refuses connections from senders it has not registered.
	for _, m := range initial {
		if m.ID != cfg.NodeID {
			if err := peers.AddPeer(m.ID, m.PeerAddr); err != nil {
				return err
			}
		}
	}
	node, err := consensus.Start(consensus.Config{
		ID:                 cfg.NodeID,
		Peers:              peerIDs,
		Join:               cfg.Join,
		TickInterval:       cfg.TickInterval,
		SnapshotEntries:    cfg.SnapshotEntries,
		CompactionMargin:   cfg.CompactionMargin,
		TruncationInterval: cfg.LogTruncation,
		Logger:             log.Named("raft"),
	}, db, machine, peers)
	if err != nil {
		return err
	}
	defer node.Stop() // before the transport closes: deferred calls run last-in first-out
	if err := peers.Start(node); err != nil {
		return err
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	var (
		nc       *nats.Conn
		js       jetstream.JetStream
		index    *payments.Index
		paySrc   pipeline.Payments
		follower *payments.Follower
		// chainStatus is the chain-watcher's status: observability, kept
		// in memory (none in MOCK mode, where no watcher runs).
		chainStatus *payments.ChainStatus
	)
	if cfg.VerifiesPayments() {
		nc, err = nats.Connect(cfg.NATSURL, nats.Name(fmt.Sprintf("validator-%d", cfg.NodeID)),
			nats.MaxReconnects(-1), nats.RetryOnFailedConnect(true))
		if err != nil {
			return fmt.Errorf("validator: NATS at %s: %w", cfg.NATSURL, err)
		}
		defer nc.Close()
		if js, err = jetstream.New(nc); err != nil {
			return fmt.Errorf("validator: JetStream: %w", err)
		}
		index = payments.NewIndex()
		// The index also tells the pipeline which payments a reorg took
		// back (pipeline.Retractions, asserted below).
		paySrc = index
		follower = &payments.Follower{JS: js, Stream: cfg.PaymentStream, ChainID: cfg.ChainID, Index: index, Log: log.Named("payments")}
		chainStatus = &payments.ChainStatus{JS: js, ChainID: cfg.ChainID, Bucket: cfg.WatcherBucket, Log: log.Named("chainstatus")}
	}
	publishing, err := newEventPublishing(cfg, nc, machine, node, log.Named("eventpub"))
	if err != nil {
		return err
	}
	defer publishing.close()

	now := time.Now
	clock := epoch.NewChain(cfg.EpochLength, now)
	if cfg.Mode == Mock {
		clock = epoch.NewMock(cfg.EpochLength, now)
	}
	if follower != nil {
		follower.Epochs = clock // the chain-watcher's epoch updates replace the wall-clock estimate
	}
	contract := common.HexToAddress(cfg.ContractAddress)
	domain := signing.Domain{ChainID: cfg.ChainID, VerifyingContract: contract}

	opsEvents := opsevents.New(opsevents.Options{Now: now})
	pcfg := pipeline.DefaultConfig()
	pcfg.Events = opsEvents
	pcfg.VerifyPayments = cfg.VerifiesPayments()
	pcfg.Domain, pcfg.Contract, pcfg.ChainID = domain, contract, cfg.ChainID
	pcfg.PaymentWait, pcfg.MaxPending, pcfg.MaxBatch, pcfg.MaxPendingMessages, pcfg.Now = cfg.PaymentWait, cfg.MaxPending, cfg.MaxBatch, cfg.MaxPendingMessages, now
	pcfg.EventWindow, pcfg.EventMax = cfg.EventsRetention, cfg.EventsRetentionCount
	pcfg.ClassAging, pcfg.MicroBatch, pcfg.MicroBatchBytes = cfg.ClassAging, cfg.MicroBatch, cfg.MicroBatchBytes
	if cfg.Verifiers > 0 {
		pcfg.Verifiers = cfg.Verifiers
	}
	if cfg.RatePerWallet > 0 {
		pcfg.WalletLimiter = rate.NewLimiter(cfg.RatePerWallet)
	}
	pipe, err := pipeline.New(pcfg, log.Named("pipeline"), node, machine, paySrc, clock)
	if err != nil {
		return err
	}
	machine.SetObserver(pipe)
	defer machine.SetObserver(nil)

	form := proposal.DefaultOptions()
	form.ContentRoot, form.MaxMessageBytes, form.RequireTxHash = cfg.ContentRoot, cfg.MaxMessageBytes, cfg.VerifiesPayments()
	leadership := cluster.NewLeadershipLog(cluster.LeadershipConfig{Node: node, Events: opsEvents, Now: now})
	members := cluster.NewMembership(cluster.MembershipConfig{Self: cfg.NodeID, Initial: bootstrap, Raft: node,
		AddressBook: machine, Peers: peers, Log: log.Named("membership")})
	appliedRate := rate.NewMeter(10)
	clusterView := cluster.NewView(cluster.ViewConfig{NodeID: cfg.NodeID, ClusterID: cfg.ClusterID, StartedAt: now(),
		Node: node, State: machine, Epochs: clock, Peers: peers, Membership: members, Leadership: leadership,
		AppliedRate: appliedRate, Reproposed: func() uint64 { return pipe.Stats().Reproposed }})
	apiCfg := httpapi.Config{
		NodeID:     cfg.NodeID,
		DataDir:    cfg.DataDir,
		AuthToken:  cfg.AuthToken,
		Form:       form,
		Blockchain: blockchainConfig(cfg, domain),
		Version:    version,
	}
	if cfg.RatePerIP > 0 {
		apiCfg.IPLimiter = rate.NewLimiter(cfg.RatePerIP)
	}
	var debts pipeline.DebtIndex
	if index != nil { // a nil *Index in the interface would not be nil
		debts = index
	}
	gc := pipeline.NewGC(pipe, debts)
	gateway, closeGateway, err := newGatewayChecker(cfg, now, log.Named("blobgateway"))
	if err != nil {
		return err
	}
	defer closeGateway()
	hub := events.NewHub(machine, events.Config{MaxPerIP: cfg.EventsStreamPerIP, Rate: cfg.EventsStreamRate,
		Queue: cfg.EventsStreamQueue, KeepAlive: cfg.EventsKeepAlive}, log.Named("events"))
	deps := httpapi.Deps{Proposals: pipe, Content: machine, Cluster: clusterView, GC: gc,
		NATS: natsClients(nc, publishing), Probes: probes(db, machine, node, peers, follower, chainStatus, gateway),
		EventStreams: hub, EventPublisher: publishing, OpsEvents: opsEvents,
		Transactions: payments.NewTransactions(payments.TransactionsConfig{NodeID: cfg.NodeID, Records: machine,
			Index: index, Chain: chainStatus, Now: now}),
		Settings: describeSettings(cfg), Tunables: tunables()}
	if chainStatus != nil { // a nil pointer in an interface would not be nil
		deps.ChainStatus = chainStatus
	}
	collect := metrics.Sources{NodeID: cfg.NodeID, Mode: string(cfg.Mode), Version: version, Raft: node, Leadership: leadership,
		State: machine, Pipeline: pipe, Peers: peers, DB: db}
	if index != nil {
		deps.PaymentIndex, collect.Payments = index, index
	}
	deps.Collectors = []prometheus.Collector{metrics.NewCollector(collect)}
	if streamsNC := cmp.Or(nc, publishing.nc); streamsNC != nil {
		js, err := jetstream.New(streamsNC)
		if err != nil {
			return fmt.Errorf("validator: JetStream: %w", err)
		}
		var names []string
		if chainStatus != nil {
			names = append(names, cfg.PaymentStream)
		}
		if cfg.PublishesEvents() {
			names = append(names, cfg.eventStream().Name)
		}
		deps.Streams = payments.NewStreams(js, names, now)
	}
	if cfg.Mode == Mock {
		deps.MockEpochs = clock
	}
	if deps.Segments, err = segments.New(segments.Config{NodeID: cfg.NodeID, Now: now}, machine); err != nil {
		return err
	}
	deps.Database, deps.RaftLog = db, node
	if gateway != nil {
		deps.Gateway = gateway
	}
	if deps.UI, err = ui.Render(); err != nil {
		return err
	}
	e := httpapi.New(apiCfg, deps, log.Named("api"))

	// Requests take Run's context, so long polls end when the validator stops.
	srv := &http.Server{Handler: e, ReadHeaderTimeout: 5 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}

	// Every background goroutine is waited for before the deferred closes
	// of the raft node, the transport and Pebble run: none may outlive them.
	var bg sync.WaitGroup
	errc := make(chan error, 3)
	bg.Go(func() { leadership.Run(ctx) })
	bg.Go(func() { members.Run(ctx) })
	bg.Go(func() { appliedRate.Run(ctx, time.Second, machine.AppliedIndex) })
	bg.Go(func() { errc <- pipe.Run(ctx) })
	bg.Go(func() { hub.Run(ctx) })
	bg.Go(func() { opsevents.NewCounterWatch(opsEvents, peers.Stats, db.WriteStalls).Run(ctx, time.Second) })
	if follower != nil {
		bg.Go(func() { errc <- follower.Run(ctx) })
	}
	if chainStatus != nil {
		bg.Go(func() { chainStatus.Run(ctx) })
	}
	bg.Go(func() { publishing.run(ctx) })
	if gateway != nil {
		bg.Go(func() { gateway.Run(ctx) })
	}
	go func() { errc <- srv.Serve(ln) }()
	if cfg.DebugAddr != "" {
		debug, err := serveDebug(ctx, cfg.DebugAddr)
		if err != nil {
			cancel()
			_ = srv.Close()
			bg.Wait()
			return err
		}
		defer debug.Close()
		log.Info("debug listener serving /debug/pprof", zap.String("addr", cfg.DebugAddr))
	}
	log.Info("validator serving", zap.String("version", version), zap.String("http", ln.Addr().String()), zap.String("mode", string(cfg.Mode)),
		zap.String("dataDir", cfg.DataDir))
	if ready != nil {
		ready <- ln.Addr().String()
	}

	select {
	case <-ctx.Done():
	case <-node.Done():
		err = fmt.Errorf("validator: raft node stopped: %w", node.Err())
	case e := <-errc:
		if e != nil && !errors.Is(e, http.ErrServerClosed) {
			err = e
		}
	}
	cancel()
	shutdown, stop := context.WithTimeout(context.Background(), 5*time.Second)
	defer stop()
	if e := srv.Shutdown(shutdown); e != nil && !errors.Is(e, http.ErrServerClosed) {
		err = errors.Join(err, e)
	}
	bg.Wait()
	return err
}

// The pipeline finds the reorg handling of its payment source by a type
// assertion; this keeps the index from losing it unnoticed.
var _ pipeline.Retractions = (*payments.Index)(nil)

// probes are the checks of /health/deep: a synced write to Pebble's WAL, a
// read of applied state, raft's leader, the peer streams (a quorum must be
// reachable), and, where used, the NATS server's payment stream, the
// chain-watcher's status and the IPFS gateway.
func probes(db *storage.DB, machine *state.Machine, node *consensus.Node, peers *transport.Transport, follower *payments.Follower,
	chain *payments.ChainStatus, gateway *blobgateway.Checker) map[string]httpapi.Probe {
	out := map[string]httpapi.Probe{"wal": db.ProbeWAL, "state": machine.Probe, "raft": node.Probe, "peers": peers.ProbeQuorum}
	if follower != nil {
		out["nats"] = follower.Probe
	}
	if chain != nil {
		out["chain"] = chain.Probe
	}
	if gateway != nil {
		out["gateway"] = gateway.Probe
	}
	return out
}

// newGatewayChecker returns the checker of the configured IPFS gateway, nil
// when none is, and a function that closes its idle connections. Its
// transport is its own, so that closing them leaves other clients alone.
func newGatewayChecker(cfg Config, now func() time.Time, log *zap.Logger) (*blobgateway.Checker, func(), error) {
	if cfg.IPFSGateway == "" {
		return nil, func() {}, nil
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	checker, err := blobgateway.New(blobgateway.Config{BaseURL: cfg.IPFSGateway, Interval: cfg.IPFSGatewayCheck,
		Client: &http.Client{Transport: transport}, Now: now, Log: log})
	if err != nil {
		return nil, nil, err
	}
	log.Info("checking the IPFS gateway", zap.String("gateway", checker.URL()), zap.Duration("every", checker.Interval()))
	return checker, transport.CloseIdleConnections, nil
}

// serveDebug serves Go's runtime profiles (net/http/pprof) on addr.
func serveDebug(ctx context.Context, addr string) (*http.Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("validator: listen on debug address %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	go func() { _ = srv.Serve(ln) }()
	return srv, nil
}

// blockchainConfig is the body of /v1/blockchain/config.
func blockchainConfig(cfg Config, d signing.Domain) api.BlockchainConfig {
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
