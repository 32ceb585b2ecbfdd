package system

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/crypto"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/proposal"
	"github.com/contentledger/contentledger/tests/harness"
	"github.com/contentledger/contentledger/tools/ledgerclient"
)

// TestWipedValidatorCatchesUpThroughLargeSnapshot replaces a wiped validator
// (as TestWipedValidatorIsReplaced) in a cluster whose peer frame limit is
// 256 KiB, after the others wrote enough that their snapshot is several
// times that (ADR 0032: a snapshot streams from file to file beside the
// frames). The replacement must catch up through that snapshot, end with
// the others' applied index and state hash, and its memory must not grow
// with the snapshot:
//
//   - baseline is the highest peak resident memory (VmHWM) of the three
//     validators after start and one write: the Go runtime, Pebble's
//     buffers, the HTTP and raft machinery of a validator holding almost
//     nothing;
//   - streaming holds 1 MiB buffers (the transport's copy, the staged
//     file's writer, its verification's and the restore's readers) and
//     the restore's sstable writer's blocks, a few MiB whatever the size,
//     and after the restore the replacement applies the few entries left
//     in the log past the snapshot (COMPACTION_MARGIN of them, each under
//     the frame limit);
//   - so its peak must stay below baseline + half the snapshot (it stays
//     about 7 MiB above the baseline with 20 and with 40 MiB snapshots).
//     Before ADR 0032 the receiver held the whole snapshot in memory,
//     wrote it from a []byte and restored it as one Pebble batch of its
//     size: with a 35 MiB snapshot its peak was 270 MiB, 40 MiB baseline.
func TestWipedValidatorCatchesUpThroughLargeSnapshot(t *testing.T) {
	const (
		frameBytes   = 256 << 10
		messageBytes = 24 << 10
		// A raft entry holds at most 128 KiB of encoded proposals, or one
		// larger proposal alone: within the frame (Config.Validate checks it).
		batchBytes  = 128 << 10
		minSnapshot = 24 << 20
	)
	c := newCluster(t, 3, "MOCK",
		"SVC_VALIDATOR_PEER_MAX_FRAME_BYTES="+strconv.Itoa(frameBytes),
		"SVC_VALIDATOR_MAX_BATCH=8", "SVC_VALIDATOR_MAX_BATCH_BYTES="+strconv.Itoa(batchBytes),
		"SVC_VALIDATOR_MAX_MESSAGE_BYTES="+strconv.Itoa(messageBytes),
		"SVC_VALIDATOR_SNAPSHOT_ENTRIES=50", "SVC_VALIDATOR_COMPACTION_MARGIN=5")
	leader := c.waitLeader()
	// The limit is in force: the validator knows the setting.
	var values api.ConfigValues
	if err := get(leader.url()+"/v1/config/osgi", &values); err != nil {
		t.Fatal(err)
	}
	if got := values.Components["raft"]["SVC_VALIDATOR_PEER_MAX_FRAME_BYTES"]; got != float64(frameBytes) {
		t.Fatalf("the leader's SVC_VALIDATOR_PEER_MAX_FRAME_BYTES is %v, want %d", got, frameBytes)
	}
	c.write(leader, `{"warm":true}`)
	c.converged(c.nodes...)
	var baseline int64
	for _, n := range c.nodes {
		hwm, err := harness.ProcMemory(n.cmd.Process.Pid, "VmHWM")
		if err != nil {
			t.Fatal(err)
		}
		baseline = max(baseline, hwm)
	}

	lost := c.nodes[slices.IndexFunc(c.nodes, func(n *node) bool { return n != leader })]
	c.kill(lost)
	if err := os.RemoveAll(lost.dataDir); err != nil {
		t.Fatal(err)
	}
	running := slices.DeleteFunc(slices.Clone(c.nodes), func(n *node) bool { return n == lost })
	if code, out := send(t, http.MethodDelete, running[0].url()+"/v1/cluster/members/"+strconv.FormatUint(lost.id, 10), nil); code != http.StatusOK {
		t.Fatalf("removing validator %d: %d %s", lost.id, code, out)
	}
	leader = c.waitLeaderAmong(running)

	// Random content (it does not compress) until the leader's snapshot
	// holds minSnapshot bytes.
	written := 0
	snapshot := func() int64 { return newestSnapshotBytes(t, leader) }
	for snapshot() < minSnapshot {
		if written > 4*minSnapshot/messageBytes {
			t.Fatalf("%d writes of %d bytes and the leader's snapshot is %d bytes", written, messageBytes, snapshot())
		}
		writeRandom(t, c.client(leader), 64, messageBytes-64)
		written += 64
	}
	before, _ := c.converged(running...)
	snapBytes := snapshot()

	replacement := c.replaceWiped(lost, running, 4)
	members := append(running, replacement)
	index, hash := c.converged(members...)
	if index < before {
		t.Fatalf("converged at %d, before the replacement the others were at %d", index, before)
	}
	if sent := snapshotsSentTo(t, running, replacement.id); sent == 0 {
		t.Fatal("no validator sent the replacement a snapshot")
	}
	// Its log says what it received and that it caught up through it.
	received := logRecords(t, replacement, "snapshot received")
	if len(received) == 0 || len(logRecords(t, replacement, "caught up through a snapshot")) == 0 {
		t.Fatalf("the replacement's log records no snapshot received and installed")
	}
	var largest int64
	for _, r := range received {
		if b, ok := r["bytes"].(float64); ok {
			largest = max(largest, int64(b))
		}
	}
	if largest < 4*frameBytes {
		t.Fatalf("the largest snapshot received is %d bytes, not several times the %d-byte frame limit", largest, frameBytes)
	}
	hwm, err := harness.ProcMemory(replacement.cmd.Process.Pid, "VmHWM")
	if err != nil {
		t.Fatal(err)
	}
	bound := baseline + largest/2
	t.Logf("%d writes; the leader's snapshot %d bytes, the replacement received one of %d bytes (frame limit %d) and caught up to index %d, state hash %s; "+
		"its peak RSS %d MiB, baseline %d MiB, bound %d MiB",
		written, snapBytes, largest, frameBytes, index, hash, hwm>>20, baseline>>20, bound>>20)
	if hwm > bound {
		t.Fatalf("the replacement's peak RSS is %d bytes, above the baseline %d plus half the %d-byte snapshot (%d)", hwm, baseline, largest, bound)
	}
}

// newestSnapshotBytes is the size of n's newest snapshot file (its data
// directory's snap/), 0 when it has none.
func newestSnapshotBytes(t *testing.T, n *node) int64 {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(n.dataDir, "snap", "*.snap"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(files) // named <index:016x>-<term:016x>.snap
	for i := len(files) - 1; i >= 0; i-- {
		if st, err := os.Stat(files[i]); err == nil {
			return st.Size()
		}
	}
	return 0
}

// writeRandom commits count writes of size random bytes (hex in a JSON
// string), eight at a time, each from a fresh key.
func writeRandom(t *testing.T, client *ledgerclient.Client, count, size int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg, err := client.BlockchainConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, count)
	work := make(chan struct{}, count)
	for range count {
		work <- struct{}{}
	}
	close(work)
	for range 8 {
		wg.Go(func() {
			for range work {
				errs <- writeOne(ctx, client, cfg, size)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

func writeOne(ctx context.Context, client *ledgerclient.Client, cfg api.BlockchainConfig, size int) error {
	raw := make([]byte, size/2)
	_, _ = rand.Read(raw)
	key, err := crypto.GenerateKey()
	if err != nil {
		return err
	}
	p := &ledgerclient.Proposal{Message: []byte(`{"blob":"` + hex.EncodeToString(raw) + `"}`), ContentType: "page"}
	form, _, err := ledgerclient.Form(cfg, key, p, [32]byte{})
	if err != nil {
		return err
	}
	if _, err := client.Submit(ctx, proposal.Write, form); err != nil {
		return fmt.Errorf("submit: %w", err)
	}
	s, err := client.WaitFinal(ctx, p.ID, nil)
	if err != nil || !api.Committed(s.Status) {
		return fmt.Errorf("proposal %s: %s %v", p.ID, s.Status, err)
	}
	return nil
}

// logRecords returns the records of n's JSON log whose message is msg.
func logRecords(t *testing.T, n *node, msg string) []map[string]any {
	t.Helper()
	f, err := os.Open(n.logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if !strings.Contains(sc.Text(), msg) {
			continue
		}
		var r map[string]any
		if json.Unmarshal(sc.Bytes(), &r) == nil && r["msg"] == msg {
			out = append(out, r)
		}
	}
	return out
}
