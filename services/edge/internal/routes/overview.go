package routes

import (
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/contentledger/contentledger/pkg/api"
)

// gap is a figure a view cannot fill yet: the field is null, and data.gaps[]
// says why, so that a missing figure is never mistaken for a zero.
type gap struct {
	Field       string `json:"field"`
	Reason      string `json:"reason"`
	SourceRoute string `json:"sourceRoute,omitempty"`
}

// statusStaleMs is the age past which the chain-watcher's status no longer
// tells its lag: the watcher writes it on every change and at least every
// 30 s, so a status this old means the watcher is stopped or cannot write.
const statusStaleMs = 120_000

// chainView is the chain as a validator received it from the chain-watcher
// (/v1/chain/status); gaps say what it cannot tell and why.
type chainView struct {
	status *api.ChainStatus // nil: no validator answered
	from   string
	gaps   []gap
}

// readChain reads the chain status from any validator. Its absence leaves
// only the chain figures unknown, never the view that wants them.
func readChain(r *reader) chainView {
	var cs api.ChainStatus
	if _, err := r.read(at(srcChainStatus), &cs); err != nil {
		return chainView{gaps: []gap{{Field: "chain", Reason: "no validator answered " + srcChainStatus, SourceRoute: srcChainStatus}}}
	}
	v := chainView{status: &cs, from: r.answeredBy(at(srcChainStatus))}
	for _, g := range cs.Gaps {
		// The validator's own gaps, named as the source names them.
		v.gaps = append(v.gaps, gap{Field: "chainStatus." + g.Field, Reason: g.Reason, SourceRoute: srcChainStatus})
	}
	return v
}

// watcher is the chain-watcher's status; nil when no validator has one.
func (v chainView) watcher() *api.WatcherStatus {
	if v.status == nil {
		return nil
	}
	return v.status.Watcher
}

// lag is the watcher's lag behind the safe block, in blocks: what an
// operator acts on, since the watcher waits for its confirmations by
// design (head - cursor is never below them). Unknown without a status, a
// cursor, or with a stale status (a stopped watcher's last lag says
// nothing); why is the returned reason.
func (v chainView) lag() (*float64, string) {
	w := v.watcher()
	switch {
	case w == nil:
		return nil, "no chain-watcher status reached the validators (see gaps of " + srcChainStatus + ")"
	case w.AgeMs > statusStaleMs:
		return nil, "the chain-watcher's last status is " + strconv.FormatInt(w.AgeMs/1000, 10) +
			" s old (it writes one at least every 30 s): the watcher is stopped or cannot reach NATS"
	case w.LagBlocks == nil:
		return nil, "the chain-watcher has no cursor yet"
	}
	return num(float64(*w.LagBlocks)), ""
}

// pulse is what the overview and the signals derive from: the cluster as a
// validator sees it, the leader's queue and replication, every validator's
// disk, and the wallets GC debt blocks.
type pulse struct {
	cluster api.ClusterHealth
	queue   api.QueueStats
	repl    api.ReplicationLag
	// diskUse is the highest disk use among the validators that report
	// it, blocked the wallets whose writes GC debt blocks, orphaned the
	// committed proposals whose payment a reorg took back; nil when no
	// validator told, and gaps say why.
	diskUse, blocked, orphaned *float64
	// gcHashSplit counts the GC runs validators report different state
	// hashes for; nil when fewer than two validators answered.
	gcHashSplit *float64
	// chain is the chain-watcher's status, for the watcher's lag.
	chain chainView
	gaps  []gap
}

// readPulse fails when a figure every signal needs is missing. The disk and
// GC debt figures are read too, but only their own signals go unknown
// without them: a validator that cannot tell them leaves the rest of the
// view intact.
func readPulse(r *reader) (pulse, error) {
	var p pulse
	if _, err := r.read(at(srcClusterHealth), &p.cluster); err != nil {
		return p, err
	}
	if _, err := r.readLeader(at(srcQueueStats), &p.queue); err != nil {
		return p, err
	}
	if _, err := r.readLeader(at(srcReplication), &p.repl); err != nil {
		return p, err
	}
	var gc api.GcStatus
	if _, err := r.read(at(srcGcStatus), &gc); err != nil {
		p.gaps = append(p.gaps, gap{Field: "signals.gcDebtBlocks", Reason: "no validator answered " + srcGcStatus, SourceRoute: srcGcStatus})
	} else {
		p.blocked = num(float64(gc.Debt.WalletsBlocked))
	}
	var counts api.ProposalCounts
	if _, err := r.read(at(srcCounts), &counts); err != nil {
		p.gaps = append(p.gaps, gap{Field: "signals.paymentOrphaned", Reason: "no validator answered " + srcCounts, SourceRoute: srcCounts})
	} else {
		p.orphaned = num(float64(counts.PaymentOrphaned))
	}
	disks := make([]*float64, len(r.s.up.URLs()))
	r.s.eachValidator(func(i int, base string) {
		var sn api.StorageSnapshot
		if _, err := r.readFrom(base, at(srcStorage), &sn); err == nil && sn.Disk != nil {
			disks[i] = num(sn.Disk.UsedRatio)
		}
	})
	for _, d := range disks {
		if d != nil && (p.diskUse == nil || *d > *p.diskUse) {
			p.diskUse = d
		}
	}
	if p.diskUse == nil {
		p.gaps = append(p.gaps, gap{Field: "signals.diskUse", Reason: "no validator reported the use of its data directory's disk",
			SourceRoute: srcStorage})
	}
	p.gcHashSplit = readGcVotes(r)
	if p.gcHashSplit == nil {
		p.gaps = append(p.gaps, gap{Field: "signals.gcHashDisagreement", Reason: "fewer than two validators answered " + srcGcVote,
			SourceRoute: srcGcVote})
	}
	p.chain = readChain(r)
	if lag, why := p.chain.lag(); lag == nil {
		p.gaps = append(p.gaps, gap{Field: "signals.watcherLag", Reason: why, SourceRoute: srcChainStatus})
	}
	return p, nil
}

// queued splits the proposals not yet applied: accepted and not decided,
// decided and waiting for release, and proposed to raft.
func (p pulse) queued() (pending, verified, inFlight int) {
	total := 0
	for _, n := range p.queue.ProposalsByEpoch {
		total += n
	}
	verified, inFlight = p.queue.QueuedProposals, p.queue.BackpressurePendingRawCount
	return max(0, total-verified-inFlight), verified, inFlight
}

func (p pulse) oldestPendingAgeMs() int64 {
	var oldest int64
	for _, e := range p.queue.PendingEpochStats {
		oldest = max(oldest, e.OldestAgeMs)
	}
	return oldest
}

func (p pulse) maxLagMs() int64 {
	var lag int64
	for _, n := range p.repl.Nodes {
		lag = max(lag, n.LagMs)
	}
	return lag
}

// overview is the operational overview. Its status is the signals' status,
// so that the two never disagree.
func (s *server) overview(c echo.Context) error {
	r := s.reader(c)
	p, err := readPulse(r)
	if err != nil {
		return err
	}
	var m api.RaftMetrics
	if _, err := r.readLeader(at(srcRaftMetrics), &m); err != nil {
		return err
	}
	leader := map[string]any{"nodeId": nil, "term": m.Term, "since": nil}
	if m.Leader != 0 {
		leader["nodeId"] = api.NodeName(m.Leader)
		if m.Elections.LastAt != nil {
			leader["since"] = m.Elections.LastAt
		}
	}
	_, status := deriveSignals(p)
	pending, verified, inFlight := p.queued()
	return s.envelope(c, map[string]any{
		"status": map[string]string{"ok": "healthy", "warn": "degraded", "critical": "critical"}[status],
		"leader": leader,
		"cluster": map[string]any{
			"nodeCount": len(p.cluster.Nodes), "quorum": p.cluster.Quorum, "reachable": p.cluster.Reachable,
		},
		"queue": map[string]any{
			"pending": pending, "verified": verified, "inFlight": inFlight,
			"backpressureActive": p.queue.BackpressureActive, "oldestPendingAgeMs": p.oldestPendingAgeMs(),
		},
		"replication":        map[string]any{"maxLagEntries": p.repl.MaxLagEntries, "maxLagMs": p.maxLagMs()},
		"finality":           map[string]any{"currentEpoch": p.queue.CurrentEpoch, "finalizedEpoch": p.queue.FinalizedEpoch},
		"stateHashAgreement": p.cluster.StateHashAgreement,
		"gaps":               []gap{},
		"sources":            r.attempts(),
	})
}

// header is the header card: identity, chain and leader, from the
// explorer summary (which validators answer from the leader).
func (s *server) header(c echo.Context) error {
	r := s.reader(c)
	var sum api.ExplorerSummary
	if _, err := r.read(at(srcExplorerSummary), &sum); err != nil {
		return err
	}
	var leader any
	if sum.Cluster.Leader != 0 {
		leader = api.NodeName(sum.Cluster.Leader)
	}
	// The version is the answering validator's (the leader's, which
	// answers the summary); one of a version before it publishes none
	// leaves it unknown.
	var version any = sum.Identity.Version
	gaps := []gap{}
	if sum.Identity.Version == "" {
		version = nil
		gaps = append(gaps, gap{Field: "version", Reason: "the validator that answered does not publish its software version",
			SourceRoute: srcExplorerSummary})
	}
	return s.envelope(c, map[string]any{
		"clusterId": sum.Identity.ClusterID,
		"mode":      sum.Identity.Mode,
		"network": map[string]any{
			"chainId": sum.Identity.ChainID, "name": chainName(sum.Identity.ChainID), "contractAddress": sum.Identity.ContractAddress,
		},
		"leader":    leader,
		"nodeCount": sum.Cluster.Members,
		"version":   version,
		"gaps":      gaps,
		"sources":   r.attempts(),
	})
}

// chainName is the common name of the chains the ledger is run on.
func chainName(id uint64) string {
	switch id {
	case 1:
		return "mainnet"
	case 11155111:
		return "sepolia"
	case 17000:
		return "holesky"
	case 1337, 31337:
		return "dev"
	}
	return "chain-" + strconv.FormatUint(id, 10)
}

// durability is the durability acknowledgement projection.
func (s *server) durability(c echo.Context) error {
	r := s.reader(c)
	var fin api.Finality
	if _, err := r.read(at(srcFinality), &fin); err != nil {
		return err
	}
	var q api.QueueStats
	if _, err := r.readLeader(at(srcQueueStats), &q); err != nil {
		return err
	}
	var ch api.ClusterHealth
	if _, err := r.read(at(srcClusterHealth), &ch); err != nil {
		return err
	}
	gaps := []gap{}
	// Replicated, so any validator's answer is the cluster's (as of its
	// applied index).
	if fin.LastCommitAt == nil {
		gaps = append(gaps, gap{Field: "lastCommitAt", Reason: "no proposal is committed yet, or the validator that answered does not publish the time",
			SourceRoute: srcFinality})
	}
	// The leader's WAL fsyncs are the ones acknowledgements wait for; a
	// missing snapshot leaves only these figures unknown.
	fsync := map[string]any{"p50Ms": nil, "p99Ms": nil}
	var sn api.StorageSnapshot
	switch _, err := r.readLeader(at(srcStorage), &sn); {
	case err != nil:
		gaps = append(gaps, gap{Field: "fsync", Reason: "no validator answered " + srcStorage, SourceRoute: srcStorage})
	case sn.Pebble.Fsync.P50Ms == nil:
		gaps = append(gaps, gap{Field: "fsync", Reason: "the validator measured no WAL fsync yet", SourceRoute: srcStorage})
	default:
		fsync = map[string]any{"p50Ms": sn.Pebble.Fsync.P50Ms, "p99Ms": sn.Pebble.Fsync.P99Ms, "count": sn.Pebble.Fsync.Count,
			"nodeId": api.NodeName(sn.NodeID)}
	}
	return s.envelope(c, map[string]any{
		"committedUnfinalized":   fin.CommittedUnfinalized,
		"oldestUnfinalizedAgeMs": fin.OldestUnfinalizedAgeMs,
		"pendingAcks":            q.BackpressurePendingRawCount,
		"lastCommitAt":           fin.LastCommitAt,
		"fsync":                  fsync,
		"stateHashAgreement":     ch.StateHashAgreement,
		"gaps":                   gaps,
		"sources":                r.attempts(),
	})
}

// network is the network health projection: the chain as the validators
// are configured for it, their NATS connections, and one validator's
// measure of its peers.
func (s *server) network(c echo.Context) error {
	r := s.reader(c)
	var bc api.BlockchainConfig
	if _, err := r.read(at(srcBlockchain), &bc); err != nil {
		return err
	}
	var ch api.ClusterHealth
	if _, err := r.read(at(srcClusterHealth), &ch); err != nil {
		return err
	}
	peers := make([]map[string]any, 0, len(ch.Nodes))
	for _, n := range ch.Nodes {
		p := map[string]any{"nodeId": n.Name, "url": n.APIURL, "reachable": n.Reachable, "rttMs": nil}
		if n.Reachable {
			p["rttMs"] = n.LatencyMs
		} else {
			p["error"] = n.Error
		}
		peers = append(peers, p)
	}
	// NATS is connected when every validator that reports on it says so;
	// unknown (null) when none does.
	reported, allOK := false, true
	validators := []map[string]any{}
	for _, a := range s.healthOfAll(r) {
		v := map[string]any{"url": a.url, "reachable": a.body != nil, "connected": nil}
		if a.body != nil {
			if nats, ok := a.body.Checks["nats"]; ok {
				v["connected"], v["detail"] = nats.Status == "ok", nats.Detail
				reported, allOK = true, allOK && nats.Status == "ok"
			}
		}
		validators = append(validators, v)
	}
	var connected any
	if reported {
		connected = allOK
	}
	cv := readChain(r)
	chain, gaps := networkChain(bc.ChainID, cv)
	var streams any
	if cv.status != nil && cv.status.Streams != nil {
		streams = cv.status.Streams
	} else {
		gaps = append(gaps, gap{Field: "nats.streams", Reason: "no validator reported the JetStream streams", SourceRoute: srcChainStatus})
	}
	return s.envelope(c, map[string]any{
		"chain":        chain,
		"nats":         map[string]any{"connected": connected, "streams": streams, "validators": validators},
		"peers":        peers,
		"measuredFrom": r.answeredBy(at(srcClusterHealth)),
		"gaps":         gaps,
		"sources":      r.attempts(),
	})
}

// networkChain is the chain part of the network view. headAgeMs is the
// validator's now - head timestamp, at least 0 (a block stamped ahead of
// the clock, as dev chains do, is not from the future); watcherLagBlocks is
// the lag behind the safe block (chainView.lag).
func networkChain(chainID uint64, cv chainView) (map[string]any, []gap) {
	chain := map[string]any{"chainId": chainID, "head": nil, "headAgeMs": nil, "finalizedBlock": nil, "watcherLagBlocks": nil}
	gaps := append([]gap{}, cv.gaps...)
	w := cv.watcher()
	if w == nil {
		if cv.status != nil {
			for _, f := range []string{"chain.head", "chain.headAgeMs", "chain.finalizedBlock", "chain.watcherLagBlocks"} {
				gaps = append(gaps, gap{Field: f, Reason: "no chain-watcher status reached the validator", SourceRoute: srcChainStatus})
			}
		}
		return chain, gaps
	}
	chain["head"], chain["headHash"], chain["headTime"] = w.Head, w.HeadHash, w.HeadTime
	chain["headAgeMs"] = max(0, w.HeadAgeMs)
	chain["safeBlock"], chain["confirmations"] = w.SafeBlock, w.Confirmations
	chain["cursorBlock"], chain["headLagBlocks"] = w.CursorBlock, w.HeadLagBlocks
	chain["pendingPayments"], chain["statusAgeMs"], chain["observedAt"] = w.PendingPayments, w.AgeMs, w.ObservedAt
	chain["reportedBy"] = cv.from
	if w.FinalizedBlock != nil {
		chain["finalizedBlock"] = *w.FinalizedBlock
	} else {
		gaps = append(gaps, gap{Field: "chain.finalizedBlock", Reason: "the chain-watcher's endpoint does not answer the finalized tag",
			SourceRoute: srcChainStatus})
	}
	if lag, why := cv.lag(); lag != nil {
		chain["watcherLagBlocks"] = uint64(*lag)
	} else {
		gaps = append(gaps, gap{Field: "chain.watcherLagBlocks", Reason: why, SourceRoute: srcChainStatus})
	}
	return chain, gaps
}
