package app

import (
	"net/http"
	"testing"

	"github.com/contentledger/contentledger/pkg/api"
)

// TestChainStatusInMockMode: without a chain-watcher the route answers, with
// no watcher status and no streams, and says why; the transaction summary
// counts nothing OBSERVED.
func TestChainStatusInMockMode(t *testing.T) {
	base := startMock(t)
	var cs api.ChainStatus
	if code := getJSON(t, base+"/v1/chain/status", &cs); code != http.StatusOK {
		t.Fatalf("status %d", code)
	}
	if cs.ContractVersion != api.ChainStatusVersion || cs.Mode != string(Mock) || cs.ChainID != 1337 || cs.Watcher != nil ||
		cs.Streams != nil || len(cs.Gaps) != 2 || cs.Gaps[0].Field != "watcher" || cs.Gaps[1].Field != "streams" {
		t.Fatalf("chain status %+v", cs)
	}
	var sum api.TransactionSummary
	if code := getJSON(t, base+"/v1/transactions/summary", &sum); code != http.StatusOK || sum.ByState[api.TxObserved] != 0 ||
		len(sum.Gaps) != 1 || sum.Gaps[0].Field != "total" {
		t.Fatalf("summary %d %+v", code, sum)
	}
}
