package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ipfs/go-cid"
	"go.uber.org/zap"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/pkg/blob"
	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/pkg/signing"
	"github.com/contentledger/contentledger/services/validator/internal/access"
	"github.com/contentledger/contentledger/services/validator/internal/pipeline"
)

// fakeBinaries records what the routes hand the intent flow.
type fakeBinaries struct {
	mu        sync.Mutex
	declared  []pipeline.Declaration
	completed []cid.Cid
	checked   int
}

func (f *fakeBinaries) Declare(_ context.Context, d pipeline.Declaration) (pipeline.IntentView, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.declared = append(f.declared, d)
	return pipeline.IntentView{Status: api.IntentReadyForUpload, Token: d.Intent.IntentID}, nil
}

func (f *fakeBinaries) Check(token [32]byte) (pipeline.IntentView, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.checked++
	return pipeline.IntentView{Status: api.IntentPending, Token: token}, nil
}

func (f *fakeBinaries) Complete(_ context.Context, token [32]byte, c cid.Cid) (pipeline.IntentView, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.completed = append(f.completed, c)
	return pipeline.IntentView{Status: api.IntentCompleted, Token: token}, nil
}

func (f *fakeBinaries) calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.declared) + len(f.completed) + f.checked
}

// fakeBlobs holds one mapping.
type fakeBlobs struct{ m *ledgerpb.BlobMapping }

func (f fakeBlobs) Blob(id blob.ID) (*ledgerpb.BlobMapping, error) {
	if f.m != nil && blob.ID(f.m.GetSha256()) == id {
		return f.m, nil
	}
	return nil, nil
}

func (f fakeBlobs) BlobOfCID(c []byte) (blob.ID, bool, error) {
	if f.m != nil && string(f.m.GetCid()) == string(c) {
		return blob.ID(f.m.GetSha256()), true, nil
	}
	return blob.ID{}, false, nil
}

func (f fakeBlobs) BlobTotals() (uint64, uint64, error) { return 1, f.m.GetSize(), nil }

func submitTokens() access.Tokens {
	var tokens access.Tokens
	tokens.Add(access.Submit, submitToken)
	return tokens
}

func validDeclaration(t testing.TB) string {
	key, _ := crypto.GenerateKey()
	in := signing.BlobIntent{IntentID: common.HexToHash("0x01"), Wallet: crypto.PubkeyToAddress(key.PublicKey), Size: 3,
		MimeType: "text/plain", ContentHash: common.Hash(blob.IDOf([]byte("abc")))}
	s, _ := signing.NewSigner(signing.Domain{})
	sig, err := s.SignIntent(in, key)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(api.DeclareIntent{IntentID: in.IntentID.Hex(), Wallet: in.Wallet.Hex(), Size: 3, MimeType: "text/plain",
		ContentHash: in.ContentHash.Hex(), Signature: hexutil.Encode(sig)})
	return string(body)
}

// TestBlobRoutes: the answers of /api/cid/{blobId} and the gateway
// redirect, the #length form, and the refusals of malformed ids.
func TestBlobRoutes(t *testing.T) {
	data := []byte("abc")
	id := blob.IDOf(data)
	ref, _ := blob.ParseCID("bafkreif2pall7dybz7vecqka3zo24irdwabwdi4wc55jznaq75q7eaavvu")
	m := &ledgerpb.BlobMapping{Sha256: id[:], Cid: ref.Bytes(), Size: 3, MimeType: "text/plain", Wallet: make([]byte, 20), Index: 7, AtMs: 1000}
	gw, _ := url.Parse("https://gw.example")
	e := New(Config{Access: submitTokens(), PublicGateway: gw}, Deps{Blobs: fakeBlobs{m}, Binaries: &fakeBinaries{}}, zap.NewNop())

	rec := send(e, http.MethodGet, "/api/cid/"+id.String()+"#3", submitToken, "")
	var out api.BlobCID
	if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &out) != nil || out.CID != ref.String() ||
		out.GatewayURL != "https://gw.example/ipfs/"+ref.String() || out.Size != 3 || out.CommitIndex != 7 {
		t.Fatalf("/api/cid: %d %s", rec.Code, rec.Body)
	}
	rec = send(e, http.MethodGet, "/api/cid/gateway/"+id.String(), submitToken, "")
	if rec.Code != http.StatusFound || rec.Header().Get("Location") != "https://gw.example/ipfs/"+ref.String() {
		t.Fatalf("/api/cid/gateway: %d %v", rec.Code, rec.Header())
	}
	for path, want := range map[string]int{
		"/api/cid/" + id.String() + "%234":                         http.StatusNotFound, // another length
		"/api/cid/" + blob.IDOf([]byte("x")).String():              http.StatusNotFound,
		"/api/cid/nothex":                                          http.StatusBadRequest,
		"/api/cid/gateway/" + strings.Repeat("0", 63):              http.StatusBadRequest,
		"/api/blob/" + id.String():                                 http.StatusServiceUnavailable, // no gateway to read from
		"/v1/binary/check-intent/0x" + strings.Repeat("ab", 32):    http.StatusOK,
		"/v1/binary/check-intent/" + strings.Repeat("ab", 32):      http.StatusBadRequest,
		"/api/cid/" + strings.ToUpper(id.String()) + "%23" + "3":   http.StatusOK,
		"/api/cid/" + id.String() + "%2303":                        http.StatusBadRequest,
		"/api/cid/gateway/" + blob.IDOf([]byte("y")).String() + "": http.StatusNotFound,
	} {
		if rec := send(e, http.MethodGet, path, submitToken, ""); rec.Code != want {
			t.Errorf("%s: %d %s, want %d", path, rec.Code, rec.Body, want)
		}
	}
	if rec := send(e, http.MethodGet, "/api/cid/"+id.String(), "", ""); rec.Code != http.StatusUnauthorized {
		t.Errorf("/api/cid without a token: %d", rec.Code)
	}
	// A binary larger than today's cap is not read through the gateway.
	capped := New(Config{Access: submitTokens(), MaxBlobBytes: 2}, Deps{Blobs: fakeBlobs{m}, Binaries: &fakeBinaries{}}, zap.NewNop())
	if rec := send(capped, http.MethodGet, "/api/blob/"+id.String(), submitToken, ""); rec.Code != http.StatusRequestEntityTooLarge {
		t.Errorf("/api/blob over the cap: %d %s", rec.Code, rec.Body)
	}
}

// FuzzIntentRoutesInput: whatever the bodies of declare-intent and
// complete-upload, and the check route's token, the answer is the route's
// own or a 400 invalid_field (401 invalid_signature is the flow's, not the
// parser's); nothing malformed reaches the intent flow.
func FuzzIntentRoutesInput(f *testing.F) {
	f.Add(validDeclaration(f), `{"token":"0x`+strings.Repeat("ab", 32)+`","cid":"QmUNLLsPACCz1vLxQVkXqqLX5R1X345qqfHbsf67hvA3Nn"}`)
	f.Add(`{}`, `{}`)
	f.Add(`{"intentId":"0x01","size":-1}`, `{"token":"0x","cid":"zb2rhe5P4gXftAwvA4eXQ5HJwsER2owDyS9sKaQRRVQPn93bA"}`)
	f.Add(`{"size":1e30}`, `{"cid":1}`)
	f.Add(`[]`, `{"token":"0x`+strings.Repeat("ab", 32)+`","cid":"bafkreif2pall7dybz7vecqka3zo24irdwabwdi4wc55jznaq75q7eaavvu","x":1}`)
	f.Fuzz(func(t *testing.T, declare, complete string) {
		bin := &fakeBinaries{}
		e := New(Config{Access: submitTokens()}, Deps{Binaries: bin}, zap.NewNop())
		rec := send(e, http.MethodPost, "/v1/binary/declare-intent", submitToken, declare)
		switch code, _ := errorCode(rec); {
		case rec.Code == http.StatusOK:
			if len(bin.declared) != 1 {
				t.Fatalf("declare %q answered without the flow", declare)
			}
			d := bin.declared[0]
			if d.Intent.Size == 0 || pipeline.CheckMimeType(d.Intent.MimeType) != nil || len(d.Signature) != signing.SignatureLen {
				t.Fatalf("declare %q reached the flow malformed: %+v", declare, d)
			}
		case rec.Code == http.StatusBadRequest && code == apierror.InvalidField:
			if bin.calls() != 0 {
				t.Fatalf("declare %q refused, yet the flow was asked", declare)
			}
		default:
			t.Fatalf("declare %q: %d %s", declare, rec.Code, rec.Body)
		}
		before := bin.calls()
		rec = send(e, http.MethodPost, "/v1/binary/complete-upload", submitToken, complete)
		switch code, _ := errorCode(rec); {
		case rec.Code == http.StatusOK:
			if len(bin.completed) != 1 {
				t.Fatalf("complete %q answered without the flow", complete)
			}
			if _, err := blob.ParseCID(bin.completed[0].String()); err != nil {
				t.Fatalf("complete %q reached the flow with %s: %v", complete, bin.completed[0], err)
			}
		case rec.Code == http.StatusBadRequest && code == apierror.InvalidField:
			if bin.calls() != before {
				t.Fatalf("complete %q refused, yet the flow was asked", complete)
			}
		default:
			t.Fatalf("complete %q: %d %s", complete, rec.Code, rec.Body)
		}
		// The check route's token, from the same text.
		checked := bin.checked
		rec = send(e, http.MethodGet, "/v1/binary/check-intent/"+url.PathEscape(complete), submitToken, "")
		switch code, _ := errorCode(rec); {
		case rec.Code == http.StatusOK && bin.checked == checked+1:
		case rec.Code == http.StatusBadRequest && code == apierror.InvalidField && bin.checked == checked:
		case rec.Code == http.StatusNotFound && bin.checked == checked: // a path echo does not route here
		default:
			t.Fatalf("check %q: %d %s", complete, rec.Code, rec.Body)
		}
	})
}
