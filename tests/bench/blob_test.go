package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"testing"

	"github.com/ethereum/go-ethereum/crypto"

	"github.com/contentledger/contentledger/pkg/blob"
	"github.com/contentledger/contentledger/tests/harness"
	"github.com/contentledger/contentledger/tools/ledgerclient"
)

// BenchmarkBlob reads one binary (BENCH_BLOB_MIB, default 100 MiB) added
// to make run's IPFS node, side by side in one run: from the gateway
// directly (path=gateway) and through a validator's /api/blob
// (path=validator), which asks the gateway for the CID as a CAR stream and
// checks every block on the way (docs/adr/0037). Go reports MB/s
// (b.SetBytes); each op is one whole read, its bytes discarded.
func BenchmarkBlob(b *testing.B) {
	size := 100 << 20
	if v := os.Getenv("BENCH_BLOB_MIB"); v != "" {
		mib, err := strconv.Atoi(v)
		if err != nil || mib <= 0 {
			b.Fatalf("BENCH_BLOB_MIB=%q", v)
		}
		size = mib << 20
	}
	n := harness.Start(b, harness.Options{Mode: "MOCK", IPFS: true, Quiet: true})
	ctx := context.Background()
	data := make([]byte, size)
	if _, err := rand.Read(data); err != nil {
		b.Fatal(err)
	}
	c, err := ledgerclient.AddToIPFS(ctx, http.DefaultClient, n.IPFS.APIURL(), "blob.bin", bytes.NewReader(data), 1)
	if err != nil {
		b.Fatal(err)
	}
	key, err := crypto.GenerateKey()
	if err != nil {
		b.Fatal(err)
	}
	id := blob.IDOf(data)
	intent, err := n.Client.DeclareIntent(ctx, n.Config, key, ledgerclient.Upload{Size: uint64(size), MimeType: "application/octet-stream", ID: id})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := n.Client.CompleteUpload(ctx, intent.Token, c); err != nil {
		b.Fatal(err)
	}
	for _, path := range []struct{ name, url string }{
		{"gateway", n.IPFS.GatewayURL() + "/ipfs/" + c},
		{"validator", n.ValidatorURL + "/api/blob/" + id.String()},
	} {
		b.Run("path="+path.name, func(b *testing.B) {
			b.SetBytes(int64(size))
			for b.Loop() {
				if got := read(b, path.url); got != int64(size) {
					b.Fatalf("%s: read %d bytes of %d", path.url, got, size)
				}
			}
		})
	}
}

// read reads a whole answer and returns its size.
func read(b *testing.B, url string) int64 {
	resp, err := http.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b.Fatalf("%s: %s", url, resp.Status)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil {
		b.Fatal(fmt.Errorf("%s: %w", url, err))
	}
	return n
}
