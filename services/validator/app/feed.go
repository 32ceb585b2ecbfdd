package app

import (
	"fmt"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/contentledger/contentledger/services/validator/internal/opsevents"
	"github.com/contentledger/contentledger/services/validator/internal/payments"
	"github.com/contentledger/contentledger/services/validator/internal/pipeline"
)

// watcherLagStale is how far the chain-watcher's cursor may trail the
// chain's safe block before the feed counts as stale: a watcher keeping up
// trails by a poll's blocks; one catching up after a stop, by far more,
// and payments of recent blocks are not published yet.
const watcherLagStale = 64

// chainFeed is the pipeline's view of the chain feed (pipeline.Feed): the
// chain-watcher's status and this validator's payment follower.
type chainFeed struct {
	status   *payments.ChainStatus
	follower *payments.Follower
}

func (f *chainFeed) Position() pipeline.FeedPosition {
	s, at, ok := f.status.Latest()
	if !ok {
		return pipeline.FeedPosition{Stale: "no status from the chain-watcher yet"}
	}
	pos := pipeline.FeedPosition{Known: true, Head: s.Head.Number}
	if s.Cursor != nil {
		pos.Cursor = s.Cursor.Number
	}
	_, pos.Stale = f.staleness(s.Safe, pos.Cursor, at)
	return pos
}

// Staleness says why the feed is stale, an opsevents.Feed* reason and in
// words (what Position says), or "" when it is current: the chain-watcher's
// lag as the operational events report it (opsevents.FeedWatch).
func (f *chainFeed) Staleness() (reason, detail string) {
	s, at, ok := f.status.Latest()
	if !ok {
		return opsevents.FeedNoStatus, "no status from the chain-watcher yet"
	}
	var cursor uint64
	if s.Cursor != nil {
		cursor = s.Cursor.Number
	}
	return f.staleness(s.Safe, cursor, at)
}

// staleness judges a status received at at, whose watcher published
// payments up to block cursor while the chain's safe block was safe.
func (f *chainFeed) staleness(safe, cursor uint64, at time.Time) (reason, detail string) {
	switch age, stale := f.status.Stale(at); {
	case stale:
		return opsevents.FeedStatusOld, fmt.Sprintf("the chain-watcher's last status is %s old", age.Round(time.Second))
	case safe > cursor+watcherLagStale:
		return opsevents.FeedWatcherBehind, fmt.Sprintf("the chain-watcher has published payments up to block %d, %d blocks behind the chain", cursor, safe-cursor)
	case f.follower.Behind():
		return opsevents.FeedIndexBehind, "this validator's payment index has not read the whole payment stream yet"
	}
	return "", ""
}

func (f *chainFeed) Seen(id common.Hash) (uint64, bool) {
	for _, p := range f.status.PendingAll() {
		if p.ProposalID == id {
			return p.BlockNumber, true
		}
	}
	return 0, false
}

func (f *chainFeed) Changed() <-chan struct{} { return f.status.Changed() }
