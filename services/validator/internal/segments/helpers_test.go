package segments

import (
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/pkg/proposal"
	"github.com/contentledger/contentledger/services/validator/internal/state"
	"github.com/contentledger/contentledger/services/validator/internal/storage"
)

var (
	alice = common.HexToAddress("0x1234567890abcdef1234567890abcdef12345678")
	bob   = common.HexToAddress("0xabcdef0123456789abcdef0123456789abcdef01")
)

// clock is a test clock that moves only when told.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// ledger is a state machine on a real Pebble database, fed raft entries
// carrying proposal batches, as the consensus apply loop feeds it.
type ledger struct {
	t       testing.TB
	machine *state.Machine
	next    uint64 // raft index of the next entry
	ids     int    // proposals so far
}

func newLedger(t testing.TB) *ledger {
	t.Helper()
	db, err := storage.Open(storage.Options{Dir: t.TempDir(), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	m, err := state.Open(db, state.Options{Logger: zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel))})
	if err != nil {
		t.Fatal(err)
	}
	return &ledger{t: t, machine: m, next: 1}
}

// catalog is a catalog of the ledger's state with TAR files of target
// bytes and clock c.
func (l *ledger) catalog(target uint64, c *clock) *Catalog {
	l.t.Helper()
	cat, err := New(Config{NodeID: 7, TarTargetBytes: target, Now: c.Now}, l.machine)
	if err != nil {
		l.t.Fatal(err)
	}
	return cat
}

// item is one proposal of a batch.
func (l *ledger) item(action ledgerpb.Action, wallet common.Address, sub, message string) *ledgerpb.BatchItem {
	l.ids++
	id := make([]byte, 32)
	id[0], id[30], id[31] = 0xee, byte(l.ids>>8), byte(l.ids)
	return &ledgerpb.BatchItem{
		Proposal: &ledgerpb.Proposal{Id: id, Action: action, Wallet: wallet.Bytes(), Organization: proposal.DefaultOrganization,
			Path: contentPath(wallet, sub), ContentType: "content", Tier: ledgerpb.Tier_TIER_STANDARD, Message: []byte(message)},
		Payment: &ledgerpb.Payment{ChainId: 1337, ProposalId: id, TxHash: []byte{0xaa, byte(l.ids >> 8), byte(l.ids)}},
	}
}

func (l *ledger) write(wallet common.Address, sub, message string) *ledgerpb.BatchItem {
	return l.item(ledgerpb.Action_ACTION_WRITE, wallet, sub, message)
}

func (l *ledger) delete(wallet common.Address, sub string) *ledgerpb.BatchItem {
	return l.item(ledgerpb.Action_ACTION_DELETE, wallet, sub, "")
}

// apply applies one entry carrying items as a batch, and returns its raft
// index.
func (l *ledger) apply(items ...*ledgerpb.BatchItem) uint64 {
	l.t.Helper()
	data, err := proto.Marshal(&ledgerpb.Entry{Op: &ledgerpb.Entry_Batch{Batch: &ledgerpb.ProposalBatch{
		SealedAtMs: int64(l.next) * 1000, Epoch: 1000, Items: items}}})
	if err != nil {
		l.t.Fatal(err)
	}
	index := l.next
	l.next++
	if err := l.machine.Apply([]state.Entry{{Index: index, Term: 1, Data: data}}); err != nil {
		l.t.Fatal(err)
	}
	return index
}

// node is the live node at sub of wallet, and its stored size.
func (l *ledger) node(wallet common.Address, sub string) (*ledgerpb.Node, uint64) {
	l.t.Helper()
	n, ok, err := l.machine.Node(contentPath(wallet, sub))
	if err != nil || !ok {
		l.t.Fatalf("node %s: %v, %v", sub, ok, err)
	}
	return n, uint64(proto.Size(n))
}

func contentPath(wallet common.Address, sub string) string {
	return proposal.ContentPath(proposal.DefaultContentRoot, wallet, proposal.DefaultOrganization, sub)
}
