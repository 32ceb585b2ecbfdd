package app

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/ethereum/go-ethereum/common"

	"github.com/contentledger/contentledger/pkg/payment"
	"github.com/contentledger/contentledger/services/chain-watcher/internal/rpcpool"
	"github.com/contentledger/contentledger/services/chain-watcher/internal/watch"
)

func TestHealthTransitions(t *testing.T) {
	st := newStatus(ModeTestnet)
	get := func(method string) (int, healthReport) {
		t.Helper()
		rec := httptest.NewRecorder()
		st.ServeHTTP(rec, httptest.NewRequest(method, "/health", nil))
		var r healthReport
		if rec.Code != http.StatusMethodNotAllowed {
			if err := json.NewDecoder(rec.Body).Decode(&r); err != nil {
				t.Fatal(err)
			}
		}
		return rec.Code, r
	}
	if code, r := get(http.MethodGet); code != http.StatusServiceUnavailable || r.Status != "starting" {
		t.Errorf("before ready: %d %+v", code, r)
	}
	st.setReady(1337)
	if code, r := get(http.MethodGet); code != http.StatusOK || r.Status != "ok" || r.ChainID != 1337 || r.Mode != ModeTestnet {
		t.Errorf("ready: %d %+v", code, r)
	}
	st.setStep(errors.New("rpc down"))
	if code, r := get(http.MethodGet); code != http.StatusServiceUnavailable || r.Status != "failing" || r.LastError != "rpc down" || r.LastErrorAt == "" {
		t.Errorf("after an error: %d %+v", code, r)
	}
	st.setStep(nil)
	st.setCursor(watch.Cursor{Block: 9, Hash: common.HexToHash("0x09")})
	st.setHead(11)
	code, r := get(http.MethodGet)
	if code != http.StatusOK || r.LastError != "" || r.CursorBlock != 9 || r.HeadBlock != 11 || r.CursorHash != common.HexToHash("0x09").Hex() {
		t.Errorf("recovered: %d %+v", code, r)
	}
	st.setRangeSize(250)
	st.setEndpoints(func() []rpcpool.EndpointHealth {
		return []rpcpool.EndpointHealth{{Name: "1:a.example", Current: true, Up: true, Score: 0.9}, {Name: "2:b.example", Errors: 3}}
	})
	if _, r := get(http.MethodGet); r.BlockRange != 250 || len(r.Endpoints) != 2 || !r.Endpoints[0].Current || r.Endpoints[1].Errors != 3 {
		t.Errorf("range and endpoints: %+v", r)
	}
	if code, _ := get(http.MethodPost); code != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d", code)
	}
}

// TestHealthEpochs: /health shows the last published epoch update and the
// epoch source's last error, which does not fail the watcher's health.
func TestHealthEpochs(t *testing.T) {
	st := newStatus(ModeMock)
	st.setReady(1337)
	report := func() (healthReport, int) {
		t.Helper()
		rec := httptest.NewRecorder()
		st.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/health", nil))
		var r healthReport
		if err := json.NewDecoder(rec.Body).Decode(&r); err != nil {
			t.Fatal(err)
		}
		return r, rec.Code
	}
	if r, _ := report(); r.Epochs.Published {
		t.Fatalf("epochs before any update: %+v", r.Epochs)
	}
	st.setEpoch(payment.EpochUpdate{ChainID: 1337, Current: 10, Finalized: 8, Source: payment.EpochSourceBlockTime, BlockNumber: 99, ObservedAtMs: 1_700_000_000_000})
	st.setEpochRead(errors.New("beacon down"))
	r, code := report()
	if code != http.StatusOK || r.Status != "ok" {
		t.Fatalf("an epoch error failed health: %d %+v", code, r)
	}
	e := r.Epochs
	if !e.Published || e.Current != 10 || e.Finalized != 8 || e.BlockNumber != 99 || e.Source != payment.EpochSourceBlockTime ||
		e.ObservedAt != "2023-11-14T22:13:20Z" || e.LastError != "beacon down" || e.LastErrorAt == "" {
		t.Fatalf("epochs %+v", e)
	}
	st.setEpochRead(nil)
	if r, _ := report(); r.Epochs.LastError != "" || r.Epochs.LastErrorAt != "" || r.Epochs.Current != 10 {
		t.Fatalf("after a good read: %+v", r.Epochs)
	}
}
