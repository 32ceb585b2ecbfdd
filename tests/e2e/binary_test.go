package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/crypto"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/pkg/blob"
	"github.com/contentledger/contentledger/pkg/proposal"
	"github.com/contentledger/contentledger/tests/harness"
	"github.com/contentledger/contentledger/tools/ledgerclient"
)

// randomBytes returns n random bytes: content no other test adds.
func randomBytes(t testing.TB, n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// addFile adds data to the network's IPFS node through its RPC API, as
// ledgerctl put does.
func addFile(t testing.TB, n *harness.Network, data []byte, cidVersion int) string {
	t.Helper()
	c, err := ledgerclient.AddToIPFS(context.Background(), http.DefaultClient, n.IPFS.APIURL(), "file.bin", bytes.NewReader(data), cidVersion)
	if err != nil {
		t.Fatalf("adding to IPFS: %v", err)
	}
	return c
}

func apiCode(err error) apierror.Code {
	var e *apierror.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// TestBinaryUploadEndToEnd runs the upload of docs/adr/0037 on make run's
// parts: a file added to the embedded IPFS node, its intent declared and
// completed (a CID of other bytes refused first), a write referencing it,
// the bytes read back through /api/blob (whole and a range), the /api/cid
// answers, and the binary events with casCid and blobId.
func TestBinaryUploadEndToEnd(t *testing.T) {
	n := harness.Start(t, harness.Options{Mode: "MOCK", IPFS: true})
	ctx := context.Background()
	key := devKey(t, 0)
	wallet := strings.ToLower(crypto.PubkeyToAddress(key.PublicKey).Hex())

	data := randomBytes(t, 1<<20+12345) // several UnixFS blocks
	id := blob.IDOf(data)
	cidV1 := addFile(t, n, data, 1)
	cidV0 := addFile(t, n, data, 0)
	other := addFile(t, n, randomBytes(t, len(data)), 1)
	if !strings.HasPrefix(cidV1, "b") || !strings.HasPrefix(cidV0, "Qm") {
		t.Fatalf("CIDs %s and %s", cidV1, cidV0)
	}

	intent, err := n.Client.DeclareIntent(ctx, n.Config, key, ledgerclient.Upload{Size: uint64(len(data)), MimeType: "application/x-test", ID: id})
	if err != nil || intent.Status != api.IntentReadyForUpload || intent.BlobID != id.String() || intent.Wallet != wallet || intent.ExpiresAt == nil {
		t.Fatalf("declare: %+v, %v", intent, err)
	}
	if got, err := n.Client.CheckIntent(ctx, intent.Token); err != nil || got.Status != api.IntentReadyForUpload {
		t.Fatalf("check: %+v, %v", got, err)
	}
	// Bytes other than those declared: refused, and the intent stays open.
	if _, err := n.Client.CompleteUpload(ctx, intent.Token, other); apiCode(err) != apierror.BlobMismatch {
		t.Fatalf("completing with another file's CID: %v", err)
	}
	if got, err := n.Client.CheckIntent(ctx, intent.Token); err != nil || got.Status != api.IntentReadyForUpload {
		t.Fatalf("check after the refusal: %+v, %v", got, err)
	}
	done, err := n.Client.CompleteUpload(ctx, intent.Token, cidV1)
	if err != nil || done.Status != api.IntentCompleted || done.CID != cidV1 || done.CompletedAt == nil {
		t.Fatalf("complete: %+v, %v", done, err)
	}
	// Completing again with the same CID answers it; with another, 409.
	if again, err := n.Client.CompleteUpload(ctx, intent.Token, cidV1); err != nil || again.Status != api.IntentCompleted {
		t.Fatalf("completing again: %+v, %v", again, err)
	}
	if _, err := n.Client.CompleteUpload(ctx, intent.Token, cidV0); apiCode(err) != apierror.IntentConflict {
		t.Fatalf("completing with another CID: %v", err)
	}
	if _, err := n.Client.CheckIntent(ctx, "0x"+strings.Repeat("77", 32)); apiCode(err) != apierror.NotFound {
		t.Fatalf("an unknown intent: %v", err)
	}

	// /api/cid/{blobId} and the redirect to the gateway.
	where, err := n.Client.BlobCID(ctx, id)
	gatewayURL := n.IPFS.GatewayURL() + "/ipfs/" + cidV1
	if err != nil || where.CID != cidV1 || where.Size != uint64(len(data)) || where.MimeType != "application/x-test" ||
		where.Wallet != wallet || where.GatewayURL != gatewayURL {
		t.Fatalf("/api/cid: %+v, %v", where, err)
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Get(n.ValidatorURL + "/api/cid/gateway/" + id.String())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != gatewayURL {
		t.Fatalf("/api/cid/gateway: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}

	// The bytes through the validator: whole, checked against the blob
	// id, and a range.
	var got bytes.Buffer
	if n, err := n.Client.Blob(ctx, id, &got); err != nil || n != int64(len(data)) || !bytes.Equal(got.Bytes(), data) {
		t.Fatalf("/api/blob: %d bytes, %v", n, err)
	}
	req, _ := http.NewRequest(http.MethodGet, n.ValidatorURL+"/api/blob/"+id.String(), nil)
	req.Header.Set("Range", "bytes=300000-300999")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	part, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusPartialContent || !bytes.Equal(part, data[300000:301000]) ||
		resp.Header.Get("Content-Type") != "application/x-test" {
		t.Fatalf("/api/blob range: %d %v, %d bytes, %v", resp.StatusCode, resp.Header, len(part), err)
	}

	// A write that references the binary: committed, and its binary
	// event names the blob.
	msg, _ := json.Marshal(map[string]any{proposal.CIDProperty: cidV1, "blobId": id.String(), "fileName": "file.bin"})
	p := &ledgerclient.Proposal{Path: "assets/file.bin", ContentType: "asset", Message: msg}
	form, path, err := ledgerclient.Form(n.Config, key, p, [32]byte{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Client.SubmitAndWait(ctx, proposal.Write, form, 30*time.Second); err != nil {
		t.Fatalf("writing the asset node: %v", err)
	}
	if st := final(t, n, p.ID); st.Status != api.StatusCommitted && st.Status != api.StatusFinalized {
		t.Fatalf("the asset write: %+v", st)
	}
	// The same binary named by its upload's token: the node stores the
	// upload's CID; a token that is no completed upload of the wallet is
	// refused at intake, nothing replicated.
	byIntent := &ledgerclient.Proposal{Path: "assets/by-intent", ContentType: "asset",
		Message: []byte(`{"` + proposal.IntentProperty + `":"` + intent.Token + `"}`)}
	form, intentPath, err := ledgerclient.Form(n.Config, key, byIntent, [32]byte{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Client.SubmitAndWait(ctx, proposal.Write, form, 30*time.Second); err != nil {
		t.Fatalf("writing by the intent: %v", err)
	}
	if st := final(t, n, byIntent.ID); st.Status != api.StatusCommitted && st.Status != api.StatusFinalized {
		t.Fatalf("the write by intent: %+v", st)
	}
	node, err := n.Client.Node(ctx, intentPath)
	if err != nil || string(node.Properties[proposal.CIDProperty]) != `"`+cidV1+`"` || node.Properties[proposal.IntentProperty] != nil {
		t.Fatalf("the node written by intent: %+v, %v", node.Properties, err)
	}
	unknown := &ledgerclient.Proposal{Path: "assets/unknown", Message: []byte(`{"` + proposal.IntentProperty + `":"0x` + strings.Repeat("77", 32) + `"}`)}
	if form, _, err = ledgerclient.Form(n.Config, key, unknown, [32]byte{}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Client.SubmitAndWait(ctx, proposal.Write, form, 30*time.Second); apiCode(err) != apierror.InvalidField {
		t.Fatalf("a write naming no completed upload: %v", err)
	}

	upload, write := binaryEvents(t, n, wallet)
	if upload.CasCID != cidV1 || upload.BlobID != id.String() || upload.Action != "upload" {
		t.Fatalf("the upload's binary event: %+v", upload)
	}
	if write.CasCID != cidV1 || write.BlobID != id.String() || write.Action != "write" || write.Path != path {
		t.Fatalf("the write's binary event: %+v", write)
	}

	// The CID views include the mapping.
	var stats api.CIDStats
	getJSON(t, n.ValidatorURL+"/api/cid/stats", &stats)
	if stats.BlobMappings != 1 || stats.BlobBytes != uint64(len(data)) {
		t.Fatalf("/api/cid/stats: %+v", stats)
	}
	var reverse api.CIDReverse
	harness.Eventually(t, 10*time.Second, func() bool { // the kept scan of live nodes follows the applied index
		getJSON(t, n.ValidatorURL+"/api/cid/reverse/"+cidV1, &reverse)
		return len(reverse.Nodes) == 2
	})
	if reverse.Blob == nil || reverse.Blob.BlobID != id.String() || reverse.Nodes[0].Path != intentPath || reverse.Nodes[1].Path != path { // in path order
		t.Fatalf("/api/cid/reverse: %+v", reverse)
	}
}

// eventData is a binary event's data as the stream sends it.
type eventData struct {
	Type   string `json:"type"`
	Action string `json:"action"`
	Path   string `json:"path"`
	CasCID string `json:"casCid"`
	BlobID string `json:"blobId"`
}

// binaryEvents reads the wallet's event history from the start of the
// stream until it has its binary events of an upload and of a write.
func binaryEvents(t *testing.T, n *harness.Network, wallet string) (upload, write eventData) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, n.ValidatorURL+"/v1/events/stream?wallets="+wallet, nil)
	req.Header.Set("Last-Event-ID", "0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := ledgerclient.NewSSEReader(bufio.NewReader(resp.Body), 1<<20)
	for upload.Action == "" || write.Action == "" {
		m, err := r.Next()
		if err != nil {
			t.Fatalf("event stream: %v (upload %+v, write %+v)", err, upload, write)
		}
		if m.Event != "binary" {
			continue
		}
		var d eventData
		if err := json.Unmarshal([]byte(m.Data), &d); err != nil {
			t.Fatal(err)
		}
		switch d.Action {
		case "upload":
			upload = d
		case "write":
			write = d
		}
	}
	return upload, write
}

// TestUploadIntentExpires: the leader expires an intent not completed
// within its TTL, and completing it then is refused (410), nothing
// recorded.
func TestUploadIntentExpires(t *testing.T) {
	n := harness.Start(t, harness.Options{Mode: "MOCK", IPFS: true, IntentTTL: time.Second})
	ctx := context.Background()
	key := devKey(t, 1)
	data := randomBytes(t, 4096)
	c := addFile(t, n, data, 1)
	intent, err := n.Client.DeclareIntent(ctx, n.Config, key, ledgerclient.Upload{Size: uint64(len(data)), MimeType: "text/plain", ID: blob.IDOf(data)})
	if err != nil {
		t.Fatalf("declare: %v", err)
	}
	harness.Eventually(t, 20*time.Second, func() bool {
		got, err := n.Client.CheckIntent(ctx, intent.Token)
		return err == nil && got.Status == api.IntentExpired
	})
	if _, err := n.Client.CompleteUpload(ctx, intent.Token, c); apiCode(err) != apierror.IntentExpired {
		t.Fatalf("completing an expired intent: %v", err)
	}
	if _, err := n.Client.BlobCID(ctx, blob.IDOf(data)); apiCode(err) != apierror.NotFound {
		t.Fatalf("the expired intent's blob is mapped: %v", err)
	}
}

// TestLedgerctlPutGet runs the CLI as an author would: ledgerctl put adds a
// file to make run's IPFS node, records its upload and writes an asset
// node; ledgerctl get reads the node and the file's bytes back through the
// validator.
func TestLedgerctlPutGet(t *testing.T) {
	n := harness.Start(t, harness.Options{Mode: "MOCK", IPFS: true})
	dir := t.TempDir()
	bin := filepath.Join(dir, "ledgerctl")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/contentledger/contentledger/tools/ledgerctl").CombinedOutput(); err != nil {
		t.Fatalf("building ledgerctl: %v\n%s", err, out)
	}
	data := randomBytes(t, 700_000)
	file := filepath.Join(dir, "photo.png")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	key := hex.EncodeToString(crypto.FromECDSA(devKey(t, 2)))
	run := func(args ...string) []byte {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "LEDGER_VALIDATOR="+n.ValidatorURL, "LEDGER_IPFS_API="+n.IPFS.APIURL(), "LEDGER_KEY="+key)
		out, err := cmd.Output()
		if err != nil {
			var stderr []byte
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = ee.Stderr
			}
			t.Fatalf("ledgerctl %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr)
		}
		return out
	}

	var put struct {
		Path   string             `json:"path"`
		Status api.ProposalStatus `json:"status"`
		Binary *api.BlobIntent    `json:"binary"`
	}
	if err := json.Unmarshal(run("put", "--json", file), &put); err != nil {
		t.Fatal(err)
	}
	id := blob.IDOf(data)
	if put.Status.Status != api.StatusCommitted && put.Status.Status != api.StatusFinalized || put.Binary == nil ||
		put.Binary.Status != api.IntentCompleted || put.Binary.BlobID != id.String() || put.Binary.MimeType != "image/png" ||
		!strings.HasSuffix(put.Path, "/assets/photo.png") {
		t.Fatalf("put: %+v %+v", put, put.Binary)
	}
	var node api.Node
	if err := json.Unmarshal(run("get", "assets/photo.png"), &node); err != nil {
		t.Fatal(err)
	}
	if string(node.Properties[proposal.CIDProperty]) != `"`+put.Binary.CID+`"` || string(node.Properties["blobId"]) != `"`+id.String()+`"` {
		t.Fatalf("get: %+v", node.Properties)
	}
	out := filepath.Join(dir, "back.png")
	run("get", "--out", out, put.Path)
	if back, err := os.ReadFile(out); err != nil || !bytes.Equal(back, data) {
		t.Fatalf("the bytes read back: %d of %d, %v", len(back), len(data), err)
	}
}
