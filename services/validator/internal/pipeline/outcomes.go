package pipeline

import (
	"sync"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/ethereum/go-ethereum/common"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
)

// outcomes wakes the waiters of one proposal when that proposal changes,
// and remembers the records recent applies wrote. Waking everyone after
// every apply, each to re-read its record from Pebble, cost more CPU per
// proposal than signature recovery under load.
type outcomes struct {
	mu      sync.Mutex
	waiters map[common.Hash]*waiter
	recent  map[common.Hash]recentRecord
	ring    []common.Hash // insertion order of recent, for eviction
	next    int
}

// recentRecord is a remembered record: its status, and the record in wire
// form. Kept decoded, 65,536 records were 45–50 MiB of a validator's live
// heap, a dozen objects each for every GC cycle to trace, and with GOGC
// twice that in RSS (bench-soak); in wire form they are 15 MiB with nothing
// to trace. A read decodes its own copy, which the reader may keep or
// change.
type recentRecord struct {
	status ledgerpb.Status
	wire   []byte
}

// waiter is the channel the watchers of one id share, closed at the id's
// next change, and how many watch it.
type waiter struct {
	ch chan struct{}
	n  int
}

func newOutcomes(capacity int) *outcomes {
	return &outcomes{
		waiters: map[common.Hash]*waiter{},
		recent:  make(map[common.Hash]recentRecord, capacity),
		ring:    make([]common.Hash, capacity),
	}
}

// watch returns a channel closed at the next change of id, and a release
// the caller must call when it stops watching (an id that never changes
// again would otherwise keep its waiter forever). Take it before reading
// the state it is about, so that no change is missed in between.
func (o *outcomes) watch(id common.Hash) (<-chan struct{}, func()) {
	o.mu.Lock()
	defer o.mu.Unlock()
	w, ok := o.waiters[id]
	if !ok {
		w = &waiter{ch: make(chan struct{})}
		o.waiters[id] = w
	}
	w.n++
	return w.ch, func() {
		o.mu.Lock()
		defer o.mu.Unlock()
		if cur := o.waiters[id]; cur == w {
			if w.n--; w.n == 0 {
				delete(o.waiters, id)
			}
		}
	}
}

// changed wakes the waiters of id and, with a record, remembers it. A
// record that does not encode (it cannot happen: it was decoded or built
// by apply) is forgotten instead: readers find it in state.
func (o *outcomes) changed(id common.Hash, rec *ledgerpb.ProposalRecord) {
	var wire []byte
	var err error
	if rec != nil {
		wire, err = proto.Marshal(rec)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case rec == nil:
	case err != nil:
		delete(o.recent, id) // its ring slot stays until it comes round
	default:
		if _, ok := o.recent[id]; !ok {
			delete(o.recent, o.ring[o.next]) // the oldest, or the zero hash while filling
			o.ring[o.next] = id
			o.next = (o.next + 1) % len(o.ring)
		}
		o.recent[id] = recentRecord{status: rec.GetStatus(), wire: wire}
	}
	if w, ok := o.waiters[id]; ok {
		close(w.ch)
		delete(o.waiters, id)
	}
}

// record returns the last applied record of id, if it is recent.
func (o *outcomes) record(id common.Hash) (*ledgerpb.ProposalRecord, bool) {
	o.mu.Lock()
	r, ok := o.recent[id]
	o.mu.Unlock()
	if !ok {
		return nil, false
	}
	rec := &ledgerpb.ProposalRecord{}
	if err := proto.Unmarshal(r.wire, rec); err != nil {
		return nil, false // it was marshaled here: cannot happen
	}
	return rec, true
}

// status returns the status of the last applied record of id, if it is
// recent.
func (o *outcomes) status(id common.Hash) (ledgerpb.Status, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	r, ok := o.recent[id]
	return r.status, ok
}

// reset forgets every record and wakes every waiter: state was replaced.
func (o *outcomes) reset() {
	o.mu.Lock()
	defer o.mu.Unlock()
	for id, w := range o.waiters {
		close(w.ch)
		delete(o.waiters, id)
	}
	clear(o.recent)
	clear(o.ring)
	o.next = 0
}

// RecordsApplied implements state.Observer. The records are remembered
// without their message: status reads and waiters need everything else, and
// 65,536 recent 1 KiB messages would pin tens of MiB.
func (p *Pipeline) RecordsApplied(records []*ledgerpb.ProposalRecord) {
	for _, rec := range records {
		rec = withoutMessage(rec)
		id := common.BytesToHash(rec.GetProposal().GetId())
		if rec.GetStatus() == ledgerpb.Status_STATUS_FINALIZED {
			// A FINALIZED record written again (a reorg's mark on it,
			// state/reorg.go) did not turn FINALIZED again.
			if prev, ok := p.outcomes.status(id); !ok || prev != ledgerpb.Status_STATUS_FINALIZED {
				p.stats.finalized.Add(1)
			}
		}
		p.outcomes.changed(id, rec)
	}
}

// StateRestored implements state.Observer.
func (p *Pipeline) StateRestored() { p.outcomes.reset() }

// record returns the applied record of id: a recent one from memory, else
// from state.
func (p *Pipeline) record(id common.Hash) (*ledgerpb.ProposalRecord, bool, error) {
	if rec, ok := p.outcomes.record(id); ok {
		return rec, true, nil
	}
	return p.records.Record(id)
}

// withoutMessage is a shallow copy of rec whose proposal lacks its message.
// It copies field by field through reflection, so a field added to the
// messages later is kept without a change here.
func withoutMessage(rec *ledgerpb.ProposalRecord) *ledgerpb.ProposalRecord {
	if len(rec.GetProposal().GetMessage()) == 0 {
		return rec
	}
	out := shallowCopy(rec)
	prop := shallowCopy(rec.GetProposal())
	prop.Message = nil
	out.Proposal = prop
	return out
}

// shallowCopy copies the populated fields of m into a new message; bytes,
// lists and sub-messages are shared, so neither may be modified after.
func shallowCopy[M proto.Message](m M) M {
	src := m.ProtoReflect()
	dst := src.New()
	src.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		dst.Set(fd, v)
		return true
	})
	return dst.Interface().(M)
}
