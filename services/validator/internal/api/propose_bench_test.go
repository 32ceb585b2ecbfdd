package api

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"go.uber.org/zap"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/proposal"
)

// instantProposals accepts every submission at once as PENDING and reports
// it COMMITTED on the first wait, so that a benchmark measures the handler,
// not the pipeline.
type instantProposals struct{ Proposals }

func (instantProposals) Submit(_ context.Context, sub *proposal.Submission) (api.ProposalStatus, bool, error) {
	return api.ProposalStatus{ProposalID: sub.ProposalID.Hex(), Status: api.StatusPending, Path: sub.Path}, true, nil
}

func (instantProposals) RefuseEarly(context.Context, common.Hash, int) error { return nil }

func (instantProposals) RefuseImpatient(context.Context, int) error { return nil }

func (instantProposals) WaitStatus(_ context.Context, id common.Hash, _ time.Duration) (api.ProposalStatus, error) {
	return api.ProposalStatus{ProposalID: id.Hex(), Status: api.StatusCommitted}, nil
}

// BenchmarkProposeWrite is the leader's intake route for the form the
// pipeline benchmark sends (tests/bench: 1 KiB text message, ?wait=), from
// the request to the written receipt, without the pipeline behind it.
func BenchmarkProposeWrite(b *testing.B) {
	text := make([]byte, 1024)
	for i := range text {
		text[i] = 'a' + byte(i%26)
	}
	const id = "0x9f2c4e6a8b0d1f3e5a7c9b1d3f5e7a9c0b2d4f6e8a1c3e5b7d9f0a2c4e6b8d0f"
	body := url.Values{
		proposal.FieldProposalID:     {id},
		proposal.FieldWalletAddress:  {"0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"},
		proposal.FieldSignature:      {"0x" + strings.Repeat("11", 64) + "1b"},
		proposal.FieldOrganization:   {proposal.DefaultOrganization},
		proposal.FieldPaymentTier:    {"standard"},
		proposal.FieldPath:           {"bench/" + id[2:18]},
		proposal.FieldMessage:        {string(text)},
		proposal.FieldContentType:    {"bench"},
		proposal.FieldEthereumTxHash: {"0x1234567890abcdef1234567890abcdef1234567890abcdef1234567890abcdef"},
	}.Encode()
	e := New(Config{Form: proposal.DefaultOptions()}, Deps{Proposals: instantProposals{}, Cluster: leaderCluster{}}, zap.NewNop())
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequest(http.MethodPost, "/v1/propose-write?wait=30s", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		if rec.Code != http.StatusAccepted {
			b.Fatalf("%d %s", rec.Code, rec.Body)
		}
	}
}
