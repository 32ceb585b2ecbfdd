package pipeline

import (
	"bytes"
	"slices"
	"testing"
	"time"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
)

// TestSealOrder checks which queued proposals go into a batch: all in
// queue order while they fit; by class, then queue order, when capacity is
// short; and a long wait lifting a lower class over a newer higher one.
func TestSealOrder(t *testing.T) {
	p := &Pipeline{cfg: DefaultConfig()}
	p.cfg.MaxBatch, p.cfg.MaxPendingMessages, p.cfg.ClassAging = 3, 100, time.Second
	t0 := time.Unix(1_700_000_000, 0)
	item := func(name string, tier ledgerpb.Tier, msgBytes int) *ledgerpb.BatchItem {
		return &ledgerpb.BatchItem{Proposal: &ledgerpb.Proposal{Path: name, Tier: tier, Message: bytes.Repeat([]byte("m"), msgBytes)}}
	}
	q := func(name string, tier ledgerpb.Tier, at time.Duration) queued {
		return queued{item(name, tier, 10), t0.Add(at)}
	}
	names := func(items []*ledgerpb.BatchItem) (out []string) {
		for _, it := range items {
			out = append(out, it.GetProposal().GetPath())
		}
		return out
	}
	std, exp, pri := ledgerpb.Tier_TIER_STANDARD, ledgerpb.Tier_TIER_EXPRESS, ledgerpb.Tier_TIER_PRIORITY
	for _, tc := range []struct {
		name           string
		queue          []queued
		batches        int
		inflight       int
		now            time.Duration
		want, wantRest []string
	}{
		{"all fit: queue order", []queued{q("s1", std, 0), q("p1", pri, 0)}, 0, 0, 0, []string{"s1", "p1"}, nil},
		{"short: classes first, then queue order",
			[]queued{q("s1", std, 0), q("s2", std, 0), q("e1", exp, 0), q("p1", pri, 0), q("e2", exp, 0)}, 0, 0, 0,
			[]string{"p1", "e1", "e2"}, []string{"s1", "s2"}},
		{"aging: a standard proposal waiting 3 s outranks a new priority one",
			[]queued{q("s1", std, 0), q("e1", exp, 2500*time.Millisecond), q("p1", pri, 3*time.Second), q("p2", pri, 3*time.Second)}, 0, 0, 3 * time.Second,
			[]string{"s1", "p1", "p2"}, []string{"e1"}},
		{"a batch in flight and the queue not full: wait", []queued{q("s1", std, 0), q("s2", std, 0)}, 1, 3, 0, nil, []string{"s1", "s2"}},
		{"a batch in flight and a full batch queued: go", []queued{q("s1", std, 0), q("s2", std, 0), q("p1", pri, 0)}, 1, 3, 0,
			[]string{"s1", "s2", "p1"}, nil},
		{"at the in-flight ceiling: wait", []queued{q("p1", pri, 0)}, 0, 100, 0, nil, []string{"p1"}},
		{"room below the ceiling bounds the batch", []queued{q("s1", std, 0), q("p1", pri, 0), q("e1", exp, 0)}, 0, 98, 0,
			[]string{"p1", "e1"}, []string{"s1"}},
	} {
		items, rest := p.seal(tc.queue, tc.batches, tc.inflight, t0.Add(tc.now))
		restItems := make([]*ledgerpb.BatchItem, len(rest))
		for i, r := range rest {
			restItems[i] = r.item
		}
		if got, gotRest := names(items), names(restItems); !slices.Equal(got, tc.want) || !slices.Equal(gotRest, tc.wantRest) {
			t.Errorf("%s: batch %v rest %v, want %v and %v", tc.name, got, gotRest, tc.want, tc.wantRest)
		}
	}

	// Bytes: a batch stops before MaxBatchBytes; one larger proposal goes alone.
	p.cfg.MaxBatch, p.cfg.MaxBatchBytes = 10, 25
	items, rest := p.seal([]queued{{item("a", std, 10), t0}, {item("b", std, 10), t0}, {item("c", std, 10), t0}}, 0, 0, t0)
	if !slices.Equal(names(items), []string{"a", "b"}) || len(rest) != 1 {
		t.Errorf("by bytes: %v, %d left", names(items), len(rest))
	}
	items, rest = p.seal([]queued{{item("big", std, 100), t0}}, 0, 0, t0)
	if !slices.Equal(names(items), []string{"big"}) || len(rest) != 0 {
		t.Errorf("one large proposal: %v, %d left", names(items), len(rest))
	}
}
