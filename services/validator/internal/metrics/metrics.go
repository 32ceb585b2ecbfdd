// Package metrics is the validator's Prometheus collector: nearly every
// series is read at scrape time from figures the validator keeps anyway
// (raft's status, the pipeline's and the transport's counters, Pebble's
// metrics, the replicated proposal counts), so the hot paths carry no
// metric code. Labels are bounded: raft ids, rejection reasons. The HTTP
// series (requests by route) are internal/api's, which serves /metrics.
package metrics

import (
	"strconv"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/services/validator/internal/consensus"
	"github.com/contentledger/contentledger/services/validator/internal/epoch"
	"github.com/contentledger/contentledger/services/validator/internal/eventpub"
	"github.com/contentledger/contentledger/services/validator/internal/payments"
	"github.com/contentledger/contentledger/services/validator/internal/pipeline"
	"github.com/contentledger/contentledger/services/validator/internal/storage"
	"github.com/contentledger/contentledger/services/validator/internal/transport"
)

// Sources are what a scrape reads. Payments is nil when payments are not
// verified (MOCK).
type Sources struct {
	NodeID     uint64
	Mode       string
	Version    string
	Raft       Raft
	Leadership Leadership
	State      State
	Pipeline   Pipeline
	Peers      Peers
	DB         DB
	Payments   Payments
	// Epochs is the chain-backed epoch clock; nil in MOCK.
	Epochs Epochs
	// EventStreams are the hubs of the SSE stream routes, by route.
	EventStreams map[string]EventStream
	// Publisher is the leader's publication of the event log to NATS; nil
	// when this validator does not publish.
	Publisher Publisher
}

// EventStream is the hub of one SSE stream route (events.Hub).
type EventStream interface {
	Open() int
	Dropped() uint64
}

// Publisher is the publication of the event log to LEDGER_EVENTS
// (eventpub.Publisher).
type Publisher interface {
	Status() eventpub.Status
}

// Epochs is what the epoch clock adopted from the chain's updates.
type Epochs interface {
	Chain() epoch.ChainState
}

// Raft is the raft node (consensus.Node).
type Raft interface {
	Status() consensus.Status
	LogBounds() (first, last, snapshot uint64)
}

// Leadership is this node's leadership history.
type Leadership interface {
	History() ([]api.LeadershipChange, uint64)
}

// State is the applied state's replicated proposal counts.
type State interface {
	Counts() (*ledgerpb.ProposalCounts, uint64)
}

// Pipeline is the proposal pipeline's counters.
type Pipeline interface {
	Stats() pipeline.Stats
	CommitLatency() pipeline.LatencyStats
}

// Peers is the raft transport's per-peer counters.
type Peers interface {
	Stats() map[uint64]transport.PeerStats
}

// DB is the Pebble database.
type DB interface {
	Pebble() *pebble.DB
	WriteStalls() storage.WriteStalls
}

// Payments is the payment index.
type Payments interface {
	Stats() payments.Stats
}

// Collector reads the validator's figures at each scrape.
type Collector struct {
	src Sources

	buildInfo                                           *prometheus.Desc
	term, leader, isLeader, commit, applied             *prometheus.Desc
	logFirst, logLast, snapshot, leaderChanges          *prometheus.Desc
	committed, finalized, rejected, orphaned            *prometheus.Desc
	writes, deletes, lastCommit                         *prometheus.Desc
	pending, queued, inFlight, backpressure             *prometheus.Desc
	accepted, verified, pipeRejected, batches           *prometheus.Desc
	reproposed, backpressureEvents                      *prometheus.Desc
	changes, changesQueued, changesInFlight             *prometheus.Desc
	peerConnected, peerSentMsgs, peerSentBytes          *prometheus.Desc
	peerRecvMsgs, peerRecvBytes, peerDropped            *prometheus.Desc
	peerReconnects, peerQueue                           *prometheus.Desc
	diskUsage, readAmp, l0Files, compactions, compDebt  *prometheus.Desc
	flushes, walWritten, stalls, stallSeconds           *prometheus.Desc
	cacheHits, cacheMisses, fsync                       *prometheus.Desc
	payIndexed, payMessages, payRetracted, debtsIndexed *prometheus.Desc
	holdWaiting, holdBytes, holdRefused, holdImpatient  *prometheus.Desc
	epochUpdates, epochBehind, epochAhead               *prometheus.Desc
	commitLatency                                       *prometheus.Desc
	streamsOpen, streamDropped                          *prometheus.Desc
	pubLag, pubPublishing, pubPublished, pubSkipped     *prometheus.Desc
}

// NewCollector returns the collector of src.
func NewCollector(src Sources) *Collector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	return &Collector{src: src,
		buildInfo: d("validator_build_info", "Always 1; the labels name the software version, the mode and the node.", "version", "mode", "node"),

		term:          d("validator_raft_term", "Raft term this node is in."),
		leader:        d("validator_raft_leader", "Raft id of the leader this node knows; 0 when none."),
		isLeader:      d("validator_raft_is_leader", "1 when this node is the raft leader."),
		commit:        d("validator_raft_commit_index", "Highest raft index known committed."),
		applied:       d("validator_raft_applied_index", "Raft index applied to the state."),
		logFirst:      d("validator_raft_log_first_index", "First raft index still in the log."),
		logLast:       d("validator_raft_log_last_index", "Last raft index in the log."),
		snapshot:      d("validator_raft_snapshot_index", "Raft index of the newest snapshot."),
		leaderChanges: d("validator_raft_leadership_changes_total", "Changes of this node's leader, role or term it has seen since it started (the leadership history)."),

		committed:  d("validator_proposals_committed_total", "Proposals committed (replicated: the same on every validator at one applied index)."),
		finalized:  d("validator_proposals_finalized_total", "Committed proposals whose epoch is final on chain."),
		rejected:   d("validator_proposals_rejected_total", "Proposals rejected, by reason (replicated).", "reason"),
		orphaned:   d("validator_proposals_payment_orphaned", "Committed proposals whose payment a reorg has orphaned, now."),
		writes:     d("validator_content_writes_total", "Committed writes (replicated)."),
		deletes:    d("validator_content_deletes_total", "Committed deletes (replicated)."),
		lastCommit: d("validator_last_commit_timestamp_seconds", "When the batch of the last committed proposal was sealed, unix seconds; 0 before the first."),

		commitLatency: d("validator_proposal_commit_latency_seconds",
			"Time from a proposal's acceptance at this node's intake to its commit being applied, of the proposals this node accepted (the wait of a submission held for its payment comes before acceptance; rejected and adopted proposals are not counted)."),

		pending:            d("validator_pipeline_pending", "Proposals accepted by this node and not yet decided."),
		queued:             d("validator_pipeline_queued", "Decided proposals waiting for the sender."),
		inFlight:           d("validator_pipeline_in_flight", "Proposals proposed to raft and not yet applied."),
		backpressure:       d("validator_pipeline_backpressure", "1 while proposals wait because in-flight proposals are at MAX_PENDING_MESSAGES."),
		backpressureEvents: d("validator_pipeline_backpressure_events_total", "Times backpressure began."),
		accepted:           d("validator_pipeline_accepted_total", "Proposals accepted at intake by this node."),
		verified:           d("validator_pipeline_verified_total", "Proposals whose payment this node verified."),
		pipeRejected:       d("validator_pipeline_rejected_total", "Proposals this node decided to reject."),
		batches:            d("validator_pipeline_batches_total", "Batches this node proposed to raft."),
		reproposed:         d("validator_pipeline_reproposed_total", "Batches and changes proposed again after raft dropped them."),
		changes:            d("validator_pipeline_changes_total", "Replicated changes other than proposal batches (GC accounts, epochs, leader announcements, reorgs) this node proposed."),
		changesQueued:      d("validator_pipeline_changes_queued", "Replicated changes waiting for the sender."),
		changesInFlight:    d("validator_pipeline_changes_in_flight", "Replicated changes proposed and not yet applied; they count against MAX_PENDING_MESSAGES with the proposals."),

		peerConnected:  d("validator_peer_connected", "1 while the stream to (out) or from (in) the peer is established.", "peer", "direction"),
		peerSentMsgs:   d("validator_peer_sent_messages_total", "Raft messages written to the peer's stream.", "peer"),
		peerSentBytes:  d("validator_peer_sent_bytes_total", "Bytes of the raft messages written to the peer's stream.", "peer"),
		peerRecvMsgs:   d("validator_peer_received_messages_total", "Raft messages received from the peer.", "peer"),
		peerRecvBytes:  d("validator_peer_received_bytes_total", "Bytes of the raft messages received from the peer.", "peer"),
		peerDropped:    d("validator_peer_dropped_messages_total", "Raft messages that never reached the peer's connection (queue full, unreachable, too large).", "peer"),
		peerReconnects: d("validator_peer_reconnects_total", "Outbound connections to the peer established after the first.", "peer"),
		peerQueue:      d("validator_peer_queue_depth", "Raft messages waiting in the peer's send queue.", "peer"),

		diskUsage:    d("validator_pebble_disk_usage_bytes", "Disk space Pebble uses."),
		readAmp:      d("validator_pebble_read_amplification", "Pebble's read amplification."),
		l0Files:      d("validator_pebble_l0_files", "Tables in Pebble's L0."),
		compactions:  d("validator_pebble_compactions_total", "Compactions Pebble has run."),
		compDebt:     d("validator_pebble_compaction_debt_bytes", "Pebble's estimated compaction debt."),
		flushes:      d("validator_pebble_flushes_total", "Memtable flushes."),
		walWritten:   d("validator_pebble_wal_bytes_written_total", "Bytes written to the WAL."),
		stalls:       d("validator_pebble_write_stalls_total", "Write stalls Pebble reported."),
		stallSeconds: d("validator_pebble_write_stall_seconds_total", "Time writes were stalled."),
		cacheHits:    d("validator_pebble_block_cache_hits_total", "Block cache hits."),
		cacheMisses:  d("validator_pebble_block_cache_misses_total", "Block cache misses."),
		fsync:        d("validator_wal_fsync_duration_seconds", "Latency of the WAL's fsyncs (raft log, hard state and applied state are synced through it)."),

		payIndexed:   d("validator_payments_indexed", "Payments in the payment index."),
		payMessages:  d("validator_payment_messages_total", "Payment messages read from the stream, retractions included."),
		payRetracted: d("validator_payments_retracted", "Proposal ids whose payment a retraction named."),
		debtsIndexed: d("validator_debt_payments_indexed", "Debt payments in the payment index."),

		holdWaiting: d("validator_payment_hold_waiting", "Submissions held at intake until their payment is observed, now (nothing of them is replicated)."),
		holdBytes:   d("validator_payment_hold_bytes", "Message bytes of the submissions held for their payment, now; bounded by HOLD_BYTES."),
		holdRefused: d("validator_payment_hold_refused_total", "Submissions refused at once because a hold bound (HOLD_PER_WALLET, HOLD_PER_CLIENT, HOLD_BYTES) was reached."),
		holdImpatient: d("validator_payment_hold_refused_impatient_total",
			"Submissions refused unread (429) because their client, refused at a hold bound, came back before its Retry-After while the bound was still reached."),

		streamsOpen:   d("validator_event_stream_subscribers", "SSE streams open on the route, now (reading history or following new events).", "route"),
		streamDropped: d("validator_event_stream_dropped_events_total", "Events dropped from the queues of the route's streams that read too slowly.", "route"),

		pubLag:        d("validator_event_publisher_lag_events", "Events applied here and not yet acknowledged by LEDGER_EVENTS, while this validator publishes (leads); 0 otherwise."),
		pubPublishing: d("validator_event_publisher_publishing", "1 while this validator leads and publishes the event log to LEDGER_EVENTS."),
		pubPublished:  d("validator_event_publisher_published_total", "Events this validator had stored in LEDGER_EVENTS."),
		pubSkipped:    d("validator_event_publisher_skipped_total", "Events the log no longer held when they were due for publication (event retention ran past them)."),

		epochUpdates: d("validator_epoch_updates_total", "Epoch updates read from the chain-watcher's feed."),
		epochBehind:  d("validator_epoch_updates_behind_total", "Epoch updates with a figure below the adopted one (that figure was kept)."),
		epochAhead:   d("validator_epoch_updates_ahead_total", "Epoch updates refused as further ahead of the wall clock than EPOCH_MAX_AHEAD allows (a forged or broken feed)."),
	}
}

// Describe sends nothing: the collector is unchecked, because the label
// values of some series (peers, rejection reasons) are known only at
// scrape time.
func (c *Collector) Describe(chan<- *prometheus.Desc) {}

func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	bit := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
	}
	s := c.src
	gauge(c.buildInfo, 1, s.Version, s.Mode, strconv.FormatUint(s.NodeID, 10))

	st := s.Raft.Status()
	gauge(c.term, float64(st.Term))
	gauge(c.leader, float64(st.Leader))
	gauge(c.isLeader, bit(st.Role == consensus.RoleLeader))
	gauge(c.commit, float64(st.CommitIndex))
	gauge(c.applied, float64(st.AppliedIndex))
	first, last, snap := s.Raft.LogBounds()
	gauge(c.logFirst, float64(first))
	gauge(c.logLast, float64(last))
	gauge(c.snapshot, float64(snap))
	_, changes := s.Leadership.History()
	counter(c.leaderChanges, float64(changes))

	if counts, _ := s.State.Counts(); counts != nil {
		counter(c.committed, float64(counts.GetCommitted()))
		counter(c.finalized, float64(counts.GetFinalized()))
		for reason, n := range counts.GetRejectedByReason() {
			counter(c.rejected, float64(n), reason)
		}
		gauge(c.orphaned, float64(counts.GetPaymentOrphaned()))
		counter(c.writes, float64(counts.GetWrites()))
		counter(c.deletes, float64(counts.GetDeletes()))
		gauge(c.lastCommit, float64(counts.GetLastCommitAtMs())/1000)
	}

	ps := s.Pipeline.Stats()
	gauge(c.pending, float64(ps.Pending))
	gauge(c.queued, float64(ps.Queued))
	gauge(c.inFlight, float64(ps.InFlight))
	gauge(c.backpressure, bit(ps.BackpressureActive))
	counter(c.backpressureEvents, float64(ps.BackpressureEvents))
	counter(c.accepted, float64(ps.Accepted))
	counter(c.verified, float64(ps.Verified))
	counter(c.pipeRejected, float64(ps.Rejected))
	counter(c.batches, float64(ps.Batches))
	counter(c.reproposed, float64(ps.Reproposed))
	counter(c.changes, float64(ps.Changes))
	lat := s.Pipeline.CommitLatency()
	if m, err := prometheus.NewConstHistogram(c.commitLatency, lat.Count, lat.SumSeconds, lat.Buckets); err == nil {
		ch <- m
	}
	gauge(c.changesQueued, float64(ps.QueuedChanges))
	gauge(c.changesInFlight, float64(ps.ChangesInFlight))

	for id, p := range s.Peers.Stats() {
		peer := strconv.FormatUint(id, 10)
		gauge(c.peerConnected, bit(p.Connected), peer, "out")
		gauge(c.peerConnected, bit(p.InboundConnected), peer, "in")
		counter(c.peerSentMsgs, float64(p.MsgsSent), peer)
		counter(c.peerSentBytes, float64(p.BytesSent), peer)
		counter(c.peerRecvMsgs, float64(p.MsgsRecv), peer)
		counter(c.peerRecvBytes, float64(p.BytesRecv), peer)
		counter(c.peerDropped, float64(p.Dropped), peer)
		counter(c.peerReconnects, float64(p.Reconnects), peer)
		gauge(c.peerQueue, float64(p.QueueDepth), peer)
	}

	pm := s.DB.Pebble().Metrics()
	gauge(c.diskUsage, float64(pm.DiskSpaceUsage()))
	gauge(c.readAmp, float64(pm.ReadAmp()))
	gauge(c.l0Files, float64(pm.Levels[0].TablesCount))
	counter(c.compactions, float64(pm.Compact.Count))
	gauge(c.compDebt, float64(pm.Compact.EstimatedDebt))
	counter(c.flushes, float64(pm.Flush.Count))
	counter(c.walWritten, float64(pm.WAL.BytesWritten))
	stalls := s.DB.WriteStalls()
	counter(c.stalls, float64(stalls.Count))
	counter(c.stallSeconds, stalls.Total.Seconds())
	counter(c.cacheHits, float64(pm.BlockCache.Hits))
	counter(c.cacheMisses, float64(pm.BlockCache.Misses))
	if h := pm.LogWriter.FsyncLatency; h != nil {
		var out dto.Metric
		if h.Write(&out) == nil && out.GetHistogram() != nil {
			if m, ok := constHistogram(c.fsync, out.GetHistogram()); ok {
				ch <- m
			}
		}
	}

	if s.Payments != nil {
		is := s.Payments.Stats()
		gauge(c.payIndexed, float64(is.Indexed))
		counter(c.payMessages, float64(is.Observed))
		gauge(c.payRetracted, float64(is.Retracted))
		gauge(c.debtsIndexed, float64(is.Debts))
		// The hold runs only where payments are verified, so its series
		// come with the payment index's.
		gauge(c.holdWaiting, float64(ps.Holds.Waiting))
		gauge(c.holdBytes, float64(ps.Holds.Bytes))
		counter(c.holdRefused, float64(ps.Holds.Refused))
		counter(c.holdImpatient, float64(ps.Holds.Impatient))
	}
	for route, hub := range s.EventStreams {
		gauge(c.streamsOpen, float64(hub.Open()), route)
		counter(c.streamDropped, float64(hub.Dropped()), route)
	}
	if s.Publisher != nil {
		st := s.Publisher.Status()
		gauge(c.pubLag, float64(st.Lag))
		gauge(c.pubPublishing, bit(st.Publishing))
		counter(c.pubPublished, float64(st.Published))
		counter(c.pubSkipped, float64(st.Skipped))
	}
	if s.Epochs != nil {
		es := s.Epochs.Chain()
		counter(c.epochUpdates, float64(es.Updates))
		counter(c.epochBehind, float64(es.Regressions))
		counter(c.epochAhead, float64(es.Ahead))
	}
}

// constHistogram re-labels a latency histogram Pebble keeps in
// nanoseconds (pebble.FsyncLatencyBuckets) under this registry's name, in
// seconds.
func constHistogram(d *prometheus.Desc, h *dto.Histogram) (prometheus.Metric, bool) {
	const perSecond = float64(time.Second)
	buckets := make(map[float64]uint64, len(h.GetBucket()))
	for _, b := range h.GetBucket() {
		buckets[b.GetUpperBound()/perSecond] = b.GetCumulativeCount()
	}
	m, err := prometheus.NewConstHistogram(d, h.GetSampleCount(), h.GetSampleSum()/perSecond, buckets)
	return m, err == nil
}
