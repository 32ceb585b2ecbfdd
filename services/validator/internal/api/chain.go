package api

import (
	"context"
	"net/http"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/labstack/echo/v4"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/pkg/payment"
	"github.com/contentledger/contentledger/pkg/proposal"
	"github.com/contentledger/contentledger/services/validator/internal/payments"
)

// The chain routes: /v1/chain/status (the chain-watcher's last status as
// this validator received it, and the JetStream streams the ledger uses)
// and the payment transactions by state (ADR 0007).

// ChainStatus is the chain-watcher's status as this validator keeps it
// (payments.ChainStatus).
type ChainStatus interface {
	// Latest returns the last status received and when; ok is false
	// before the first.
	Latest() (s payment.WatcherStatus, receivedAt time.Time, ok bool)
}

// Streams reads the JetStream streams the ledger uses (payments.Streams).
type Streams interface {
	States(ctx context.Context) ([]api.StreamState, []api.Gap)
}

// Transactions are the payment transactions this validator observed
// (payments.Transactions).
type Transactions interface {
	Summary() (*api.TransactionSummary, error)
	// Transaction fails with not_found for a transaction that paid for no
	// proposal this validator has observed.
	Transaction(tx common.Hash) (*api.Transaction, error)
}

// chainStatus serves GET /v1/chain/status.
func (s *Server) chainStatus(c echo.Context) error {
	out := api.ChainStatus{ContractVersion: api.ChainStatusVersion, NodeID: s.cfg.NodeID, Mode: s.cfg.Blockchain.Mode,
		ChainID: s.cfg.Blockchain.ChainID, Gaps: []api.Gap{}}
	if s.deps.ChainStatus == nil {
		out.Gaps = append(out.Gaps, api.Gap{Field: "watcher", Reason: "MOCK mode: no chain-watcher runs"})
	} else if st, at, ok := s.deps.ChainStatus.Latest(); ok {
		out.Watcher = watcherView(st, at, s.now())
	} else {
		out.Gaps = append(out.Gaps, api.Gap{Field: "watcher",
			Reason: "no status received from the chain-watcher yet (bucket " + payments.DefaultStatusBucket + ", key status-<chainId>)"})
	}
	if s.deps.Streams == nil {
		out.Gaps = append(out.Gaps, api.Gap{Field: "streams", Reason: "this validator uses no NATS"})
	} else {
		streams, missing := s.deps.Streams.States(c.Request().Context())
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

// transactionSummary serves GET /v1/transactions/summary.
func (s *Server) transactionSummary(c echo.Context) error {
	out, err := s.deps.Transactions.Summary()
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// transaction serves GET /v1/transactions/{txHash}.
func (s *Server) transaction(c echo.Context) error {
	tx, ok := proposal.ParseHash(c.Param("txHash"))
	if !ok {
		return apierror.Field("transactionId", "must be 0x followed by 64 hex digits")
	}
	out, err := s.deps.Transactions.Transaction(tx)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}
