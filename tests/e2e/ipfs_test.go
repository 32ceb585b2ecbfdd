package e2e

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ipfs/go-cid"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/tests/harness"
	"github.com/contentledger/contentledger/tools/devipfs"
)

// gatewayProbe is the object a validator's gateway check asks for
// (services/validator/internal/blobgateway.ProbeCID, internal there): the
// empty UnixFS directory in CIDv1.
const gatewayProbe = "bafybeiczsscdsbs7ffqz55asqdf3smv6klcw3gofszvwlyarci47bgf354"

// TestValidatorReachesTheDevnetGateway: make run's IPFS node answers the
// validator's gateway probe with the block itself, a validator pointed at
// it reports it reachable in its runtime snapshot and deep health, and a
// file added to the node is served by the gateway the validator names.
func TestValidatorReachesTheDevnetGateway(t *testing.T) {
	n := harness.Start(t, harness.Options{Mode: "MOCK", IPFS: true})
	gateway := n.IPFS.GatewayURL()

	// The probe as the validator sends it: the raw block, asked by Accept.
	req, err := http.NewRequest(http.MethodGet, gateway+"/ipfs/"+gatewayProbe, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/vnd.ipld.raw")
	code, body := askGateway(t, req)
	probe := cid.MustParse(gatewayProbe)
	sum, err := probe.Prefix().Sum(body)
	if err != nil {
		t.Fatal(err)
	}
	if code != http.StatusOK || !sum.Equals(probe) {
		t.Fatalf("the probe: %d, %x (hashes to %s)", code, body, sum)
	}

	// The validator's own checks, as the operators see them.
	var r api.RuntimeSnapshot
	harness.Eventually(t, 30*time.Second, func() bool {
		getJSON(t, n.ValidatorURL+"/v1/ops/snapshots/runtime", &r)
		return r.Blobstore.Check != nil
	})
	if b := r.Blobstore; b.GatewayURL == nil || *b.GatewayURL != gateway || !b.Check.OK || b.Check.StatusCode == nil ||
		*b.Check.StatusCode != http.StatusOK || b.Check.Error != "" {
		t.Fatalf("runtime snapshot: blobstore %+v, check %+v", b, b.Check)
	}
	var health struct {
		Checks map[string]struct{ Status string } `json:"checks"`
	}
	if code := getJSON(t, n.ValidatorURL+"/health/deep", &health); code != http.StatusOK || health.Checks["gateway"].Status != "ok" {
		t.Fatalf("deep health: %d %+v", code, health)
	}

	// A file added to the node is read back from the gateway the
	// validator publishes.
	content := bytes.Repeat([]byte("binary on IPFS "), 100_000) // 1.5 MiB: several blocks
	c, err := n.IPFS.Add(context.Background(), bytes.NewReader(content), devipfs.AddOptions{CIDVersion: 1, RawLeaves: true})
	if err != nil {
		t.Fatal(err)
	}
	req, err = http.NewRequest(http.MethodGet, strings.TrimSuffix(*r.Blobstore.GatewayURL, "/")+"/ipfs/"+c.String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if code, got := askGateway(t, req); code != http.StatusOK || !bytes.Equal(got, content) {
		t.Fatalf("the added file through the validator's gateway: %d, %d bytes of %d", code, len(got), len(content))
	}
}

// askGateway sends req and returns the status and the body.
func askGateway(t *testing.T, req *http.Request) (int, []byte) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}
