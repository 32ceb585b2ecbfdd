package app

import (
	"errors"

	"github.com/ethereum/go-ethereum/common"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/ledgerpb"
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
