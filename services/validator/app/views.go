package app

import (
	"errors"
	"fmt"

	"github.com/ethereum/go-ethereum/common"
	"github.com/nats-io/nats.go"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/services/validator/internal/consensus"
	"github.com/contentledger/contentledger/services/validator/internal/payments"
	"github.com/contentledger/contentledger/services/validator/internal/pipeline"
	"github.com/contentledger/contentledger/services/validator/internal/rate"
	"github.com/contentledger/contentledger/services/validator/internal/state"
)

// stateView adapts the state machine to the pipeline and the API, turning
// state.ErrNotFound into ok=false.
type stateView struct{ *state.Machine }

func (s stateView) Record(id common.Hash) (*ledgerpb.ProposalRecord, bool, error) {
	rec, err := s.Proposal(id)
	if errors.Is(err, state.ErrNotFound) {
		return nil, false, nil
	}
	return rec, err == nil, err
}

func (s stateView) Node(path string) (*ledgerpb.Node, bool, error) {
	n, err := s.Machine.Node(path)
	if errors.Is(err, state.ErrNotFound) {
		return nil, false, nil
	}
	return n, err == nil, err
}

// healthView answers /health from the node's own parts.
type healthView struct {
	cfg     Config
	version string // the software version (pkg/buildinfo)
	node    *consensus.Node
	machine *state.Machine
	nats    *nats.Conn
	// eventsNATS is the connection the event publisher opened for itself
	// when the validator uses no other (MOCK with NATS_EVENTS=on).
	eventsNATS *nats.Conn
	index      *payments.Index
}

func check(ok bool, detail string) map[string]any {
	status := "ok"
	if !ok {
		status = "failing"
	}
	return map[string]any{"status": status, "detail": detail}
}

func (h *healthView) Health() map[string]any {
	st := h.node.Status()
	hash := h.machine.StateHash()
	checks := map[string]any{
		"storage": check(true, "pebble open at "+h.cfg.DataDir),
		"raft":    check(st.Leader != 0, fmt.Sprintf("role %s, term %d, leader %d", st.Role, st.Term, st.Leader)),
	}
	if h.nats != nil {
		connected := h.nats.IsConnected()
		checks["nats"] = check(connected, "connection "+h.nats.Status().String())
		s := h.index.Stats()
		checks["chain"] = check(connected, fmt.Sprintf("%d payments and %d debt payments indexed from %d messages; %d payments retracted by reorgs",
			s.Indexed, s.Debts, s.Observed, s.Retracted))
	} else {
		checks["nats"] = check(true, "not used in MOCK mode")
		if h.eventsNATS != nil { // MOCK with NATS_EVENTS=on: events only
			checks["nats"] = check(h.eventsNATS.IsConnected(), "event publication connection "+h.eventsNATS.Status().String())
		}
		checks["chain"] = check(true, "payments not verified in MOCK mode")
	}
	status := "ok"
	for _, c := range checks {
		if c.(map[string]any)["status"] != "ok" {
			status = "unavailable"
		}
	}
	return map[string]any{
		"status":       status,
		"nodeId":       h.cfg.NodeID,
		"clusterId":    h.cfg.ClusterID,
		"mode":         h.cfg.Mode,
		"version":      h.version,
		"role":         st.Role,
		"term":         st.Term,
		"leader":       st.Leader,
		"commitIndex":  st.CommitIndex,
		"appliedIndex": h.machine.AppliedIndex(),
		"stateHash":    common.Hash(hash).Hex(),
		"checks":       checks,
	}
}

// proposalsView is the pipeline as the API serves it, with the intake and
// commit rates added to its queue statistics.
type proposalsView struct {
	*pipeline.Pipeline
	ingress, commits *rate.Meter
}

func (v proposalsView) QueueStats() api.QueueStats {
	q := v.Pipeline.QueueStats()
	q.IngressPerSec, q.CommitPerSec = v.ingress.PerSecond(), v.commits.PerSecond()
	return q
}
