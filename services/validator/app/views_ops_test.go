package app

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/pkg/proposal"
	"github.com/contentledger/contentledger/pkg/signing"
	"github.com/contentledger/contentledger/services/validator/internal/blobgateway"
	"github.com/contentledger/contentledger/services/validator/internal/segments"
)

const testCID = "QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG"

// pageID is a proposal id whose default path (its first hex digits) no
// other pageID shares.
func pageID(b byte) common.Hash {
	var id common.Hash
	id[0], id[31] = b, 1
	return id
}

// formAt builds a signed write of message at the page path sub below the
// author's default organization, so that a second write can replace the
// first.
func (a author) formAt(t *testing.T, id common.Hash, sub, message string) url.Values {
	t.Helper()
	path := proposal.ContentPath("ledger", a.wallet, "default", sub)
	sig, err := signing.Sign(signing.Domain{ChainID: 1337, VerifyingContract: testContract}, signing.Proposal{
		Action: "write", ProposalID: id, Wallet: a.wallet, Path: path, Organization: "default",
		ContentType: "page", PaymentTier: "standard", MessageHash: signing.MessageHash([]byte(message)),
	}, a.key)
	if err != nil {
		t.Fatal(err)
	}
	return url.Values{
		"proposalId": {id.Hex()}, "walletAddress": {a.wallet.Hex()}, "message": {message}, "path": {sub},
		"signature": {hexutil.Encode(sig)}, "contentType": {"page"}, "paymentTier": {"standard"},
	}
}

// commit submits form and waits until it is committed; it returns the
// commit index.
func commit(t *testing.T, base string, form url.Values) uint64 {
	t.Helper()
	var receipt map[string]any
	u := base + "/v1/propose-write"
	if form.Get("message") == "" {
		u = base + "/v1/propose-delete"
	}
	if code := request(t, http.MethodPost, u, form, &receipt); code != http.StatusAccepted {
		t.Fatalf("submit: %d %v", code, receipt)
	}
	s := waitCommitted(t, base, common.HexToHash(form.Get("proposalId")))
	if s.Status != api.StatusCommitted {
		t.Fatalf("not committed: %+v", s)
	}
	return s.CommitIndex
}

// getAt polls u until its answer is of applied state at or past index:
// fragmentation figures are recomputed at most every second or so.
func getAt(t *testing.T, u string, index uint64, out interface{ applied() uint64 }) {
	t.Helper()
	waitFor(t, func() bool {
		if code := getJSON(t, u, out); code != http.StatusOK {
			t.Fatalf("GET %s: %d", u, code)
		}
		return out.applied() >= index
	})
}

type estimateAnswer struct{ api.GcEstimate }

func (e *estimateAnswer) applied() uint64 { return e.AppliedIndex }

type metricsAnswer struct{ api.FragmentationMetrics }

func (m *metricsAnswer) applied() uint64 { return m.AppliedIndex }

type runtimeAnswer struct{ api.RuntimeSnapshot }

func (r *runtimeAnswer) applied() uint64 { return r.Blobstore.AppliedIndex }

func hasGap(gaps []api.Gap, field string) bool {
	for _, g := range gaps {
		if g.Field == field && g.Reason != "" {
			return true
		}
	}
	return false
}

func TestStorageSnapshot(t *testing.T) {
	base := startMock(t)
	a := newAuthor(t)
	commit(t, base, a.form(t, pageID(0xa1), `{"title":"one","jcr:content":{"text":"x"}}`, a.key))
	last := commit(t, base, a.form(t, pageID(0xa2), `{"title":"two"}`, a.key))

	var s api.StorageSnapshot
	if code := getJSON(t, base+"/v1/ops/snapshots/storage", &s); code != http.StatusOK || s.ContractVersion != api.StorageSnapshotVersion ||
		s.NodeID != 1 || s.AppliedIndex < last {
		t.Fatalf("storage snapshot: %d %+v", code, s)
	}
	if s.Segments.Count < 2 || s.Segments.LastIndex < last || s.Segments.NodeWrites != 3 || s.Segments.NodeDeletes != 0 ||
		!s.Segments.ChainVerified || s.Segments.ChainBreaks != 0 || len(s.Segments.Generations) != 1 || s.Segments.CurrentGeneration != 0 {
		t.Fatalf("segments %+v", s.Segments)
	}
	if s.Tars.Count != 1 || s.Tars.Closed != 0 || s.Tars.Newest != "data00000a.tar" || s.Tars.Bytes != s.Segments.Bytes ||
		s.Tars.TargetBytes != segments.DefaultTarTargetBytes || s.Tars.PackingEfficiency != nil || !hasGap(s.Gaps, "tars.packingEfficiency") {
		t.Fatalf("tars %+v, gaps %+v", s.Tars, s.Gaps)
	}
	if s.TarFiles != nil {
		t.Fatalf("TAR files without ?detail=tars: %+v", s.TarFiles)
	}
	if len(s.Pebble.Levels) != 7 || s.Pebble.DiskSpaceUsageBytes == 0 || s.Pebble.WAL.Files == 0 || s.Pebble.WAL.BytesWritten == 0 ||
		s.Pebble.WriteStalls == nil || *s.Pebble.WriteStalls != 0 || s.Pebble.Stalled || hasGap(s.Gaps, "pebble.writeStalls") {
		t.Fatalf("pebble %+v", s.Pebble)
	}
	// Raft's log and hard state are synced: the WAL has been.
	if s.Pebble.Fsync.Count == 0 || s.Pebble.Fsync.P50Ms == nil || *s.Pebble.Fsync.P99Ms < *s.Pebble.Fsync.P50Ms {
		t.Fatalf("fsync %+v", s.Pebble.Fsync)
	}
	if s.Raft.LastIndex < last || s.Raft.FirstIndex == 0 {
		t.Fatalf("raft %+v", s.Raft)
	}
	if runtime.GOOS == "linux" {
		if d := s.Disk; d == nil || d.TotalBytes == 0 || d.UsedRatio <= 0 || d.UsedRatio > 1 || d.UsedBytes > d.TotalBytes || d.Path == "" {
			t.Fatalf("disk %+v", s.Disk)
		}
	}

	var d api.StorageSnapshot
	getJSON(t, base+"/v1/ops/snapshots/storage?detail=tars", &d)
	if len(d.TarFiles) != 1 {
		t.Fatalf("TAR files %+v", d.TarFiles)
	}
	f := d.TarFiles[0]
	if f.Name != "data00000a.tar" || f.Number != 0 || f.Closed || !f.ChainOK || f.PrevHash != hexHash([32]byte{}) ||
		f.HeadHash != d.Segments.HeadHash || f.Segments != int(d.Segments.Count) || f.FirstIndex != d.Segments.FirstIndex ||
		f.Bytes != d.Segments.Bytes || f.Fill <= 0 || f.Fill >= 1 {
		t.Fatalf("TAR file %+v, segments %+v", f, d.Segments)
	}
	var e apierror.Body
	if code := getJSON(t, base+"/v1/ops/snapshots/storage?detail=all", &e); code != http.StatusBadRequest || e.Error.Details["field"] != "detail" {
		t.Fatalf("?detail=all: %d %+v", code, e.Error)
	}
}

func TestRuntimeSnapshot(t *testing.T) {
	base := startMock(t)
	a := newAuthor(t)
	last := commit(t, base, a.form(t, pageID(0xb1), `{"title":"asset","ledger:cid":"`+testCID+`"}`, a.key))
	commit(t, base, a.form(t, pageID(0xb2), `{"title":"plain"}`, a.key))

	var r runtimeAnswer
	getAt(t, base+"/v1/ops/snapshots/runtime", last, &r)
	if r.ContractVersion != api.RuntimeSnapshotVersion || r.NodeID != 1 || r.UptimeMs <= 0 || r.StartedAt.After(r.At) {
		t.Fatalf("runtime snapshot %+v", r.RuntimeSnapshot)
	}
	g := r.Go
	if g.Version != runtime.Version() || g.Goroutines == 0 || g.Heap.ObjectsBytes == 0 || g.Heap.TotalBytes < g.Heap.ObjectsBytes ||
		g.NumCPU != runtime.NumCPU() || g.GOMAXPROCS == 0 {
		t.Fatalf("go %+v", g)
	}
	if (g.GC.Pauses == 0) != (g.GC.P50Ms == nil) || g.GC.P50Ms != nil && *g.GC.MaxMs < *g.GC.P50Ms {
		t.Fatalf("gc %+v", g.GC)
	}
	if runtime.GOOS == "linux" && (r.Process.RSSBytes == nil || *r.Process.RSSBytes == 0 || r.Process.OpenFDs == nil ||
		r.Process.CPUSeconds == nil || r.Process.PID == 0) {
		t.Fatalf("process %+v", r.Process)
	}
	// One live node carries a CID; no IPFS gateway is configured, so none
	// is checked, and the gaps say so.
	if b := r.Blobstore; b.CidMappings != 1 || b.GatewayURL != nil || b.LastCheck != nil || b.Check != nil ||
		!hasGap(r.Gaps, "blobstore.gatewayUrl") || !hasGap(r.Gaps, "blobstore.lastCheck") {
		t.Fatalf("blobstore %+v, gaps %+v", b, r.Gaps)
	}
	// MOCK mode without event publication opens no NATS connection: the
	// list is empty, not absent (absent is a validator from before it).
	if r.NATS == nil || len(r.NATS) != 0 {
		t.Fatalf("nats %+v", r.NATS)
	}
}

// TestRuntimeSnapshotGateway: a validator configured with an IPFS gateway
// publishes it, credentials redacted, with a gap for the check until the
// first one ends, and then the check's outcome; a gateway that fails is
// reported, and the validator serves on.
func TestRuntimeSnapshotGateway(t *testing.T) {
	release := make(chan struct{})
	var asked atomic.Int64
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The first check waits until the test has seen the snapshot
		// before it.
		if asked.Add(1) == 1 {
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
		}
		if u, p, _ := r.BasicAuth(); r.URL.Path != "/ipfs/"+blobgateway.ProbeCID || u != "user" || p != "secret" {
			http.Error(w, "unexpected request", http.StatusBadRequest)
			return
		}
		_, _ = w.Write([]byte{0x0a, 0x02, 0x08, 0x01})
	}))
	t.Cleanup(gw.Close) // after the validator stops, which ends a check still waiting
	gatewayURL := strings.Replace(gw.URL, "http://", "http://user:secret@", 1) + "/"
	published := strings.Replace(gw.URL, "http://", "http://user:xxxxx@", 1)
	base := startMockWith(t, func(c *Config) { c.IPFSGateway = gatewayURL })

	var r api.RuntimeSnapshot
	waitFor(t, func() bool { getJSON(t, base+"/v1/ops/snapshots/runtime", &r); return asked.Load() >= 1 })
	if b := r.Blobstore; b.GatewayURL == nil || *b.GatewayURL != published || b.LastCheck != nil || b.Check != nil ||
		hasGap(r.Gaps, "blobstore.gatewayUrl") || !hasGap(r.Gaps, "blobstore.lastCheck") {
		t.Fatalf("before the first check ends: blobstore %+v, gaps %+v", b, r.Gaps)
	}
	close(release)
	waitFor(t, func() bool { getJSON(t, base+"/v1/ops/snapshots/runtime", &r); return r.Blobstore.LastCheck != nil })
	b := r.Blobstore
	if c := b.Check; c == nil || !c.OK || c.StatusCode == nil || *c.StatusCode != http.StatusOK || c.LatencyMs <= 0 || c.Error != "" ||
		b.LastCheck.After(r.At) || *b.GatewayURL != published || len(gapsOf(r.Gaps, "blobstore.")) != 0 {
		t.Fatalf("after the first check: blobstore %+v, check %+v, gaps %+v", b, b.Check, r.Gaps)
	}
	if strings.Contains(getBody(t, base+"/v1/ops/snapshots/runtime"), "secret") {
		t.Fatal("the runtime snapshot shows the gateway's password")
	}
	var values api.ConfigValues
	getJSON(t, base+"/v1/config/osgi", &values)
	// The configuration views show the value as set, credentials redacted.
	if got := values.Components["blobstore"][configPrefix+"IPFS_GATEWAY"]; got != published+"/" {
		t.Fatalf("the configuration views show the gateway as %v, want %s/", got, published)
	}

	down := startMockWith(t, func(c *Config) { c.IPFSGateway = deadGateway(t) })
	waitFor(t, func() bool { getJSON(t, down+"/v1/ops/snapshots/runtime", &r); return r.Blobstore.LastCheck != nil })
	if c := r.Blobstore.Check; c == nil || c.OK || c.StatusCode != nil || c.Error == "" || len(gapsOf(r.Gaps, "blobstore.")) != 0 {
		t.Fatalf("an unreachable gateway: check %+v, gaps %+v", c, r.Gaps)
	}
	var h map[string]any
	if code := getJSON(t, down+"/health", &h); code != http.StatusOK {
		t.Fatalf("health with an unreachable gateway: %d %v", code, h)
	}
}

// deadGateway is the URL of a port nothing listens on.
func deadGateway(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return "http://" + ln.Addr().String()
}

func gapsOf(gaps []api.Gap, prefix string) []api.Gap {
	var out []api.Gap
	for _, g := range gaps {
		if strings.HasPrefix(g.Field, prefix) {
			out = append(out, g)
		}
	}
	return out
}

func getBody(t *testing.T, u string) string {
	t.Helper()
	var body json.RawMessage
	getJSON(t, u, &body)
	return string(body)
}

// TestSnapshotsTakeNoToken: the contract exempts the snapshot routes from
// SVC_VALIDATOR_AUTH_TOKEN; the other new routes require it.
func TestSnapshotsTakeNoToken(t *testing.T) {
	base := startMockWith(t, func(c *Config) { c.AuthToken = "s3cret" })
	for _, path := range []string{"/v1/ops/snapshots/storage", "/v1/ops/snapshots/runtime"} {
		// Without a token: the version and a gap saying where the rest is.
		var body map[string]any
		if code := getJSON(t, base+path, &body); code != http.StatusOK || body["contractVersion"] == nil || body["nodeId"] != float64(0) ||
			!strings.Contains(fmt.Sprint(body["gaps"]), "ops-read") {
			t.Errorf("%s without a token: %d %v", path, code, body)
		}
		body = nil
		if code := getJSONWith(t, base+path, "s3cret", &body); code != http.StatusOK || body["nodeId"] != float64(1) {
			t.Errorf("%s with the token: %d %v", path, code, body)
		}
	}
	for _, path := range []string{"/v1/gc/status", "/v1/gc/estimate", "/v1/compaction/proposals", "/v1/fragmentation/metrics",
		"/v1/fragmentation/top", "/v1/fragmentation/metrics/0x70997970c51812dc3a010c7d01b50e0d17dc79c8"} {
		var e apierror.Body
		if code := getJSON(t, base+path, &e); code != http.StatusUnauthorized || e.Error == nil || e.Error.Code != apierror.Unauthorized {
			t.Errorf("%s without a token: %d %+v", path, code, e.Error)
		}
	}
}

func TestGcStatusAndCompactionProposals(t *testing.T) {
	base := startMock(t)
	a := newAuthor(t)
	wallet := strings.ToLower(a.wallet.Hex())
	var st api.GcStatus
	if code := getJSON(t, base+"/v1/gc/status", &st); code != http.StatusOK || st.ContractVersion != api.GcStatusVersion ||
		st.Debt.Accounts != 0 || st.Debt.WalletsBlocked != 0 || st.Debt.DefaultLimit != "100.00" || st.LastRun != nil ||
		!hasGap(st.Gaps, "lastRun") || st.Generations.Retained != 2 || len(st.Generations.Present) != 0 {
		t.Fatalf("a fresh validator: %d %+v", code, st)
	}

	written := pageID(0xc1)
	commit(t, base, a.form(t, written, `{"title":"to delete"}`, a.key))
	commit(t, base, a.deleteForm(t, pageID(0xc2), written))
	if getJSON(t, base+"/v1/gc/status", &st); st.Debt.Accounts != 1 || st.Debt.PendingDebt != "0.10" || st.Debt.ExecutedDebt != "0.00" ||
		st.Debt.Deletes != 1 || st.Debt.DeletedBytes == 0 || st.Debt.WalletsBlocked != 0 || len(st.Debt.BlockedWallets) != 0 ||
		len(st.Generations.Present) != 1 || st.Generations.Current != 0 {
		t.Fatalf("after a delete: %+v", st)
	}
	accountURL := base + "/v1/gc/account/" + wallet
	var acc api.GcAccount
	if code := operate(t, accountURL+"/execute-pending", "", &acc); code != http.StatusOK {
		t.Fatalf("execute-pending: %d", code)
	}
	if code := operate(t, accountURL+"/set-limit", `{"limit":"0.10"}`, &acc); code != http.StatusOK || !acc.WritesBlocked {
		t.Fatalf("set-limit: %d %+v", code, acc)
	}
	// The changes are applied when the routes answer.
	if getJSON(t, base+"/v1/gc/status", &st); st.Debt.ExecutedDebtMicros != 100_000 || st.Debt.PendingDebtMicros != 0 ||
		st.Debt.WalletsBlocked != 1 || len(st.Debt.BlockedWallets) != 1 || st.Debt.BlockedWallets[0] != wallet || st.Debt.BlockedWalletsTruncated {
		t.Fatalf("a blocked wallet: %+v", st.Debt)
	}
	if code := operate(t, accountURL+"/pay", `{"amount":"0.10"}`, &acc); code != http.StatusOK || acc.WritesBlocked {
		t.Fatalf("pay: %d %+v", code, acc)
	}
	if getJSON(t, base+"/v1/gc/status", &st); st.Debt.WalletsBlocked != 0 || st.Debt.Paid != "0.10" || st.Debt.ExecutedDebt != "0.00" {
		t.Fatalf("after paying: %+v", st.Debt)
	}

	var cp api.CompactionProposals
	if code := getJSON(t, base+"/v1/compaction/proposals", &cp); code != http.StatusOK || cp.ContractVersion != api.CompactionProposalsVersion ||
		cp.Proposals == nil || len(cp.Proposals) != 0 || !hasGap(cp.Gaps, "proposals") || cp.AppliedIndex == 0 {
		t.Fatalf("compaction proposals: %d %+v", code, cp)
	}
}

// TestFragmentationAndEstimate writes a page and replaces it (wallet a),
// writes a page once (wallet b), and deletes a page (wallet c), then holds
// the fragmentation and estimate routes to each other and to what was done.
func TestFragmentationAndEstimate(t *testing.T) {
	base := startMock(t)
	a, b, c := newAuthor(t), newAuthor(t), newAuthor(t)
	commit(t, base, a.formAt(t, pageID(0xd1), "page/home", `{"title":"first revision, somewhat longer"}`))
	commit(t, base, a.formAt(t, pageID(0xd2), "page/home", `{"title":"second"}`))
	commit(t, base, b.form(t, pageID(0xd3), `{"title":"only"}`, b.key))
	written := pageID(0xd4)
	commit(t, base, c.form(t, written, `{"title":"gone"}`, c.key))
	last := commit(t, base, c.deleteForm(t, pageID(0xd5), written))

	var m metricsAnswer
	getAt(t, base+"/v1/fragmentation/metrics", last, &m)
	if m.ContractVersion != api.FragmentationMetricsVersion || m.Totals.Wallets != 3 || len(m.Wallets) != 3 || m.WalletsTruncated ||
		m.Totals.TarFiles != 1 || m.ComputedAt.IsZero() {
		t.Fatalf("metrics %+v", m.FragmentationMetrics)
	}
	by := map[string]api.WalletFragmentation{}
	var sum api.FragmentationTotals
	for i, w := range m.Wallets {
		if i > 0 && m.Wallets[i-1].Wallet >= w.Wallet {
			t.Fatalf("wallets not in address order: %+v", m.Wallets)
		}
		if w.DeadBytes != w.BytesWritten-w.LiveBytes || w.TarFilesTouched != 1 {
			t.Fatalf("wallet %+v", w)
		}
		by[w.Wallet] = w
		sum.BytesWritten += w.BytesWritten
		sum.LiveBytes += w.LiveBytes
	}
	wa, wb, wc := by[strings.ToLower(a.wallet.Hex())], by[strings.ToLower(b.wallet.Hex())], by[strings.ToLower(c.wallet.Hex())]
	if wa.NodeWrites != 2 || wa.LiveNodes != 1 || wa.DeadBytes == 0 || wa.LiveBytes == 0 || wa.FragmentationScore <= 0 || wa.FragmentationScore >= 1 ||
		wa.FragmentationScore != float64(wa.DeadBytes)/float64(wa.BytesWritten) {
		t.Fatalf("a replaced its page: %+v", wa)
	}
	if wb.NodeWrites != 1 || wb.LiveNodes != 1 || wb.DeadBytes != 0 || wb.FragmentationScore != 0 {
		t.Fatalf("b wrote once: %+v", wb)
	}
	if wc.NodeWrites != 1 || wc.NodeDeletes != 1 || wc.LiveNodes != 0 || wc.LiveBytes != 0 || wc.FragmentationScore != 1 {
		t.Fatalf("c deleted its page: %+v", wc)
	}
	if sum.BytesWritten != m.Totals.BytesWritten || sum.LiveBytes != m.Totals.LiveBytes ||
		m.Totals.DeadBytes != sum.BytesWritten-sum.LiveBytes {
		t.Fatalf("totals %+v, wallets add up to %+v", m.Totals, sum)
	}

	var one api.FragmentationWallet
	if code := getJSON(t, base+"/v1/fragmentation/metrics/"+wa.Wallet, &one); code != http.StatusOK ||
		one.ContractVersion != api.FragmentationWalletVersion || one.WalletFragmentation != wa || one.AppliedIndex != m.AppliedIndex {
		t.Fatalf("one wallet: %d %+v, want %+v", code, one, wa)
	}
	var e apierror.Body
	if code := getJSON(t, base+"/v1/fragmentation/metrics/"+strings.ToLower(newAuthor(t).wallet.Hex()), &e); code != http.StatusNotFound ||
		e.Error.Code != apierror.NotFound {
		t.Fatalf("a wallet that wrote nothing: %d %+v", code, e.Error)
	}
	if code := getJSON(t, base+"/v1/fragmentation/metrics/0x12", &e); code != http.StatusBadRequest {
		t.Fatalf("a malformed wallet: %d %+v", code, e.Error)
	}

	var top api.FragmentationTop
	if code := getJSON(t, base+"/v1/fragmentation/top?limit=2", &top); code != http.StatusOK || top.ContractVersion != api.FragmentationTopVersion ||
		top.Limit != 2 || len(top.Wallets) != 2 || top.Wallets[0] != wc || top.Wallets[1] != wa {
		t.Fatalf("top 2: %d %+v", code, top)
	}
	if getJSON(t, base+"/v1/fragmentation/top", &top); top.Limit != api.DefaultFragmentationTop || len(top.Wallets) != 3 || top.Wallets[2] != wb {
		t.Fatalf("top: %+v", top)
	}
	for _, q := range []string{"0", "-1", "x", "", "1.5"} {
		if code := getJSON(t, base+"/v1/fragmentation/top?limit="+q, &e); code != http.StatusBadRequest || e.Error.Details["field"] != "limit" {
			t.Errorf("limit=%q: %d %+v", q, code, e.Error)
		}
	}

	var est estimateAnswer
	getAt(t, base+"/v1/gc/estimate", m.AppliedIndex, &est)
	if est.ContractVersion != api.GcEstimateVersion || len(est.ByTar) != 1 || est.ByTar[0].Name != "data00000a.tar" ||
		est.WrittenBytes != m.Totals.BytesWritten || est.LiveBytes != m.Totals.LiveBytes || est.SegmentBytes <= est.WrittenBytes ||
		est.ReclaimableBytes != est.SegmentBytes-est.LiveBytes || est.Wallet != "" {
		t.Fatalf("estimate %+v, fragmentation totals %+v", est.GcEstimate, m.Totals)
	}
	getAt(t, base+"/v1/gc/estimate?wallet="+wa.Wallet, m.AppliedIndex, &est)
	if est.Wallet != wa.Wallet || est.WrittenBytes != wa.BytesWritten || est.LiveBytes != wa.LiveBytes || est.ReclaimableBytes != wa.DeadBytes ||
		len(est.ByTar) != 1 || est.ByTar[0].ReclaimableBytes != wa.DeadBytes {
		t.Fatalf("estimate of %s: %+v, fragmentation %+v", wa.Wallet, est.GcEstimate, wa)
	}
	for _, q := range []string{"?wallet=", "?wallet=0x12"} {
		if code := getJSON(t, base+"/v1/gc/estimate"+q, &e); code != http.StatusBadRequest || e.Error.Details["field"] != "wallet" {
			t.Errorf("%s: %d %+v", q, code, e.Error)
		}
	}
}
