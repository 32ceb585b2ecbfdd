package system

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/payment"
	"github.com/contentledger/contentledger/tests/harness"
	"github.com/contentledger/contentledger/tools/devnats"
)

// connectAs connects to the network's NATS as role; violations reports
// the asynchronous errors the server sends (permission violations).
func connectAs(t *testing.T, n *harness.Network, role devnats.Role) (nc *nats.Conn, violations <-chan error) {
	t.Helper()
	errs := make(chan error, 16)
	c := n.NATSCredentials(role)
	nc, err := nats.Connect(n.NATSURL, nats.UserInfo(c.User, c.Password), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		select {
		case errs <- err:
		default:
		}
	}))
	if err != nil {
		t.Fatalf("connect as %s: %v", role, err)
	}
	t.Cleanup(nc.Close)
	return nc, errs
}

// TestNATSIndexerCannotPublishChain: an indexer's credentials read the
// ledger's events but cannot write the chain feed: a payment and an epoch
// published on chain.> are refused by the server as permission
// violations, and the chain stream is not even readable to it.
func TestNATSIndexerCannotPublishChain(t *testing.T) {
	n := harness.Start(t, harness.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nc, violations := connectAs(t, n, devnats.Indexer)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	// What it may do: read the events stream, which the leader declares.
	harness.Eventually(t, 20*time.Second, func() bool {
		_, err := js.Stream(ctx, "LEDGER_EVENTS")
		return err == nil
	})
	forged, err := payment.EpochUpdate{ChainID: n.Chain.ChainID, Current: math.MaxUint64, Finalized: math.MaxUint64,
		Source: payment.EpochSourceBlockTime}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	for _, subject := range []string{payment.EpochSubject(n.Chain.ChainID), "chain." + strconv.FormatUint(n.Chain.ChainID, 10) + ".payments"} {
		if err := nc.Publish(subject, forged); err != nil {
			t.Fatal(err)
		}
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-violations:
			if !errors.Is(err, nats.ErrPermissionViolation) {
				t.Fatalf("publish on %s: %v, want a permission violation", subject, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("a publish on %s with the indexer's credentials was accepted", subject)
		}
	}
	if _, err := js.Stream(ctx, "CHAIN_EVENTS"); err == nil {
		t.Fatal("the indexer reads the chain stream")
	}
	if f := finality(t, n); f.CurrentEpoch == math.MaxUint64 || f.FinalizedEpoch == math.MaxUint64 {
		t.Fatalf("the forged epoch reached the validator: %+v", f)
	}
}

// TestNATSForgedEpochJumpIgnored: a compromised watcher (its credentials)
// publishes an epoch update far in the future; the validator refuses it
// (counted in validator_epoch_updates_ahead_total) and its current and
// finalized epochs stay where the chain put them. Without the bound the
// update would be adopted, and since epochs never go back every proposal
// would be final for good.
func TestNATSForgedEpochJumpIgnored(t *testing.T) {
	n := harness.Start(t, harness.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The watcher's first update has been adopted.
	harness.Eventually(t, 30*time.Second, func() bool { return metric(t, n, "validator_epoch_updates_total") >= 1 })
	before := finality(t, n)

	nc, _ := connectAs(t, n, devnats.Watcher)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	const far = uint64(1) << 62
	forged, err := payment.EpochUpdate{ChainID: n.Chain.ChainID, Current: far, Finalized: far,
		Source: payment.EpochSourceBlockTime, ObservedAtMs: time.Now().UnixMilli()}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, payment.EpochSubject(n.Chain.ChainID), forged); err != nil {
		t.Fatalf("the watcher's credentials may publish epochs: %v", err)
	}
	harness.Eventually(t, 30*time.Second, func() bool { return metric(t, n, "validator_epoch_updates_ahead_total") >= 1 })
	after := finality(t, n)
	if after.CurrentEpoch >= far || after.FinalizedEpoch >= far || after.CurrentEpoch < before.CurrentEpoch ||
		after.CurrentEpoch > before.CurrentEpoch+harness.EpochMaxAhead {
		t.Fatalf("epochs before %d/%d, after the forged update %d/%d", before.CurrentEpoch, before.FinalizedEpoch,
			after.CurrentEpoch, after.FinalizedEpoch)
	}
}

func finality(t *testing.T, n *harness.Network) api.Finality {
	t.Helper()
	var f api.Finality
	body := getBody(t, n.ValidatorURL+"/v1/finality")
	if err := json.Unmarshal(body, &f); err != nil {
		t.Fatalf("finality: %v", err)
	}
	return f
}

// metric reads one unlabelled series of the validator's /metrics; -1 when
// absent.
func metric(t *testing.T, n *harness.Network, name string) float64 {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + name + ` (\S+)$`).FindSubmatch(getBody(t, n.ValidatorURL+"/metrics"))
	if m == nil {
		return -1
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func getBody(t *testing.T, url string) []byte {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
	return b
}
