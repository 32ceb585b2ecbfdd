package state

import (
	"fmt"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/pkg/proposal"
	"github.com/contentledger/contentledger/services/validator/internal/storage"
)

var (
	alice = common.HexToAddress("0x1234567890abcdef1234567890abcdef12345678")
	bob   = common.HexToAddress("0xabcdef0123456789abcdef0123456789abcdef01")
)

// path returns the full path of sub in wallet's default organization.
func path(wallet common.Address, sub string) string {
	return proposal.ContentPath(proposal.DefaultContentRoot, wallet, proposal.DefaultOrganization, sub)
}

func pid(n int) []byte {
	id := make([]byte, 32)
	id[0], id[31] = 0xee, byte(n)
	id[30] = byte(n >> 8)
	return id
}

func writeItem(n int, wallet common.Address, sub, message string) *ledgerpb.BatchItem {
	return &ledgerpb.BatchItem{
		Proposal: &ledgerpb.Proposal{
			Id:           pid(n),
			Action:       ledgerpb.Action_ACTION_WRITE,
			Wallet:       wallet.Bytes(),
			Organization: proposal.DefaultOrganization,
			Path:         path(wallet, sub),
			ContentType:  "content",
			Tier:         ledgerpb.Tier_TIER_STANDARD,
			Message:      []byte(message),
		},
		Payment: &ledgerpb.Payment{ChainId: 1337, ProposalId: pid(n), TxHash: []byte{0xaa, byte(n)}},
	}
}

func deleteItem(n int, wallet common.Address, sub string) *ledgerpb.BatchItem {
	it := writeItem(n, wallet, sub, "")
	it.Proposal.Action = ledgerpb.Action_ACTION_DELETE
	it.Proposal.Message = nil
	return it
}

// minedPayment is proposal n's payment as mined in block 0x<block>..., with
// a transaction that does not depend on the block (a re-mined copy).
func minedPayment(n int, block byte) *ledgerpb.Payment {
	hash := make([]byte, 32)
	hash[0], hash[31] = block, byte(n)
	return &ledgerpb.Payment{ChainId: 1337, ProposalId: pid(n), TxHash: append([]byte{0xaa, byte(n)}, make([]byte, 30)...),
		BlockHash: hash, BlockNumber: uint64(block), LogIndex: 3}
}

// testLog builds log entries with consecutive indexes.
type testLog struct {
	t       testing.TB
	next    uint64
	term    uint64
	entries []*Entry
	// retention is what the batches carry (zero: the defaults).
	retention EventRetention
}

func newLog(t testing.TB) *testLog { return &testLog{t: t, next: 1, term: 1} }

func (l *testLog) add(data []byte) *Entry {
	return l.addEntry(&Entry{Data: data})
}

// addEntry appends e at the next index, in the current term.
func (l *testLog) addEntry(e *Entry) *Entry {
	e.Index, e.Term = l.next, l.term
	l.next++
	l.entries = append(l.entries, e)
	return e
}

// batch appends an entry carrying a ProposalBatch sealed at sealedAt.
func (l *testLog) batch(sealedAt int64, items ...*ledgerpb.BatchItem) *Entry {
	data, err := proto.Marshal(&ledgerpb.Entry{Op: &ledgerpb.Entry_Batch{Batch: &ledgerpb.ProposalBatch{
		SealedAtMs: sealedAt, Epoch: 1000, Items: items,
		EventWindowMs: l.retention.Window.Milliseconds(), EventMax: l.retention.MaxEvents,
	}}})
	if err != nil {
		l.t.Fatal(err)
	}
	return l.add(data)
}

func (l *testLog) empty() *Entry { return l.add(nil) }

// op appends an entry carrying one op.
func (l *testLog) op(ent *ledgerpb.Entry) *Entry {
	data, err := proto.Marshal(ent)
	if err != nil {
		l.t.Fatal(err)
	}
	return l.add(data)
}

// finalize appends a FinalizeEpochs entry.
func (l *testLog) finalize(epoch uint64, atMs int64) *Entry {
	data, err := proto.Marshal(&ledgerpb.Entry{Op: &ledgerpb.Entry_Finalize{Finalize: &ledgerpb.FinalizeEpochs{Epoch: epoch, AtMs: atMs}}})
	if err != nil {
		l.t.Fatal(err)
	}
	return l.add(data)
}

// leader appends a LeaderElected entry.
func (l *testLog) leader(node, term uint64, atMs int64) *Entry {
	return l.op(&ledgerpb.Entry{Op: &ledgerpb.Entry_LeaderElected{LeaderElected: &ledgerpb.LeaderElected{NodeId: node, Term: term, AtMs: atMs}}})
}

// reorg appends a PaymentReorg entry for proposal n.
func (l *testLog) reorg(n int, retracted, replacement *ledgerpb.Payment, atMs int64) *Entry {
	return l.op(&ledgerpb.Entry{Op: &ledgerpb.Entry_PaymentReorg{PaymentReorg: &ledgerpb.PaymentReorg{
		ProposalId: pid(n), Retracted: retracted, Replacement: replacement, AtMs: atMs,
	}}})
}

// confChange appends the membership change that bootstraps node 1, without
// an address, as every bootstrap member's.
func (l *testLog) confChange() *Entry {
	return l.membership(nil, MemberChange{Type: AddVoter, NodeID: 1})
}

// membership appends a membership change.
func (l *testLog) membership(context []byte, changes ...MemberChange) *Entry {
	return l.addEntry(&Entry{Membership: &MembershipChange{Changes: changes, Context: context}})
}

func openDB(t testing.TB, dir string) *storage.DB {
	t.Helper()
	db, err := storage.Open(storage.Options{Dir: dir, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func newMachine(t testing.TB) *Machine {
	t.Helper()
	db := openDB(t, t.TempDir())
	t.Cleanup(func() { db.Close() })
	m, err := Open(db, Options{Logger: zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel))})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// openMachine opens a machine on a new store in dir, which the test
// closes (or restarts with reopen).
func openMachine(t testing.TB, dir string) (*storage.DB, *Machine) {
	t.Helper()
	db := openDB(t, dir)
	m, err := Open(db, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return db, m
}

// reopen closes db and opens the store in dir again, as a restart does,
// and returns a machine on it; the database closes with the test.
func reopen(t testing.TB, db *storage.DB, dir string) *Machine {
	t.Helper()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openDB(t, dir)
	t.Cleanup(func() { db.Close() })
	m, err := Open(db, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func mustApply(t testing.TB, m *Machine, entries ...*Entry) {
	t.Helper()
	if err := m.Apply(values(entries)); err != nil {
		t.Fatal(err)
	}
}

// values copies entries into the slice Apply takes.
func values(entries []*Entry) []Entry {
	out := make([]Entry, len(entries))
	for i, e := range entries {
		out[i] = *e
	}
	return out
}

func mustNode(t testing.TB, m *Machine, p string) *ledgerpb.Node {
	t.Helper()
	n, ok, err := m.Node(p)
	if err != nil || !ok {
		t.Fatalf("Node(%s): %v, %v", p, ok, err)
	}
	return n
}

func mustRecord(t testing.TB, m *Machine, n int) *ledgerpb.ProposalRecord {
	t.Helper()
	rec, ok, err := m.Record(common.Hash(pid(n)))
	if err != nil || !ok {
		t.Fatalf("Record(%d): %v, %v", n, ok, err)
	}
	return rec
}

func props(n *ledgerpb.Node) string {
	s := ""
	for _, p := range n.GetProperties() {
		s += fmt.Sprintf("%s=%s;", p.GetName(), p.GetValueJson())
	}
	return s
}
