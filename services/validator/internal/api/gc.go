package api

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/labstack/echo/v4"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
)

// GC is the GC debt accounts (ADR 0011) as the API sees them. The
// changes go through raft and return once applied.
type GC interface {
	// Account is the wallet's account as the API shows it (a wallet
	// without one has no debt and the default limit).
	Account(wallet common.Address) (api.GcAccount, error)
	// ExecutePending moves the wallet's pending debt to executed debt now,
	// without waiting for the per-epoch job.
	ExecutePending(ctx context.Context, wallet common.Address) error
	// SetLimit sets the wallet's executed-debt limit (0: the default).
	SetLimit(ctx context.Context, wallet common.Address, micros uint64) error
	// Pay pays the wallet's debt down by micros without a transaction
	// (MOCK mode, where payments are not verified).
	Pay(ctx context.Context, wallet common.Address, micros uint64) error
	// PayTx pays the wallet's debt with the DebtPaid logs of transaction
	// tx, as observed on chain (TESTNET, MAINNET). It fails with
	// payment_not_found while no log of tx is observed, with
	// payment_tx_mismatch when its logs pay another wallet's debt, and
	// returns nil once every log paying this wallet is spent, also when
	// they were already: paying twice changes nothing.
	PayTx(ctx context.Context, wallet common.Address, tx common.Hash) error
}

// walletParam reads the :wallet path parameter, 0x and 40 hex digits.
func walletParam(c echo.Context) (common.Address, error) {
	return parseWallet(c.Param("wallet"), "walletAddress")
}

func (s *Server) gcAccount(c echo.Context) error {
	wallet, err := walletParam(c)
	if err != nil {
		return err
	}
	return s.answerAccount(c, wallet)
}

func (s *Server) answerAccount(c echo.Context, wallet common.Address) error {
	acc, err := s.deps.GC.Account(wallet)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, acc)
}

// gcChange runs a change of the account on the leader and answers the
// account as applied. parse reads the operator's JSON body (internal/api
// DESIGN.md, operator requests).
func (s *Server) gcChange(c echo.Context, parse func() error, change func(ctx context.Context, wallet common.Address) error) error {
	wallet, err := walletParam(c)
	if err != nil {
		return err
	}
	if err := parse(); err != nil {
		return err
	}
	if handled, err := s.forward(c); handled {
		return err
	}
	if err := change(c.Request().Context(), wallet); err != nil {
		return err
	}
	return s.answerAccount(c, wallet)
}

// jsonObject decodes a JSON request body (jsonBody) into v: one object,
// no unknown field; an empty body is an empty object.
func (s *Server) jsonObject(c echo.Context, v any) error {
	raw, err := s.jsonBody(c)
	if err != nil {
		return err
	}
	return decodeObject(raw, v)
}

// decodeObject decodes raw, one JSON object with only v's fields, into v.
// An empty body is an empty object.
func decodeObject(raw []byte, v any) error {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil || dec.More() {
		return apierror.New(apierror.InvalidField, "the body must be one JSON object of the route's fields: %v", err)
	}
	return nil
}

// debtField reads a debt amount of an operator body: a decimal string with
// at most 6 decimals, within [min, api.MaxDebtAmount] millionths.
func debtField(name, value string, min uint64, what string) (uint64, error) {
	micros, ok := api.ParseDebt(value)
	if !ok || micros < min || micros > api.MaxDebtAmount {
		return 0, apierror.Field(name, "must be %s: a decimal string with at most 6 decimals from %s to %s, e.g. \"1.50\"",
			what, api.DebtString(min), api.DebtString(api.MaxDebtAmount))
	}
	return micros, nil
}

func (s *Server) gcExecutePending(c echo.Context) error {
	return s.gcChange(c, func() error { return s.jsonObject(c, &struct{}{}) }, s.deps.GC.ExecutePending)
}

// gcSetLimit serves POST /v1/gc/account/{wallet}/set-limit with the body
// {"limit": "100.00"} ("0": the default limit).
func (s *Server) gcSetLimit(c echo.Context) error {
	var limit uint64
	return s.gcChange(c, func() error {
		var body struct {
			Limit *string `json:"limit"`
		}
		if err := s.jsonObject(c, &body); err != nil {
			return err
		}
		if body.Limit == nil {
			return apierror.Field("limit", "is required: the executed-debt limit, e.g. \"100.00\" (\"0\": the default)")
		}
		var err error
		limit, err = debtField("limit", *body.Limit, 0, "the executed-debt limit (0: the default)")
		return err
	}, func(ctx context.Context, wallet common.Address) error { return s.deps.GC.SetLimit(ctx, wallet, limit) })
}

// gcPay serves POST /v1/gc/account/{wallet}/pay and answers the account as
// applied (ADR 0011).
//
// TESTNET and MAINNET: the body {"txHash": "0x…"} names a transaction that
// called the contract's payDebt(wallet). Its DebtPaid logs, as the
// chain-watcher published them (after the configured confirmations), pay
// the debt through raft at the contract's ETH:USDC ratio. 402
// payment_not_found while the transaction is not observed (yet: retry after
// the confirmations), 402 payment_tx_mismatch when it paid another wallet's
// debt; a transaction already spent answers the account unchanged
// (idempotent). The leader pays an observed log by itself as well, so
// calling the route is optional.
//
// MOCK: {"amount": "1.50"} pays without a transaction (payments are not
// verified).
func (s *Server) gcPay(c echo.Context) error {
	var body struct {
		TxHash string `json:"txHash"`
		Amount string `json:"amount"`
	}
	if s.cfg.Blockchain.PaymentsVerified {
		var tx common.Hash
		return s.gcChange(c, func() error {
			if err := s.jsonObject(c, &body); err != nil {
				return err
			}
			b, err := hexutil.Decode(body.TxHash)
			if err != nil || len(b) != common.HashLength {
				return apierror.Field("txHash", "must be 0x followed by 64 hex digits: the transaction that called the payment contract's payDebt")
			}
			tx = common.BytesToHash(b)
			return nil
		}, func(ctx context.Context, wallet common.Address) error { return s.deps.GC.PayTx(ctx, wallet, tx) })
	}
	var amount uint64
	return s.gcChange(c, func() error {
		if err := s.jsonObject(c, &body); err != nil {
			return err
		}
		var err error
		amount, err = debtField("amount", body.Amount, 1, "the amount paid")
		return err
	}, func(ctx context.Context, wallet common.Address) error { return s.deps.GC.Pay(ctx, wallet, amount) })
}

// gcStatus serves GET /v1/gc/status: the GC debt accounts summed at one
// applied index, the segment generations, and the last GC run.
func (s *Server) gcStatus(c echo.Context) error {
	out, err := s.deps.Segments.GcStatus()
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// gcEstimate serves GET /v1/gc/estimate[?wallet=0x…] (marker gc.estimate.v1):
// what GC could reclaim, by TAR file, from the last scan of the state.
func (s *Server) gcEstimate(c echo.Context) error {
	if !c.QueryParams().Has("wallet") {
		out, err := s.deps.Segments.GcEstimate()
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, out)
	}
	w, err := parseWallet(c.QueryParam("wallet"), "wallet")
	if err != nil {
		return err
	}
	out, err := s.deps.Segments.WalletGcEstimate(w)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// compactionProposals serves GET /v1/compaction/proposals.
func (s *Server) compactionProposals(c echo.Context) error {
	out, err := s.deps.Segments.CompactionProposals()
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}
