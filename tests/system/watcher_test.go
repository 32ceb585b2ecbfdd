package system

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/pkg/payment"
	"github.com/contentledger/contentledger/tests/harness"
	"github.com/contentledger/contentledger/tools/devchain"
	"github.com/contentledger/contentledger/tools/devnats"
	"github.com/contentledger/contentledger/tools/ledgerclient"
)

// TestWatcherKill9MidBackfill runs the chain-watcher binary over a
// backfill of 150 payments in 50 blocks, three blocks per range, and kills
// it with SIGKILL three times as the payments reach the stream, restarting
// it each time on the same NATS server and checkpoint. The payments subject
// ends with every payment once, in chain order: nothing acknowledged is
// lost, and what a restart published again was absorbed by Msg-Id
// deduplication.
func TestWatcherKill9MidBackfill(t *testing.T) {
	chain, err := devchain.Start(devchain.Config{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = chain.Close() })
	srv, err := devnats.Start(devnats.Config{Port: -1, StoreDir: filepath.Join(t.TempDir(), "nats")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const blocks, perBlock = 50, 3
	payer := devchain.DevAccounts[2].MustKey()
	var txs []common.Hash
	for range blocks {
		for range perBlock {
			tx, err := chain.PayForProposal(ctx, payer, ledgerclient.NewProposalID(), payment.Standard)
			if err != nil {
				t.Fatal(err)
			}
			txs = append(txs, tx)
		}
		if _, err := chain.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	// A transaction may reach the pool after the block it was sent before:
	// seal blocks until every one is mined. The log ids, in chain order,
	// are what the stream must hold.
	type position struct{ block, index uint64 }
	ids := map[position]string{}
	for _, tx := range txs {
		for attempt := 0; ; attempt++ {
			r, err := chain.Client().TransactionReceipt(ctx, tx)
			if err == nil {
				for _, l := range r.Logs {
					ids[position{l.BlockNumber, uint64(l.Index)}] = fmt.Sprintf("%d:%s:%d", chain.ChainID, l.BlockHash.Hex(), l.Index)
				}
				break
			}
			if attempt == 100 {
				t.Fatalf("transaction %s never mined", tx.Hex())
			}
			if _, err := chain.Commit(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := chain.Commit(); err != nil { // the last block's confirmation
		t.Fatal(err)
	}
	order := slices.SortedFunc(maps.Keys(ids), func(a, b position) int {
		return cmp.Or(cmp.Compare(a.block, b.block), cmp.Compare(a.index, b.index))
	})
	var want []string
	for _, p := range order {
		want = append(want, ids[p])
	}
	if len(want) != blocks*perBlock {
		t.Fatalf("%d logs for %d payments", len(want), blocks*perBlock)
	}

	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var published atomic.Int64
	sub, err := nc.Subscribe(payment.Subject(chain.ChainID), func(*nats.Msg) { published.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()

	env := append(os.Environ(),
		"WATCHER_MODE=MOCK", "WATCHER_RPC_URL="+chain.URL, "WATCHER_CONTRACT_ADDRESS="+chain.PaymentLedger.Hex(),
		"WATCHER_NATS_URL="+srv.ClientURL(), "WATCHER_START_BLOCK="+strconv.FormatUint(chain.DeployBlock, 10),
		"WATCHER_CONFIRMATIONS=1", "WATCHER_MAX_BLOCK_RANGE=3", "WATCHER_POLL_INTERVAL=20ms", "WATCHER_HTTP_ADDR=")
	logPath := filepath.Join(t.TempDir(), "watcher.log")
	start := func() (*exec.Cmd, chan struct{}) {
		logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(watcherBin)
		cmd.Env, cmd.Stdout, cmd.Stderr = env, logf, logf
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); _ = logf.Close(); close(exited) }()
		return cmd, exited
	}
	kill := func(cmd *exec.Cmd, exited chan struct{}) {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-exited
	}
	showLog := func() {
		if b, err := os.ReadFile(logPath); err == nil {
			t.Logf("watcher log:\n%s", tail(b, 4000))
		}
	}

	for _, at := range []int64{20, 65, 110} {
		cmd, exited := start()
		deadline := time.Now().Add(time.Minute)
		for published.Load() < at {
			select {
			case <-exited:
				showLog()
				t.Fatalf("the watcher exited with %d payments published", published.Load())
			default:
			}
			if time.Now().After(deadline) {
				kill(cmd, exited)
				showLog()
				t.Fatalf("%d payments published within a minute, want %d", published.Load(), at)
			}
			time.Sleep(time.Millisecond) // polling a counter the subscription moves
		}
		kill(cmd, exited)
		t.Logf("killed with %d payment messages delivered", published.Load())
	}
	cmd, exited := start()
	defer kill(cmd, exited)

	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := js.Stream(ctx, "CHAIN_EVENTS")
	if err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, time.Minute, func() bool {
		info, err := stream.Info(ctx, jetstream.WithSubjectFilter(payment.Subject(chain.ChainID)))
		return err == nil && info.State.Msgs >= uint64(len(want))
	})
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{payment.Subject(chain.ChainID)}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for len(got) < len(want)+1 {
		batch, err := cons.FetchNoWait(len(want) + 1)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for msg := range batch.Messages() {
			n++
			var p ledgerpb.Payment
			if err := proto.Unmarshal(msg.Data(), &p); err != nil || p.GetRemoved() {
				t.Fatalf("message %s: %v (removed %v)", msg.Headers().Get(jetstream.MsgIDHeader), err, p.GetRemoved())
			}
			got = append(got, msg.Headers().Get(jetstream.MsgIDHeader))
		}
		if n == 0 {
			break
		}
	}
	if len(got) != len(want) {
		t.Fatalf("the stream holds %d payments, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("payment %d is %s, want %s", i, got[i], want[i])
		}
	}
}
