package routes

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/services/edge/internal/auth"
)

func signalByID(t *testing.T, data map[string]any, id string) map[string]any {
	t.Helper()
	for _, s := range data["signals"].([]any) {
		if s := s.(map[string]any); s["id"] == id {
			return s
		}
	}
	t.Fatalf("no signal %s in %v", id, data)
	return nil
}

func gapFields(data map[string]any) []string {
	var out []string
	for _, g := range data["gaps"].([]any) {
		out = append(out, g.(map[string]any)["field"].(string))
	}
	return out
}

// TestNetworkChain: the chain figures and the streams come from the
// validators' chain status, the watcher's lag is its lag behind the safe
// block, and what no validator can tell is null with a gap.
func TestNetworkChain(t *testing.T) {
	fc := newCluster(t, 3)
	srv := edge(t, auth.Lanes{}, fc.urls()...)
	data := getData(t, srv.URL+"/ops/v1/network")
	chain := data["chain"].(map[string]any)
	if chain["chainId"] != float64(11155111) || chain["head"] != float64(1000) || chain["headAgeMs"] != float64(4000) ||
		chain["finalizedBlock"] != float64(960) || chain["watcherLagBlocks"] != float64(1) || chain["safeBlock"] != float64(998) ||
		chain["cursorBlock"] != float64(997) || chain["headLagBlocks"] != float64(3) || chain["statusAgeMs"] != float64(500) ||
		chain["reportedBy"] != fc.nodes[0].srv.URL {
		t.Fatalf("chain %v", chain)
	}
	streams := data["nats"].(map[string]any)["streams"].([]any)
	if len(streams) != 2 || streams[0].(map[string]any)["name"] != "CHAIN_EVENTS" || streams[0].(map[string]any)["messages"] != float64(40) ||
		streams[1].(map[string]any)["consumers"] != float64(0) {
		t.Fatalf("streams %v", streams)
	}
	if g := gapFields(data); len(g) != 0 {
		t.Fatalf("gaps %v", g)
	}
	if s := signalByID(t, getData(t, srv.URL+"/ops/v1/signals"), "watcherLag"); s["value"] != float64(1) || s["severity"] != "ok" ||
		s["source"] != srcChainStatus {
		t.Fatalf("watcher lag %v", s)
	}

	answer := func(f *fake, cs api.ChainStatus) {
		f.answer(srcChainStatus, func(w http.ResponseWriter, r *http.Request) { _ = json.NewEncoder(w).Encode(cs) })
	}
	epoch := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for lag, want := range map[uint64]string{11: "ok", 12: "warn", 63: "warn", 64: "critical"} {
		answer(fc.nodes[1], fakeChainStatus(2, epoch, lag))
		one := edge(t, auth.Lanes{}, fc.nodes[1].srv.URL)
		d := getData(t, one.URL+"/ops/v1/signals")
		if s := signalByID(t, d, "watcherLag"); s["value"] != float64(lag) || s["severity"] != want || d["status"] != want {
			t.Errorf("lag %d: %v, status %v", lag, s, d["status"])
		}
	}

	// A head stamped ahead of the validator's clock is 0 ms old; a stale
	// status, or one without a finalized block, leaves those figures
	// unknown and says why.
	stale := fakeChainStatus(2, epoch, 80)
	stale.Watcher.HeadAgeMs, stale.Watcher.AgeMs, stale.Watcher.FinalizedBlock = -3000, statusStaleMs+1, nil
	answer(fc.nodes[1], stale)
	one := edge(t, auth.Lanes{}, fc.nodes[1].srv.URL)
	data = getData(t, one.URL+"/ops/v1/network")
	chain = data["chain"].(map[string]any)
	if chain["headAgeMs"] != float64(0) || chain["finalizedBlock"] != nil || chain["watcherLagBlocks"] != nil || chain["head"] != float64(1000) {
		t.Fatalf("stale chain %v", chain)
	}
	if g := strings.Join(gapFields(data), ","); g != "chain.finalizedBlock,chain.watcherLagBlocks" {
		t.Fatalf("stale gaps %s", g)
	}
	d := getData(t, one.URL+"/ops/v1/signals")
	if s := signalByID(t, d, "watcherLag"); s["value"] != nil || s["severity"] != "unknown" || d["status"] != "ok" ||
		!strings.Contains(strings.Join(gapFields(d), ","), "signals.watcherLag") {
		t.Fatalf("stale status: %v", d)
	}

	// MOCK mode: no watcher; the validator's gaps come through.
	mock := api.ChainStatus{ContractVersion: api.ChainStatusVersion, NodeID: 2, Mode: "MOCK", ChainID: 1337,
		Gaps: []api.Gap{{Field: "watcher", Reason: "MOCK mode: no chain-watcher runs"}, {Field: "streams", Reason: "this validator uses no NATS"}}}
	answer(fc.nodes[1], mock)
	one = edge(t, auth.Lanes{}, fc.nodes[1].srv.URL)
	data = getData(t, one.URL+"/ops/v1/network")
	chain = data["chain"].(map[string]any)
	if chain["head"] != nil || chain["headAgeMs"] != nil || chain["finalizedBlock"] != nil || chain["watcherLagBlocks"] != nil ||
		data["nats"].(map[string]any)["streams"] != nil {
		t.Fatalf("MOCK chain %v", data)
	}
	if g := strings.Join(gapFields(data), ","); g != "chainStatus.watcher,chainStatus.streams,chain.head,chain.headAgeMs,chain.finalizedBlock,chain.watcherLagBlocks,nats.streams" {
		t.Fatalf("MOCK gaps %s", g)
	}

	// A validator without the route: the rest of the view stands.
	fc.nodes[1].answer(srcChainStatus, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNotFound) })
	one = edge(t, auth.Lanes{}, fc.nodes[1].srv.URL)
	data = getData(t, one.URL+"/ops/v1/network")
	if data["chain"].(map[string]any)["head"] != nil || len(data["peers"].([]any)) != 3 ||
		strings.Join(gapFields(data), ",") != "chain,nats.streams" {
		t.Fatalf("no chain route: %v", data)
	}
	if s := signalByID(t, getData(t, one.URL+"/ops/v1/signals"), "watcherLag"); s["severity"] != "unknown" {
		t.Fatalf("no chain route: watcher lag %v", s)
	}
}
