package routes

import (
	"github.com/labstack/echo/v4"
)

// signal is one derived health signal (openapi.yaml: SignalsData).
type signal struct {
	ID         string     `json:"id"`
	Label      string     `json:"label"`
	Value      *float64   `json:"value"` // nil: its source is missing
	Unit       string     `json:"unit"`
	Severity   string     `json:"severity"`
	Thresholds thresholds `json:"thresholds"`
	Source     string     `json:"source"`
}

// thresholds: with direction above, a value at or above a threshold has
// its severity; with below, at or under it. A nil threshold never fires.
type thresholds struct {
	Warn      *float64 `json:"warn"`
	Critical  *float64 `json:"critical"`
	Direction string   `json:"direction"`
}

// Thresholds of the signals whose scale does not come from the cluster.
// They are the edge's defaults, set so that a healthy cluster under load
// stays below warn: a backlog of this size or age means the release path
// is not keeping up. The watcher's lag is counted behind the safe block
// (0 when caught up, whatever the confirmations): 12 blocks is a couple of
// minutes of mainnet, 64 two epochs.
const (
	queueDepthWarn, queueDepthCritical         = 1_000, 10_000
	verifierWaitWarnMs, verifierWaitCriticalMs = 30_000, 120_000
	logLagWarn, logLagCritical                 = 1_000, 10_000
	watcherLagWarn, watcherLagCritical         = 12, 64
	diskUseWarn, diskUseCritical               = 0.80, 0.90
)

func num(v float64) *float64 { return &v }

func boolNum(b bool) *float64 {
	if b {
		return num(1)
	}
	return num(0)
}

func (sig signal) judged() signal {
	t := sig.Thresholds
	fires := func(limit *float64) bool {
		if limit == nil {
			return false
		}
		if t.Direction == "below" {
			return *sig.Value <= *limit
		}
		return *sig.Value >= *limit
	}
	switch {
	case sig.Value == nil:
		sig.Severity = "unknown"
	case fires(t.Critical):
		sig.Severity = "critical"
	case fires(t.Warn):
		sig.Severity = "warn"
	default:
		sig.Severity = "ok"
	}
	return sig
}

// deriveSignals judges the pulse, and returns the signals with the worst
// severity among them (unknown ones do not count: their gaps say why).
func deriveSignals(p pulse) ([]signal, string) {
	nodes := len(p.cluster.Nodes)
	var applyLag uint64
	for _, n := range p.cluster.Nodes {
		if n.Reachable && n.CommitIndex > n.AppliedIndex {
			applyLag = max(applyLag, n.CommitIndex-n.AppliedIndex)
		}
	}
	pending, verified, inFlight := p.queued()
	watcherLag, _ := p.chain.lag()
	above := func(warn, critical *float64) thresholds { return thresholds{warn, critical, "above"} }
	sigs := []signal{
		{ID: "leader", Label: "Leader known", Value: boolNum(p.cluster.Leader != 0), Unit: "bool",
			Thresholds: thresholds{nil, num(0), "below"}, Source: srcClusterHealth},
		{ID: "reachability", Label: "Validators reachable", Value: num(float64(p.cluster.Reachable)), Unit: "validators",
			Thresholds: thresholds{num(float64(nodes - 1)), num(float64(p.cluster.Quorum - 1)), "below"}, Source: srcClusterHealth},
		{ID: "queueDepth", Label: "Proposals not yet applied", Value: num(float64(pending + verified + inFlight)), Unit: "proposals",
			Thresholds: above(num(queueDepthWarn), num(queueDepthCritical)), Source: srcQueueStats},
		{ID: "backpressure", Label: "Sender backpressure", Value: boolNum(p.queue.BackpressureActive), Unit: "bool",
			Thresholds: above(num(1), nil), Source: srcQueueStats},
		{ID: "verifierWait", Label: "Oldest proposal waiting", Value: num(float64(p.oldestPendingAgeMs())), Unit: "ms",
			Thresholds: above(num(verifierWaitWarnMs), num(verifierWaitCriticalMs)), Source: srcQueueStats},
		{ID: "replicationLag", Label: "Replication lag", Value: num(float64(p.repl.MaxLagEntries)), Unit: "entries",
			Thresholds: above(num(logLagWarn), num(logLagCritical)), Source: srcReplication},
		{ID: "applyLag", Label: "Committed, not applied", Value: num(float64(applyLag)), Unit: "entries",
			Thresholds: above(num(logLagWarn), num(logLagCritical)), Source: srcClusterHealth},
		{ID: "watcherLag", Label: "Chain watcher lag behind the safe block", Value: watcherLag, Unit: "blocks",
			Thresholds: above(num(watcherLagWarn), num(watcherLagCritical)), Source: srcChainStatus},
		{ID: "diskUse", Label: "Disk use", Value: p.diskUse, Unit: "ratio",
			Thresholds: above(num(diskUseWarn), num(diskUseCritical)), Source: srcStorage},
		{ID: "gcDebtBlocks", Label: "Wallets blocked by GC debt", Value: p.blocked, Unit: "wallets",
			Thresholds: above(num(1), nil), Source: srcGcStatus},
		{ID: "paymentOrphaned", Label: "Committed proposals whose payment a chain reorg took back", Value: p.orphaned, Unit: "proposals",
			Thresholds: above(nil, num(1)), Source: srcCounts},
		{ID: "stateHashDisagreement", Label: "State hashes disagree", Value: boolNum(!p.cluster.StateHashAgreement), Unit: "bool",
			Thresholds: above(nil, num(1)), Source: srcClusterHealth},
		{ID: "gcHashDisagreement", Label: "GC runs whose state hash differs between validators", Value: p.gcHashSplit, Unit: "runs",
			Thresholds: above(nil, num(1)), Source: srcGcVote},
	}
	rank := map[string]int{"ok": 0, "warn": 1, "critical": 2}
	status := "ok"
	for i := range sigs {
		sigs[i] = sigs[i].judged()
		if sev := sigs[i].Severity; sev != "unknown" && rank[sev] > rank[status] {
			status = sev
		}
	}
	return sigs, status
}

// signals is the derived health signals view.
func (s *server) signals(c echo.Context) error {
	r := s.reader(c)
	p, err := readPulse(r)
	if err != nil {
		return err
	}
	sigs, status := deriveSignals(p)
	return s.envelope(c, map[string]any{
		"status":  status,
		"signals": sigs,
		"gaps":    append([]gap{}, p.gaps...),
		"sources": r.attempts(),
	})
}
