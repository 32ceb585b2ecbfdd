package pipeline

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/pkg/ledgerpb"
)

// Replicated changes other than proposal batches: finality, the per-epoch
// GC job and leader announcements (sender.go), debt payments (debts.go),
// payment reorgs (reorgs.go) and the GC account routes (gc.go). Each is one
// raft entry, and a test of applied state that tells when it holds the
// change or no longer needs it. They take the sender's one write path
// (Run): released under the in-flight ceiling like proposals, proposed with
// the same refusal backoff, proposed again after CommitTimeout until
// applied (deliver), and counted (Stats.Changes, Stats.Reproposed).
//
// Two kinds, which differ in who waits and what ends them:
//
//   - Background changes come from loops that run while this node leads.
//     The loop hands a change over and goes on; the change's key keeps it
//     from handing over the same change again while it is queued or in
//     flight (the loop looks again at its next pass in any case). When
//     this node stops leading, the sender gives them up: a loop hands them
//     over again when it leads, if applied state still needs them.
//   - Route changes come from a request (the GC account routes), which
//     waits until every one is applied, bounded by its context. They have
//     no key (apply ignores a repeat) and are kept across a leader change:
//     raft forwards a follower's proposal to the leader.

// change is one replicated change in the sender's hands.
type change struct {
	data []byte // the marshalled entry
	op   string // the entry's op, for the log
	// applied reports whether applied state holds the change, or no longer
	// needs it.
	applied func() (bool, error)
	// key names a background change (nil for a route's); see Pipeline.keys.
	key any
	// ctx and done belong to a route's change: it is given up when ctx
	// ends, and done is closed once it is applied.
	ctx  context.Context
	done chan struct{}
}

// routeChange is a route's change before it is handed over.
type routeChange struct {
	entry   *ledgerpb.Entry
	applied func() (bool, error)
}

// background hands the sender a change of a loop that runs while this node
// leads, and returns without waiting for it. It reports false when a change
// of the same key is still queued or in flight, or ctx ended.
func (p *Pipeline) background(ctx context.Context, key any, ent *ledgerpb.Entry, applied func() (bool, error)) bool {
	p.keysMu.Lock()
	_, busy := p.keys[key]
	if !busy {
		p.keys[key] = struct{}{}
	}
	p.keysMu.Unlock()
	if busy {
		return false
	}
	c := &change{key: key, applied: applied, op: opName(ent)}
	var err error
	if c.data, err = proto.Marshal(ent); err != nil { // cannot happen for a well-formed message
		p.log.Error("marshalling an entry", zap.String("entry", c.op), zap.Error(err))
		p.settle(c)
		return false
	}
	select {
	case p.changes <- c:
		return true
	case <-ctx.Done():
		p.settle(c)
		return false
	}
}

// await hands the sender a route's changes and waits until every one is
// applied. It returns ctx's error when ctx ends first; the changes are then
// given up, though raft may still apply those it took.
func (p *Pipeline) await(ctx context.Context, changes ...routeChange) error {
	sent := make([]*change, len(changes))
	for i, rc := range changes {
		c := &change{applied: rc.applied, op: opName(rc.entry), ctx: ctx, done: make(chan struct{})}
		var err error
		if c.data, err = proto.Marshal(rc.entry); err != nil {
			return err
		}
		sent[i] = c
	}
	for _, c := range sent {
		select {
		case p.changes <- c:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for _, c := range sent {
		select {
		case <-c.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// routeTimeout bounds how long a route waits for its changes to be applied.
const routeTimeout = 10 * time.Second

// awaitRoute hands a route's changes to the sender and waits, at most
// routeTimeout, until they are applied. what names the change in the
// answers ("the GC account change"); retry tells the caller how to go on
// after a timeout.
func (p *Pipeline) awaitRoute(ctx context.Context, what, retry string, changes ...routeChange) error {
	ctx, cancel := context.WithTimeout(ctx, routeTimeout)
	defer cancel()
	if err := p.await(ctx, changes...); err != nil {
		if ctx.Err() != nil {
			return apierror.New(apierror.Timeout, "%s was not applied within %s; %s", what, routeTimeout, retry)
		}
		return fmt.Errorf("proposing %s: %w", what, err)
	}
	return nil
}

// sendChange delivers a change the sender released, then settles it.
func (p *Pipeline) sendChange(ctx context.Context, c *change) {
	defer p.settle(c)
	if c.ctx != nil { // a route's: given up when its request ends too
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(c.ctx, cancel)()
	}
	if !p.wanted(c) {
		return
	}
	p.stats.changes.Add(1)
	if p.deliver(ctx, c.data, c, func() bool { return p.awaitChange(ctx, c) }) && c.done != nil {
		close(c.done)
	}
}

// wanted reports whether the sender still delivers c: a route's change
// while its request waits, a background change while this node leads.
func (p *Pipeline) wanted(c *change) bool {
	if c.ctx != nil {
		return c.ctx.Err() == nil
	}
	return p.raft.IsLeader()
}

// settle frees a background change's key: the loop that handed it over may
// hand it over again.
func (p *Pipeline) settle(c *change) {
	if c.key == nil {
		return
	}
	p.keysMu.Lock()
	defer p.keysMu.Unlock()
	delete(p.keys, c.key)
}

// awaitChange waits up to CommitTimeout until applied state holds c,
// looking again after each apply; a background change also wakes at a
// change of leader, so that deliver gives it up once this node no longer
// leads.
func (p *Pipeline) awaitChange(ctx context.Context, c *change) bool {
	deadline := time.NewTimer(p.cfg.CommitTimeout)
	defer deadline.Stop()
	for {
		// Taken before the look, so that an apply in between wakes it.
		changed := p.records.Changed()
		var leader <-chan struct{}
		if c.key != nil {
			leader = p.raft.LeaderChanged()
		}
		if p.holds(c) {
			return true
		}
		select {
		case <-changed:
		case <-leader:
			if !p.wanted(c) {
				return false
			}
		case <-deadline.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// holds reports whether applied state holds c, or no longer needs it.
func (p *Pipeline) holds(c *change) bool {
	ok, err := c.applied()
	if err != nil {
		p.log.Error("reading whether a change is applied", zap.String("entry", c.op), zap.Error(err))
	}
	return ok
}

// opName names an entry's op for the log, say "GcPay".
func opName(ent *ledgerpb.Entry) string {
	if o := ent.ProtoReflect().WhichOneof(ent.ProtoReflect().Descriptor().Oneofs().ByName("op")); o != nil {
		return string(o.Message().Name())
	}
	return "entry"
}

// entryName names what deliver delivers, for the log.
func entryName(c *change) string {
	if c == nil {
		return "ProposalBatch"
	}
	return c.op
}

// changes publishes the sender's change figures.
func (s *senderState) changes(queued, inflight int) {
	s.queuedChanges.Store(int64(queued))
	s.changesInFlight.Store(int64(inflight))
}
