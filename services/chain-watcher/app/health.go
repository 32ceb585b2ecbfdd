package app

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/contentledger/contentledger/pkg/httpserver"

	"github.com/contentledger/contentledger/pkg/payment"
	"github.com/contentledger/contentledger/services/chain-watcher/internal/rpcpool"
	"github.com/contentledger/contentledger/services/chain-watcher/internal/watch"
)

// status is what /health reports. It belongs to one Run.
type status struct {
	mode Mode // fixed at start

	mu        sync.Mutex
	ready     bool
	chainID   uint64
	cursor    *watch.Cursor
	head      uint64
	lastErr   string
	lastErrAt time.Time
	updatedAt time.Time
	rangeSize uint64
	// endpoints reports the RPC endpoints' health; nil until they exist.
	endpoints func() []rpcpool.EndpointHealth
	epochs    epochReport
	chain     chainReport
}

func newStatus(mode Mode) *status { return &status{mode: mode} }

func (s *status) setReady(chainID uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ready, s.chainID = true, chainID
}

func (s *status) setCursor(c watch.Cursor) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cursor = &c
	s.updatedAt = time.Now()
}

// cursorNow is the relay's cursor as last reported (the chain status
// reads it from here: the relay's own state is its loop's alone).
func (s *status) cursorNow() (watch.Cursor, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cursor == nil {
		return watch.Cursor{}, false
	}
	return *s.cursor, true
}

// setChain records a step of the chain status loop. Its errors do not fail
// /health: payments are still published.
func (s *status) setChain(cs payment.WatcherStatus, written bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.chain.LastError, s.chain.LastErrorAt = err.Error(), time.Now().UTC().Format(time.RFC3339Nano)
		return
	}
	s.chain.LastError, s.chain.LastErrorAt = "", ""
	s.chain.Head, s.chain.Safe, s.chain.Finalized, s.chain.Pending = cs.Head.Number, cs.Safe, cs.Finalized, len(cs.Pending)
	s.chain.HeadTime = time.Unix(int64(cs.HeadTimeS), 0).UTC().Format(time.RFC3339)
	if written {
		s.chain.Written = true
		s.chain.WrittenAt = time.UnixMilli(cs.ObservedAtMs).UTC().Format(time.RFC3339Nano)
	}
}

func (s *status) setHead(h uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.head = h
}

func (s *status) setRangeSize(n uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rangeSize = n
}

func (s *status) setEndpoints(f func() []rpcpool.EndpointHealth) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.endpoints = f
}

// setStep records the outcome of the last watch step: an error makes
// /health fail until a step succeeds.
func (s *status) setStep(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		s.lastErr = ""
		return
	}
	s.lastErr, s.lastErrAt = err.Error(), time.Now()
}

// setEpoch records an update the stream acknowledged.
func (s *status) setEpoch(u payment.EpochUpdate) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.epochs.Published = true
	s.epochs.Current, s.epochs.Finalized, s.epochs.Source = u.Current, u.Finalized, u.Source
	s.epochs.BlockNumber, s.epochs.Slot = u.BlockNumber, u.Slot
	s.epochs.ObservedAt = time.UnixMilli(u.ObservedAtMs).UTC().Format(time.RFC3339Nano)
}

// setEpochRead records the outcome of the last epoch read. Unlike a watch
// step's, an error does not fail /health: payments are still published,
// and validators keep the last epochs they have.
func (s *status) setEpochRead(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		s.epochs.LastError, s.epochs.LastErrorAt = "", ""
		return
	}
	s.epochs.LastError, s.epochs.LastErrorAt = err.Error(), time.Now().UTC().Format(time.RFC3339Nano)
}

// epochReport is the epochs part of /health: the last update published
// and the last error of the epoch source.
type epochReport struct {
	// Published is false until the first update was acknowledged; the
	// figures are zero until then.
	Published   bool   `json:"published"`
	Current     uint64 `json:"current"`
	Finalized   uint64 `json:"finalized"`
	Source      string `json:"source,omitempty"`
	BlockNumber uint64 `json:"blockNumber,omitempty"`
	Slot        uint64 `json:"slot,omitempty"`
	ObservedAt  string `json:"observedAt,omitempty"` // when its figures were read
	LastError   string `json:"lastError,omitempty"`
	LastErrorAt string `json:"lastErrorAt,omitempty"`
}

// chainReport is the chain status part of /health: the chain as last read
// for the status-<chainId> key, and the loop's last error.
type chainReport struct {
	// Written is false until a status was written; WrittenAt is when
	// the last one written was read.
	Written   bool    `json:"written"`
	WrittenAt string  `json:"writtenAt,omitempty"`
	Head      uint64  `json:"head,omitempty"`
	HeadTime  string  `json:"headTime,omitempty"`
	Safe      uint64  `json:"safeBlock,omitempty"`
	Finalized *uint64 `json:"finalizedBlock,omitempty"`
	// Pending counts the payments seen above the cursor or the safe block.
	Pending     int    `json:"pendingPayments"`
	LastError   string `json:"lastError,omitempty"`
	LastErrorAt string `json:"lastErrorAt,omitempty"`
}

// healthReport is the JSON body of /health.
type healthReport struct {
	Status      string `json:"status"` // "ok", "starting" or "failing"
	Mode        Mode   `json:"mode"`   // MOCK, TESTNET or MAINNET: which presets apply
	ChainID     uint64 `json:"chainId,omitempty"`
	CursorBlock uint64 `json:"cursorBlock,omitempty"`
	CursorHash  string `json:"cursorHash,omitempty"`
	HeadBlock   uint64 `json:"headBlock,omitempty"`
	UpdatedAt   string `json:"updatedAt,omitempty"`
	LastError   string `json:"lastError,omitempty"`
	LastErrorAt string `json:"lastErrorAt,omitempty"`
	// BlockRange is the most blocks the next eth_getLogs call asks for.
	BlockRange uint64 `json:"blockRange,omitempty"`
	// Endpoints are the RPC endpoints' records, in the configured order.
	Endpoints []rpcpool.EndpointHealth `json:"endpoints,omitempty"`
	// Epochs are the epoch updates' state.
	Epochs epochReport `json:"epochs"`
	// Chain is the chain status published for the validators.
	Chain chainReport `json:"chain"`
}

// report returns the body and the HTTP status: 200 when the watcher runs and
// its last publication attempt succeeded, 503 otherwise.
func (s *status) report() (healthReport, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := healthReport{Status: "ok", Mode: s.mode, ChainID: s.chainID, HeadBlock: s.head, LastError: s.lastErr, BlockRange: s.rangeSize, Epochs: s.epochs,
		Chain: s.chain}
	if s.endpoints != nil {
		r.Endpoints = s.endpoints()
	}
	if s.cursor != nil {
		r.CursorBlock, r.CursorHash = s.cursor.Block, s.cursor.Hash.Hex()
		r.UpdatedAt = s.updatedAt.UTC().Format(time.RFC3339Nano)
	}
	if s.lastErr != "" {
		r.LastErrorAt = s.lastErrAt.UTC().Format(time.RFC3339Nano)
	}
	switch {
	case !s.ready:
		r.Status = "starting"
		return r, http.StatusServiceUnavailable
	case s.lastErr != "":
		r.Status = "failing"
		return r, http.StatusServiceUnavailable
	}
	return r, http.StatusOK
}

func (s *status) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	body, code := s.report()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(body)
}

// serveHTTP serves /health and /metrics on cfg.HTTPListener or
// cfg.HTTPAddr (none when both are empty) and returns the function that
// stops it.
func serveHTTP(cfg Config, st *status, m *metrics, log *zap.Logger) (stop func(), err error) {
	ln := cfg.HTTPListener
	if ln == nil {
		if cfg.HTTPAddr == "" {
			return func() {}, nil
		}
		ln, err = net.Listen("tcp", cfg.HTTPAddr)
		if err != nil {
			return nil, fmt.Errorf("health endpoint: %w", err)
		}
	}
	mux := http.NewServeMux()
	mux.Handle("/health", st)
	mux.Handle("/metrics", m.handler())
	httpCfg := cfg.HTTPServer()
	srv, err := httpserver.New(httpCfg, httpserver.LimitBodies(mux, httpCfg.WithDefaults().MaxBodyBytes))
	if err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("health endpoint: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ctx, ln); err != nil {
			log.Error("health and metrics endpoints stopped", zap.Error(err))
		}
	}()
	log.Info("health and metrics endpoints listening", zap.String("addr", ln.Addr().String()))
	return func() {
		cancel()
		<-done
	}, nil
}
