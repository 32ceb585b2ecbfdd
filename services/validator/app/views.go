package app

import (
	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/services/validator/internal/pipeline"
	"github.com/contentledger/contentledger/services/validator/internal/rate"
)

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
