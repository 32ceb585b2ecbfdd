package opsevents

import (
	"fmt"
	"strings"

	"github.com/ethereum/go-ethereum/common"

	"github.com/contentledger/contentledger/pkg/api"
)

// Message says what happened in words. It is composed when read, so that
// recording an event formats nothing.
func (e Event) Message() string {
	var s string
	switch e.Type {
	case LeaderChanged:
		role := strings.ToLower(e.Role)
		if e.Leader == 0 {
			s = fmt.Sprintf("no leader known in term %d; this validator is %s", e.Term, role)
		} else {
			s = fmt.Sprintf("%s leads term %d; this validator is %s", api.NodeName(e.Leader), e.Term, role)
		}
	case BackpressureOn:
		s = fmt.Sprintf("backpressure on: %d proposals in flight, at max_pending_messages %d; decided proposals wait", e.InFlight, e.Ceiling)
	case BackpressureOff:
		s = fmt.Sprintf("backpressure off: %d proposals in flight, below max_pending_messages %d", e.InFlight, e.Ceiling)
	case IntakeRefused:
		s = "a proposal was refused at intake: " + e.Reason
	case ProposalRejected:
		s = "a proposal was rejected: " + e.Reason
	case PaymentRetracted:
		switch {
		case e.Reason == AfterCommit && e.ReMined:
			s = "a chain reorganization moved the payment of a committed proposal to another block; the proposal takes the new log"
		case e.Reason == AfterCommit:
			s = "a chain reorganization took back the payment of a committed proposal; the proposal is marked payment_orphaned"
		case e.ReMined:
			s = "a chain reorganization moved the payment of a proposal not committed yet to another block"
		default:
			s = "a chain reorganization took back the payment of a proposal not committed yet; it is rejected payment_orphaned unless the payment is mined again"
		}
	case WritesBlocked:
		s = fmt.Sprintf("writes of %s are blocked: executed GC debt %s is at or above its limit %s",
			wallet(e.Wallet), api.DebtString(e.Debt), api.DebtString(e.Limit))
	case WritesUnblocked:
		s = fmt.Sprintf("writes of %s are no longer blocked by GC debt", wallet(e.Wallet))
	case SnapshotSent:
		s = "a raft snapshot was sent to " + api.NodeName(e.Peer)
	case SnapshotFailed:
		s = "a raft snapshot for " + api.NodeName(e.Peer) + " was not delivered"
	case SnapshotReceived:
		s = "a raft snapshot from " + api.NodeName(e.Peer) + " was received"
	case WriteStall:
		s = "the database stalled writes: " + e.Reason
	case FeedStale:
		s = "the chain feed is stale (" + e.Reason + "): held submissions are refused payment_feed_stale"
		if e.Detail != "" {
			s += "; " + e.Detail
		}
	case FeedCurrent:
		s = "the chain feed is current again"
	case CompactionStarted:
		s = fmt.Sprintf("GC compaction run %d started (epoch %d)", e.Run, e.Epoch)
	case CompactionFinished:
		s = fmt.Sprintf("GC compaction run %d finished after %d steps; %d bytes of segments reclaimed", e.Run, e.Steps, e.Reclaimed)
	case CompactionAbandoned:
		s = fmt.Sprintf("GC compaction run %d was given up after %d steps: %s", e.Run, e.Steps, e.Detail)
	default:
		s = e.Type.String()
	}
	if e.Count > 1 {
		s += fmt.Sprintf(" (%d occurrences)", e.Count)
	}
	return s
}

func wallet(w common.Address) string { return strings.ToLower(w.Hex()) }

// API renders the event as the routes publish it.
func (e Event) API() api.OpsEvent {
	out := api.OpsEvent{ID: e.ID, At: e.At.UTC(), Type: e.Type.String(), Severity: e.Severity.String(), Message: e.Message(),
		Count: e.Count}
	a := &out.Attributes
	a.Reason = e.Reason
	if e.Wallet != (common.Address{}) {
		a.Wallet = wallet(e.Wallet)
	}
	if e.ProposalID != (common.Hash{}) {
		a.ProposalID = e.ProposalID.Hex()
	}
	switch e.Type {
	case LeaderChanged:
		a.Term, a.Leader, a.Role = new(e.Term), new(e.Leader), e.Role
	case BackpressureOn, BackpressureOff:
		a.InFlight, a.MaxPendingMessages = new(e.InFlight), new(e.Ceiling)
	case PaymentRetracted:
		a.ReMined = new(e.ReMined)
	case WritesBlocked:
		a.ExecutedDebt, a.Limit = api.DebtString(e.Debt), api.DebtString(e.Limit)
	case SnapshotSent, SnapshotFailed, SnapshotReceived:
		a.Peer = new(e.Peer)
	}
	return out
}

// API renders the counts as the routes publish them; every type and
// severity is named, counted or not.
func (s Stats) API() api.OpsEventStats {
	out := api.OpsEventStats{Since: s.Since.UTC(), At: s.At.UTC(), BySeverity: map[string]uint64{}, BySeverity24h: map[string]uint64{},
		ByType: map[string]api.OpsEventTypeStats{}, Capacity: s.Capacity, Retained: s.Retained, Recorded: s.Recorded, Folded: s.Folded}
	for _, sev := range Severities() {
		out.BySeverity[sev.String()], out.BySeverity24h[sev.String()] = 0, 0
	}
	for _, t := range Types() {
		ts := api.OpsEventTypeStats{ByReason: s.ByReason[t]}
		if ts.ByReason == nil {
			ts.ByReason = map[string]uint64{}
		}
		for _, sev := range Severities() {
			total, day := s.Total[t][sev], s.Last24h[t][sev]
			ts.Total += total
			ts.Last24h += day
			out.BySeverity[sev.String()] += total
			out.BySeverity24h[sev.String()] += day
		}
		if !s.LastAt[t].IsZero() {
			ts.LastAt = new(s.LastAt[t])
		}
		out.Total += ts.Total
		out.Last24h += ts.Last24h
		out.ByType[t.String()] = ts
	}
	return out
}
