// Package app runs one validator: it builds the validator's parts from its
// Config and runs them under one lifecycle (pkg/lifecycle): they start in
// the order built and stop in reverse, and the first to fail stops them
// all. cmd/validator, tools/devnet and the tests all start it through Run,
// so they run the same code. It holds no HTTP handler and no rule of the
// ledger: those are the internal packages'.
package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/buildinfo"
	"github.com/contentledger/contentledger/pkg/httpserver"
	"github.com/contentledger/contentledger/pkg/lifecycle"
	"github.com/contentledger/contentledger/pkg/natsconn"
	"github.com/contentledger/contentledger/pkg/profiling"
	"github.com/contentledger/contentledger/services/validator/internal/access"
	"github.com/contentledger/contentledger/services/validator/internal/blobgateway"
	"github.com/contentledger/contentledger/services/validator/internal/consensus"
	"github.com/contentledger/contentledger/services/validator/internal/consensus/cluster"
	"github.com/contentledger/contentledger/services/validator/internal/epoch"
	"github.com/contentledger/contentledger/services/validator/internal/events"
	"github.com/contentledger/contentledger/services/validator/internal/headreport"
	"github.com/contentledger/contentledger/services/validator/internal/opsevents"
	"github.com/contentledger/contentledger/services/validator/internal/payments"
	"github.com/contentledger/contentledger/services/validator/internal/pipeline"
	"github.com/contentledger/contentledger/services/validator/internal/rate"
	"github.com/contentledger/contentledger/services/validator/internal/state"
	"github.com/contentledger/contentledger/services/validator/internal/storage"
	"github.com/contentledger/contentledger/services/validator/internal/transport"
)

// Run starts the validator and serves until ctx ends, then stops every part
// in reverse order. ready, when not nil, receives the HTTP address once
// every part runs.
func Run(ctx context.Context, cfg Config, log *zap.Logger, ready chan<- string) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	v := &validator{cfg: cfg, log: log.With(zap.Uint64("node", cfg.NodeID)), now: time.Now, version: buildinfo.Version(),
		natsGuard: natsconn.NewVersionGuard()}
	var g lifecycle.Group
	for _, build := range []func(*lifecycle.Group) error{
		v.openAccess,   // the lanes' tokens: refuses to run open, before anything is opened
		v.openStorage,  // Pebble and the state machine
		v.listen,       // the HTTP listener, before raft: a lone node's address book names it
		v.startRaft,    // the peer transport and the raft node
		v.followChain,  // NATS: the payment index and the chain-watcher's status (not in MOCK mode)
		v.startLedger,  // the epoch clock, the operational events, the pipeline, event publication
		v.trackCluster, // membership, leadership, the applied rate
		v.serveAPI,     // the event streams, the IPFS gateway's checks, the HTTP API, the profiles
	} {
		if err := build(&g); err != nil {
			return errors.Join(err, g.Stop())
		}
	}
	// A NATS server older than natsconn.MinServerVersion reached after the
	// start (the first connection retried, a reconnect) stops the validator.
	g.Go("nats server version", v.natsGuard.Wait)
	g.Loop("ready", func(ctx context.Context) {
		v.log.Info("validator serving", zap.String("version", v.version), zap.String("http", v.ln.Addr().String()),
			zap.String("mode", string(cfg.Mode)), zap.String("dataDir", cfg.DataDir))
		if ready != nil {
			select {
			case ready <- v.ln.Addr().String():
			case <-ctx.Done():
			}
		}
	})
	return g.Run(ctx)
}

// validator is one validator's parts, filled in by the steps of Run in
// order: each step reads only what the steps before it built.
type validator struct {
	cfg     Config
	log     *zap.Logger
	now     func() time.Time
	version string

	access  *access.Gate
	db      *storage.DB
	machine *state.Machine
	ln      net.Listener
	peers   *transport.Transport
	node    *consensus.Node
	members []api.Member // the bootstrap members, for the membership

	natsGuard   *natsconn.VersionGuard // refuses NATS servers too old, on every connection
	nc          *nats.Conn             // nil in MOCK mode
	index       *payments.Index        // nil in MOCK mode
	follower    *payments.Follower     // nil in MOCK mode
	chainStatus *payments.ChainStatus  // the chain-watcher's status; nil in MOCK mode

	clock      *epoch.Clock
	opsEvents  *opsevents.Recorder
	pipe       *pipeline.Pipeline
	publishing *eventPublishing
	binaries   *pipeline.Binaries
	blobReader *blobgateway.Reader // nil without a gateway

	clusterView *cluster.View
	leadership  *cluster.LeadershipLog

	clients *httpserver.Clients // who a request comes from, behind the trusted proxies
}

func (v *validator) openStorage(g *lifecycle.Group) error {
	storeOpts := v.cfg.StorageOptions()
	storeOpts.Logger = v.log.Named("pebble")
	db, err := storage.Open(storeOpts)
	if err != nil {
		return err
	}
	g.Add("pebble", db.Close)
	v.db = db
	// Returns the disk space of the segment generations a compaction
	// drops; stops before the database closes.
	reclaimer := storage.NewReclaimer(db, v.log.Named("pebble"))
	g.Loop("pebble space reclaimer", reclaimer.Run)
	// Hands the pages the block cache freed inside C malloc's arenas
	// back to the system.
	g.Loop("malloc trim", storage.TrimFreedMemory)
	v.machine, err = state.Open(db, state.Options{Logger: v.log.Named("state"), Reclaimer: reclaimer})
	return err
}

func (v *validator) listen(g *lifecycle.Group) error {
	ln, err := net.Listen("tcp", v.cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("validator: listen on %s: %w", v.cfg.HTTPAddr, err)
	}
	g.Add("http listener", func() error {
		if err := ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			return err
		}
		return nil
	})
	v.ln = ln
	return nil
}

// startRaft starts the peer transport and the raft node. Every validator
// runs the transport, so a single node can grow into a cluster through
// membership changes.
func (v *validator) startRaft(g *lifecycle.Group) error {
	cfg := v.cfg
	var creds transport.Credentials // nil: plaintext, allowed by Config.Validate
	if cfg.PeerTLS() {
		files, err := transport.LoadCredentials(transport.CredentialFiles{Cert: cfg.PeerTLSCert, Key: cfg.PeerTLSKey, CA: cfg.PeerTLSCA},
			cfg.NodeID, v.log.Named("transport"))
		if err != nil {
			return fmt.Errorf("validator: SVC_VALIDATOR_PEER_TLS_* (SVC_VALIDATOR_NODE_ID is %d): %w", cfg.NodeID, err)
		}
		creds = files
	} else if cfg.Mode != Mock {
		v.log.Warn("THE RAFT PEER PORT RUNS WITHOUT MUTUAL TLS (SVC_VALIDATOR_PEER_PLAINTEXT=true): anyone who reaches it can speak raft as any member and take this cluster over; set SVC_VALIDATOR_PEER_TLS_CERT, _KEY and _CA",
			zap.String("peer_addr", cfg.PeerAddr))
	}
	peers, err := transport.New(transport.Config{NodeID: cfg.NodeID, ClusterID: cfg.ClusterID, ListenAddr: cfg.PeerAddr,
		MaxFrameSize: cfg.PeerMaxFrameBytes, MaxSnapshotSize: cfg.MaxSnapshotBytes, Credentials: creds, Logger: v.log.Named("transport")})
	if err != nil {
		return err
	}
	g.Add("peer transport", peers.Close)
	v.peers = peers
	initial, _ := ParseCluster(cfg.InitialCluster) // validated
	if len(initial) == 0 {
		initial = []Member{{ID: cfg.NodeID, PeerAddr: peers.Addr(), APIURL: cfg.apiScheme() + "://" + v.ln.Addr().String()}}
	}
	ids := make([]uint64, len(initial))
	for i, m := range initial {
		ids[i] = m.ID
		v.members = append(v.members, api.Member{ID: m.ID, PeerAddr: m.PeerAddr, APIURL: m.APIURL})
		// Both ends must know each other before the first message: a
		// node refuses connections from senders it has not registered.
		if m.ID != cfg.NodeID {
			if err := peers.AddPeer(m.ID, m.PeerAddr); err != nil {
				return err
			}
		}
	}
	node, err := consensus.Start(consensus.Config{ID: cfg.NodeID, Peers: ids, Join: cfg.Join, TickInterval: cfg.TickInterval,
		SnapshotEntries: cfg.SnapshotEntries, CompactionMargin: cfg.CompactionMargin, TruncationInterval: cfg.LogTruncation,
		MaxSizePerMsg: cfg.raftMaxSizePerMsg(), Logger: v.log.Named("raft")}, v.db, v.machine, peers)
	if err != nil {
		return err
	}
	g.Add("raft node", func() error { node.Stop(); return nil })
	v.node = node
	// A node that stops on its own (an apply error, a log it cannot read)
	// stops the validator.
	g.Go("raft", func(ctx context.Context) error {
		select {
		case <-node.Done():
			return fmt.Errorf("the node stopped: %w", node.Err())
		case <-ctx.Done():
			return nil
		}
	})
	return peers.Start(node)
}

// followChain connects to NATS where payments are verified, and follows the
// payments the chain-watcher publishes and the chain status it keeps.
func (v *validator) followChain(g *lifecycle.Group) error {
	if !v.cfg.VerifiesPayments() {
		return nil
	}
	cfg := v.cfg
	nc, err := connectNATS(cfg, fmt.Sprintf("validator-%d", cfg.NodeID), v.natsGuard, v.log)
	if err != nil {
		return err
	}
	g.Add("nats", func() error { nc.Close(); return nil })
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("validator: JetStream: %w", err)
	}
	v.nc, v.index = nc, payments.NewIndex()
	v.follower = &payments.Follower{JS: js, Stream: cfg.PaymentStream, ChainID: cfg.ChainID, Index: v.index, Log: v.log.Named("payments"),
		Checkpoints: v.db.PaymentCheckpoint()}
	v.chainStatus = &payments.ChainStatus{JS: js, ChainID: cfg.ChainID, Bucket: cfg.WatcherBucket, Log: v.log.Named("chainstatus"),
		StaleAfter: cfg.ChainStatusStale}
	// Prunes what applied state spent and the chain made final, and
	// checkpoints the rest (ADR 0031).
	keeper, err := payments.NewKeeper(payments.KeeperConfig{Index: v.index, State: v.machine, Chain: v.chainStatus,
		Checkpoints: v.db.PaymentCheckpoint(), Log: v.log.Named("payments")})
	if err != nil {
		return err
	}
	g.Go("payment index", v.follower.Run)
	g.Loop("chain status", v.chainStatus.Run)
	g.Loop("payment index keeper", keeper.Run)
	return nil
}

// startLedger builds what decides and replicates: the epoch clock, the
// pipeline and its operational events, and the event publication.
func (v *validator) startLedger(g *lifecycle.Group) error {
	cfg := v.cfg
	v.clock = epoch.NewChain(cfg.EpochLength, cfg.EpochMaxAhead, v.now)
	if cfg.Mode == Mock {
		v.clock = epoch.NewMock(cfg.EpochLength, v.now)
	}
	var paid pipeline.Payments
	if v.follower != nil {
		v.follower.Epochs = v.clock // the chain-watcher's epoch updates replace the wall-clock estimate
		paid = v.index
	}
	v.opsEvents = opsevents.New(opsevents.Options{Now: v.now})
	pipe, err := pipeline.New(v.pipelineConfig(), v.log.Named("pipeline"), v.node, v.machine, paid, v.clock)
	if err != nil {
		return err
	}
	v.machine.SetObserver(pipe)
	g.Add("pipeline observer", func() error { v.machine.SetObserver(nil); return nil })
	g.Go("pipeline", pipe.Run)
	v.pipe = pipe
	if err := v.startBinaries(g); err != nil {
		return err
	}
	if v.publishing, err = newEventPublishing(cfg, v.nc, v.natsGuard, v.machine, v.node, v.log.Named("eventpub")); err != nil {
		return err
	}
	g.Add("event publication", func() error { v.publishing.close(); return nil })
	g.Loop("event publication", v.publishing.run)
	return nil
}

// startBinaries builds the upload intent flow and, with a gateway
// configured, the verified reads of binaries through it (docs/adr/0037).
// The reads' HTTP transport is their own, so that closing its idle
// connections leaves other clients alone.
func (v *validator) startBinaries(g *lifecycle.Group) error {
	cfg := v.cfg
	bin := cfg.Binaries().WithDefaults()
	var measurer pipeline.BlobMeasurer
	if cfg.IPFSGateway != "" {
		base, err := blobgateway.ParseBase(cfg.IPFSGateway)
		if err != nil {
			return err
		}
		tr := http.DefaultTransport.(*http.Transport).Clone()
		reader, err := blobgateway.NewReader(base, &http.Client{Transport: tr}, cfg.BlobTimeout, bin.MaxBlobBytes)
		if err != nil {
			return fmt.Errorf("validator: IPFS gateway reads: %w", err)
		}
		g.Add("gateway read connections", func() error { tr.CloseIdleConnections(); return nil })
		v.blobReader, measurer = reader, reader
	}
	b, err := pipeline.NewBinaries(v.pipe, v.machine, measurer, bin, v.log.Named("binaries"))
	if err != nil {
		return err
	}
	v.binaries = b
	g.Loop("upload intent expiry", b.RunExpiry)
	return nil
}

// The pipeline finds the reorg handling of its payment source by a type
// assertion; this keeps the index from losing it unnoticed.
var _ pipeline.Retractions = (*payments.Index)(nil)

// trackCluster follows the cluster: its members and the transport's peers,
// the leader changes this node sees, and the applied rate.
func (v *validator) trackCluster(g *lifecycle.Group) error {
	cfg := v.cfg
	v.leadership = cluster.NewLeadershipLog(cluster.LeadershipConfig{Node: v.node, Events: v.opsEvents, Now: v.now})
	members := cluster.NewMembership(cluster.MembershipConfig{Self: cfg.NodeID, Initial: v.members, Raft: v.node,
		AddressBook: v.machine, Peers: v.peers, Log: v.log.Named("membership")})
	applied := rate.NewMeter(10)
	v.clusterView = cluster.NewView(cluster.ViewConfig{NodeID: cfg.NodeID, ClusterID: cfg.ClusterID, StartedAt: v.now(),
		Node: v.node, State: v.machine, Epochs: v.clock, Peers: v.peers, Membership: members, Leadership: v.leadership,
		AppliedRate: applied, Reproposed: func() uint64 { return v.pipe.Stats().Reproposed }, Removed: v.machine,
		Log: v.log.Named("membership")})
	g.Loop("leadership", v.leadership.Run)
	g.Loop("membership", members.Run)
	g.Loop("learner promotions", v.clusterView.RunPromotions)
	g.Loop("applied rate", func(ctx context.Context) { applied.Run(ctx, time.Second, v.machine.AppliedIndex) })
	g.Loop("counter watch", func(ctx context.Context) {
		opsevents.NewCounterWatch(v.opsEvents, v.peers.Stats, v.db.WriteStalls).Run(ctx, time.Second)
	})
	g.Loop("compaction watch", func(ctx context.Context) {
		opsevents.NewRunWatch(v.opsEvents, v.machine.LastGcRun).Run(ctx, time.Second)
	})
	if v.chainStatus != nil {
		// The chain-watcher's lag: the feed falling behind and catching up.
		feed := &chainFeed{status: v.chainStatus, follower: v.follower}
		grace := cmp.Or(v.cfg.ChainStatusStale, payments.DefaultStatusStale)
		g.Loop("chain feed watch", func(ctx context.Context) {
			opsevents.NewFeedWatch(v.opsEvents, feed.Staleness, grace).Run(ctx, time.Second)
		})
	}
	if cfg.HeadReportInterval >= 0 {
		// A follower reports its head to the leader with an operator
		// token: the lane every validator holds a token of, which the
		// leader's route requires (docs/adr/0038).
		reporter := headreport.NewReporter(headreport.Config{NodeID: cfg.NodeID, Interval: cfg.HeadReportInterval,
			Token: func() string { return v.access.First(access.Operator) }, Logger: v.log.Named("head reports")}, v.machine, v.clusterView)
		g.Loop("head reports", reporter.Run)
	}
	return nil
}

// serveAPI serves the HTTP API, with the event streams and the IPFS
// gateway's checks it reads, and the profiles on their own listener.
func (v *validator) serveAPI(g *lifecycle.Group) error {
	gateway, err := v.gatewayChecker(g)
	if err != nil {
		return err
	}
	// One client resolution for every per-client limit: the proposal rate,
	// the event streams and (in the server) the connections.
	if v.clients, err = httpserver.NewClients(v.cfg.HTTPServer()); err != nil {
		return err
	}
	// The replicated events and the operational events: the same limits,
	// one budget of streams per client across both routes (ADR 0039).
	streams := events.Config{Budget: events.NewBudget(v.cfg.EventsStreamPerIP, v.clients.Key),
		Rate: v.cfg.EventsStreamRate, Queue: v.cfg.EventsStreamQueue, KeepAlive: v.cfg.EventsKeepAlive}
	hub := events.NewHub(v.machine, streams, v.log.Named("events"))
	opsHub := events.New(v.opsEvents, opsevents.NewStream(v.opsEvents), streams, v.log.Named("opsevents"))
	g.Loop("event streams", hub.Run)
	g.Loop("operational event streams", opsHub.Run)
	handler, err := v.apiHandler(hub, opsHub, gateway)
	if err != nil {
		return err
	}
	srv, err := httpserver.New(v.cfg.HTTPServer(), handler)
	if err != nil {
		return fmt.Errorf("validator: HTTP server: %w", err)
	}
	// The other validators forward many clients' requests each: their
	// connections are not held to one client's cap.
	peers := cluster.NewMemberAddresses(v.clusterView.Members)
	g.Loop("member addresses", peers.Run)
	srv.ExemptPeers(peers.Contains)
	g.Go("http", func(ctx context.Context) error { return srv.Serve(ctx, v.ln) })
	if v.cfg.DebugAddr == "" {
		return nil
	}
	profiles, err := profiling.Server(v.cfg.HTTPServer())
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", v.cfg.DebugAddr)
	if err != nil {
		return fmt.Errorf("validator: listen on debug address %s: %w", v.cfg.DebugAddr, err)
	}
	v.log.Info("debug listener serving /debug/pprof", zap.String("addr", v.cfg.DebugAddr))
	g.Go("profiles", func(ctx context.Context) error { return profiles.Serve(ctx, ln) })
	return nil
}

// gatewayChecker runs the checks of the configured IPFS gateway; nil when
// none is. Its HTTP transport is its own, so that closing its idle
// connections leaves other clients alone.
func (v *validator) gatewayChecker(g *lifecycle.Group) (*blobgateway.Checker, error) {
	if v.cfg.IPFSGateway == "" {
		return nil, nil
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	checker, err := blobgateway.New(blobgateway.Config{BaseURL: v.cfg.IPFSGateway, Interval: v.cfg.IPFSGatewayCheck,
		Client: &http.Client{Transport: tr}, Now: v.now, Log: v.log.Named("blobgateway")})
	if err != nil {
		return nil, err
	}
	g.Add("gateway connections", func() error { tr.CloseIdleConnections(); return nil })
	g.Loop("gateway checks", checker.Run)
	v.log.Info("checking the IPFS gateway", zap.String("gateway", checker.URL()), zap.Duration("every", checker.Interval()))
	return checker, nil
}
