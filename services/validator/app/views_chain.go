package app

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/payment"
	"github.com/contentledger/contentledger/services/validator/internal/payments"
)

// streamsKeptFor is how long the streams' state is reused: one JetStream
// API request per stream, and the edge asks every validator about as often.
const streamsKeptFor = time.Second

// chainViews serves /v1/chain/status: the chain-watcher's last status as
// this validator received it, and the JetStream streams the ledger uses.
type chainViews struct {
	cfg    Config
	status *payments.ChainStatus // nil in MOCK mode: no watcher
	js     jetstream.JetStream   // nil when this validator uses no NATS
	now    func() time.Time

	mu      sync.Mutex
	streams []api.StreamState
	missing []api.Gap
	readAt  time.Time
}

func (v *chainViews) register(e *echo.Echo) {
	e.GET("/v1/chain/status", v.serveStatus)
}

func (v *chainViews) serveStatus(c echo.Context) error {
	out := api.ChainStatus{ContractVersion: api.ChainStatusVersion, NodeID: v.cfg.NodeID, Mode: string(v.cfg.Mode),
		ChainID: v.cfg.ChainID, Gaps: []api.Gap{}}
	if v.status == nil {
		out.Gaps = append(out.Gaps, api.Gap{Field: "watcher", Reason: "MOCK mode: no chain-watcher runs"})
	} else if s, at, ok := v.status.Latest(); ok {
		out.Watcher = watcherView(s, at, v.now())
	} else {
		out.Gaps = append(out.Gaps, api.Gap{Field: "watcher",
			Reason: "no status received from the chain-watcher yet (bucket " + payments.DefaultStatusBucket + ", key status-<chainId>)"})
	}
	if v.js == nil {
		out.Gaps = append(out.Gaps, api.Gap{Field: "streams", Reason: "this validator uses no NATS"})
	} else {
		streams, missing := v.streamStates(c.Request().Context())
		out.Streams = streams
		out.Gaps = append(out.Gaps, missing...)
	}
	return c.JSON(http.StatusOK, out)
}

// watcherView is the watcher's status s, received at, as of now.
func watcherView(s payment.WatcherStatus, at, now time.Time) *api.WatcherStatus {
	w := &api.WatcherStatus{Head: s.Head.Number, HeadHash: s.Head.Hash.Hex(), HeadTime: time.Unix(int64(s.HeadTimeS), 0).UTC(),
		FinalizedBlock: s.Finalized, SafeBlock: s.Safe, Confirmations: s.Confirmations, LagBlocks: s.LagBlocks(),
		PendingPayments: len(s.Pending), PendingTruncated: s.PendingTruncated,
		ObservedAt: time.UnixMilli(s.ObservedAtMs).UTC(), ReceivedAt: at.UTC()}
	w.AgeMs, w.HeadAgeMs = now.UnixMilli()-s.ObservedAtMs, now.Sub(w.HeadTime).Milliseconds()
	if s.Cursor != nil {
		block, hash := s.Cursor.Number, s.Cursor.Hash.Hex()
		headLag := s.Head.Number - min(s.Head.Number, block)
		w.CursorBlock, w.CursorHash, w.HeadLagBlocks = &block, &hash, &headLag
	}
	return w
}

// streamStates reads the payments and events streams' info, reused for
// streamsKeptFor. A stream not found or not answered is a gap.
func (v *chainViews) streamStates(ctx context.Context) ([]api.StreamState, []api.Gap) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.streams != nil && v.now().Sub(v.readAt) < streamsKeptFor {
		return v.streams, v.missing
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	streams, missing := []api.StreamState{}, []api.Gap{}
	var names []string
	if v.status != nil {
		names = append(names, v.cfg.PaymentStream)
	}
	if v.cfg.PublishesEvents() {
		names = append(names, v.cfg.eventStream().Name)
	}
	for _, name := range names {
		s, err := v.js.Stream(ctx, name)
		var info *jetstream.StreamInfo
		if err == nil {
			info, err = s.Info(ctx)
		}
		if err != nil {
			missing = append(missing, api.Gap{Field: "streams." + name, Reason: "not read: " + err.Error()})
			continue
		}
		st := info.State
		streams = append(streams, api.StreamState{Name: name, Messages: st.Msgs, Bytes: st.Bytes, FirstSeq: st.FirstSeq,
			LastSeq: st.LastSeq, Consumers: st.Consumers, ReadAt: v.now().UTC()})
	}
	v.streams, v.missing, v.readAt = streams, missing, v.now()
	return streams, missing
}
