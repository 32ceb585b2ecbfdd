package epochs_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contentledger/contentledger/pkg/payment"
	"github.com/contentledger/contentledger/services/chain-watcher/internal/epochs"
	"github.com/contentledger/contentledger/services/chain-watcher/internal/testenv"
)

// beaconNode answers the two beacon API routes the source reads, in the
// standard API's shapes (integers as decimal strings), under prefix.
type beaconNode struct {
	mu        sync.Mutex
	slot      string // raw JSON value of the head slot
	finalized string // raw JSON value of the finalized checkpoint's epoch
	status    int    // answered instead, when not 0
	paths     []string
}

func (b *beaconNode) set(slot, finalized string, status int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.slot, b.finalized, b.status = slot, finalized, status
}

func (b *beaconNode) serve(prefix string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.paths = append(b.paths, r.URL.Path)
		if b.status != 0 {
			http.Error(w, `{"code":503,"message":"node is syncing"}`, b.status)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case prefix + "/eth/v1/beacon/headers/head":
			fmt.Fprintf(w, `{"execution_optimistic":false,"finalized":false,"data":{"root":"0x%064x","canonical":true,`+
				`"header":{"message":{"slot":%s,"proposer_index":"7","parent_root":"0x%064x","state_root":"0x%064x","body_root":"0x%064x"},`+
				`"signature":"0x00"}}}`, 1, b.slot, 2, 3, 4)
		case prefix + "/eth/v1/beacon/states/head/finality_checkpoints":
			fmt.Fprintf(w, `{"execution_optimistic":false,"finalized":false,"data":{`+
				`"previous_justified":{"epoch":"1","root":"0x%064x"},"current_justified":{"epoch":"2","root":"0x%064x"},`+
				`"finalized":{"epoch":%s,"root":"0x%064x"}}}`, 5, 6, b.finalized, 7)
		default:
			http.NotFound(w, r)
		}
	})
}

func TestBeaconSource(t *testing.T) {
	ctx := testenv.Context(t)
	node := &beaconNode{}
	const prefix = "/api-key-123"
	srv := httptest.NewServer(node.serve(prefix))
	t.Cleanup(srv.Close)
	src, err := epochs.NewBeacon(srv.URL+prefix+"/", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}

	node.set(`"9600031"`, `"299998"`, 0)
	u, err := src.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if u.Current != 300_000 || u.Finalized != 299_998 || u.Slot != 9_600_031 || u.Source != payment.EpochSourceBeacon {
		t.Fatalf("read %+v", u)
	}
	if len(node.paths) != 2 || node.paths[0] != prefix+"/eth/v1/beacon/states/head/finality_checkpoints" ||
		node.paths[1] != prefix+"/eth/v1/beacon/headers/head" {
		t.Fatalf("asked %v: the checkpoints first, then the head", node.paths)
	}

	node.set(`9600032`, `"299999"`, 0) // a bare number is taken too
	if u, err := src.Read(ctx); err != nil || u.Current != 300_001 || u.Finalized != 299_999 {
		t.Fatalf("read %+v, %v", u, err)
	}

	for name, c := range map[string]struct {
		slot, finalized string
		status          int
	}{
		"finalized after the head": {`"64"`, `"3"`, 0},
		"negative slot":            {`"-1"`, `"0"`, 0},
		"slot not a number":        {`"0x20"`, `"0"`, 0},
		"no finalized epoch":       {`"64"`, `null`, 0},
		"node syncing":             {`"64"`, `"0"`, http.StatusServiceUnavailable},
	} {
		node.set(c.slot, c.finalized, c.status)
		u, err := src.Read(ctx)
		if err == nil {
			t.Errorf("%s: read %+v", name, u)
			continue
		}
		if strings.Contains(err.Error(), "api-key-123") {
			t.Errorf("%s: the error quotes the URL's path: %v", name, err)
		}
	}

	srv.Close()
	if _, err := src.Read(ctx); err == nil || strings.Contains(err.Error(), "api-key-123") {
		t.Fatalf("a closed node: %v", err)
	}

	for _, bad := range []string{"", "ftp://h/", "http:///x", "://"} {
		if _, err := epochs.NewBeacon(bad, time.Second); err == nil {
			t.Errorf("beacon URL %q accepted", bad)
		}
	}
}
