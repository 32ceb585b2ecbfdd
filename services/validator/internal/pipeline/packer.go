package pipeline

import (
	"cmp"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/pkg/payment"
)

// packer is the packing buffer between the verifiers and the sender: the
// contract's "verified; routed by epoch and tier into the packing buffer",
// where "nearby writes are grouped into storage-aware bounded
// micro-batches".
//
// Decided proposals are routed into a bucket per (epoch accepted in,
// payment class). Inside a bucket, proposals of one wallet and organization
// gather in micro-batches of at most MicroBatch proposals and
// MicroBatchBytes of encoded proposals (itemBytes). A wallet's organization is one key prefix in
// state (ADR 0004: /<root>/<xx>/<xx>/<xx>/<wallet>/<organization>/...),
// so a micro-batch's writes land next to each other: one wallet's figures
// and one stretch of the node keyspace for all of them (apply already
// caches a wallet's figures per entry, so this saves no measurable apply
// time today; see DESIGN.md).
//
// A micro-batch is the unit of release: the sender takes whole micro-batches
// (splitting one only to fill the last room of a batch), so a wallet's
// proposals stay together, and bounding micro-batches keeps one busy wallet
// from taking a whole batch while others wait: a wallet with many queued
// proposals has many micro-batches, each in its place in arrival order.
//
// Reordering is safe because of what a prefix is. Proposals of different
// prefixes never touch the same keys (a path belongs to its wallet's
// organization subtree), so releasing them in any order gives the same
// state. Proposals of one prefix and class keep their arrival order: within
// a micro-batch, and across its micro-batches, which rank alike and then go
// in arrival order. Across classes a higher class may pass a lower one
// under pressure, as ADR 0022 wants; intake promises no order between proposals
// in flight together.
//
// The packer is owned by the sender goroutine; it is not safe for
// concurrent use.
type packer struct {
	maxItems, maxBytes int // micro-batch bounds
	// weigh is what an item counts against the byte bounds: itemBytes
	// (the golden cases of testdata/packer weigh messages only).
	weigh        func(*ledgerpb.BatchItem) int
	buckets      map[bucketKey]*bucket
	items, bytes int    // queued proposals and their weight
	micros       int    // micro-batches holding them
	seq          uint64 // arrival order of micro-batches
}

// bucketKey is an epoch bucket's key: the epoch proposals were accepted in
// and their payment class.
type bucketKey struct {
	epoch uint64
	class payment.Class
}

// bucket holds one (epoch, class)'s micro-batches in arrival order.
type bucket struct {
	micros []*microBatch
	// open is the micro-batch of each prefix that still takes proposals.
	open map[prefixKey]*microBatch
}

// prefixKey is a wallet and organization: one subtree of the keyspace.
type prefixKey struct {
	wallet       string // the 20 address bytes
	organization string
}

// microBatch is a run of one prefix's proposals, in arrival order.
type microBatch struct {
	bucket bucketKey
	prefix prefixKey
	items  []*ledgerpb.BatchItem
	bytes  int
	since  time.Time // when its first proposal was queued
	seq    uint64
}

func newPacker(maxItems, maxBytes int) *packer {
	return &packer{maxItems: maxItems, maxBytes: maxBytes, weigh: itemBytes, buckets: map[bucketKey]*bucket{}}
}

// add queues a decided proposal (or an acceptance) at now.
func (k *packer) add(item *ledgerpb.BatchItem, now time.Time) {
	prop := item.GetProposal()
	key := bucketKey{epoch: prop.GetEpoch(), class: payment.ClassFromProto(prop.GetTier())}
	prefix := prefixKey{wallet: string(prop.GetWallet()), organization: prop.GetOrganization()}
	n := k.weigh(item)
	b := k.buckets[key]
	if b == nil {
		b = &bucket{open: map[prefixKey]*microBatch{}}
		k.buckets[key] = b
	}
	m := b.open[prefix]
	if m == nil || len(m.items) >= k.maxItems || m.bytes+n > k.maxBytes {
		k.seq++
		m = &microBatch{bucket: key, prefix: prefix, since: now, seq: k.seq}
		b.micros = append(b.micros, m)
		b.open[prefix] = m
		k.micros++
	}
	m.items = append(m.items, item)
	m.bytes += n
	k.items++
	k.bytes += n
}

// oldest returns when the longest-waiting queued proposal was queued, the
// zero time when nothing is queued. Each bucket keeps arrival order, so
// only bucket heads are looked at.
func (k *packer) oldest() time.Time {
	var at time.Time
	for _, b := range k.buckets {
		if since := b.micros[0].since; at.IsZero() || since.Before(at) {
			at = since
		}
	}
	return at
}

// take removes and returns the proposals of one batch of at most room
// proposals and maxBytes of encoded proposals (a single larger one goes
// alone).
//
// When everything queued fits, everything goes, epochs in order and each
// micro-batch's proposals together. When it does not, capacity is short
// and micro-batches go by rank: the class (standard 0, express 1, priority
// 2) plus one for every aging waited (0: no aging), so that a higher class
// drains first and none starves (ADR 0022); then the older epoch, then
// arrival. Release stops at the first micro-batch that does not fit at all,
// so a lower rank never passes a higher one; the last one taken may be
// split to fill the batch, its rest keeping its place.
func (k *packer) take(room, maxBytes int, now time.Time, aging time.Duration) []*ledgerpb.BatchItem {
	if k.items == 0 || room <= 0 {
		return nil
	}
	micros := make([]*microBatch, 0, k.micros)
	for _, b := range k.buckets {
		micros = append(micros, b.micros...)
	}
	fits := k.items <= room && (k.bytes <= maxBytes || k.items == 1)
	if fits {
		slices.SortFunc(micros, func(a, b *microBatch) int {
			return cmp.Or(cmp.Compare(a.bucket.epoch, b.bucket.epoch), cmp.Compare(a.seq, b.seq))
		})
	} else {
		rank := func(m *microBatch) int64 {
			r := int64(m.bucket.class)
			if aging > 0 {
				r += int64(now.Sub(m.since) / aging)
			}
			return r
		}
		slices.SortFunc(micros, func(a, b *microBatch) int {
			return cmp.Or(cmp.Compare(rank(b), rank(a)), cmp.Compare(a.bucket.epoch, b.bucket.epoch), cmp.Compare(a.seq, b.seq))
		})
	}
	items := make([]*ledgerpb.BatchItem, 0, min(room, k.items))
	bytes := 0
	for _, m := range micros {
		took, whole := 0, len(m.items)
		for _, it := range m.items {
			n := k.weigh(it)
			if len(items) == room || (len(items) > 0 && bytes+n > maxBytes) {
				break
			}
			items, bytes, took = append(items, it), bytes+n, took+1
		}
		if took > 0 {
			k.remove(m, took)
		}
		if took < whole {
			break // the batch is full, or m does not fit: nothing ranked lower passes it
		}
	}
	return items
}

// itemBytes is what an item weighs in a raft entry: its encoded size,
// message, path, signature and payment included. Counting the message
// alone let proposals with long paths seal an entry past the transport's
// frame limit, which stalls replication.
func itemBytes(it *ledgerpb.BatchItem) int { return proto.Size(it) }

// remove drops the first n proposals of m, and m itself once it is empty.
func (k *packer) remove(m *microBatch, n int) {
	for _, it := range m.items[:n] {
		size := k.weigh(it)
		k.bytes -= size
		m.bytes -= size
	}
	k.items -= n
	clear(m.items[:n])
	m.items = m.items[n:]
	b := k.buckets[m.bucket]
	if b.open[m.prefix] == m {
		// A split micro-batch takes no more: it keeps its place and its
		// age, which newer proposals have not earned.
		delete(b.open, m.prefix)
	}
	if len(m.items) > 0 {
		return
	}
	k.micros--
	b.micros = slices.DeleteFunc(b.micros, func(x *microBatch) bool { return x == m })
	if len(b.micros) == 0 {
		delete(k.buckets, m.bucket)
	}
}

// Figures of the packing buffer, for the queue routes.
type packerFigures struct {
	Items, Bytes, MicroBatches, Buckets int
}

func (k *packer) figures() packerFigures {
	return packerFigures{Items: k.items, Bytes: k.bytes, MicroBatches: k.micros, Buckets: len(k.buckets)}
}
