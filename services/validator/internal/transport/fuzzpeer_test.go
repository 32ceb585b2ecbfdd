package transport

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/services/validator/internal/consensus"
	"github.com/contentledger/contentledger/services/validator/internal/state"
	"github.com/contentledger/contentledger/services/validator/internal/storage"
)

// memApplier applies entries in memory and takes any snapshot: the fuzzed
// node's state machine, so that snapshots reach raft (and the guard) too.
// It still insists on contiguous application, which raft guarantees.
type memApplier struct {
	mu      sync.Mutex
	applied uint64
}

func (a *memApplier) Apply(ents []state.Entry) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, e := range ents {
		if e.Index != a.applied+1 {
			return fmt.Errorf("entry %d applied after %d", e.Index, a.applied)
		}
		a.applied = e.Index
	}
	return nil
}

func (a *memApplier) AppliedIndex() uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.applied
}

func (a *memApplier) RestoreSnapshot(index, _ uint64, data io.Reader) error {
	if _, err := io.Copy(io.Discard, data); err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.applied = index
	return nil
}

func (a *memApplier) VerifySnapshot(_, _ uint64, data io.Reader) error {
	_, err := io.Copy(io.Discard, data)
	return err
}

// peerFuzz is one raft node (Pebble on disk, the single voter of its
// cluster) behind a real transport listener, built once per fuzz process.
// The fuzzer speaks as peer fuzzPeer, which the transport knows.
type peerFuzz struct {
	node *consensus.Node
	tr   *Transport
}

const fuzzPeer = 2

func newPeerFuzz(f *testing.F) *peerFuzz {
	dir := f.TempDir()
	db, err := storage.Open(storage.Options{Dir: dir, NoSync: true, Logger: zap.NewNop()})
	must(f, err)
	cfg := testConfig(f, 1)
	cfg.Logger = zap.NewNop()
	cfg.StepTimeout = 20 * time.Millisecond // a proposal held without a leader
	tr, err := New(cfg)
	must(f, err)
	must(f, tr.AddPeer(fuzzPeer, freeAddr(f)))
	node, err := consensus.Start(consensus.Config{ID: 1, Peers: []uint64{1}, TickInterval: 10 * time.Millisecond, Logger: zap.NewNop()},
		db, &memApplier{}, tr)
	must(f, err)
	must(f, tr.Start(node))
	f.Cleanup(func() {
		node.Stop()
		_ = tr.Close()
		_ = db.Close()
	})
	return &peerFuzz{node: node, tr: tr}
}

// Frame flags of the member mode: which numbers are relative to the node's
// current term and last index (added modulo 2^64), so that a seed stays
// meaningful while the node's state moves on.
const (
	relTerms      = 1 << iota // Term, LogTerm, entry and snapshot terms
	relIndexes                // Index, Commit, RejectHint, snapshot index
	relEntryIndex             // entry indexes
)

// run plays one input:
//
//	mode 0: member frames, each flags u8 | length u16 | marshaled Message;
//	        From/To are set, numbers rebased per flags; MsgSnap goes on a
//	        snapshot connection (empty payload), everything else on one
//	        stream. A body that does not unmarshal is sent as it is.
//	mode 1: a valid hello as the member, then the bytes as they are.
//	mode 2: the bytes as they are, hello included.
//
// It waits until the node has read everything it will read (the acceptor
// closes the connection after our half-close, or on a protocol error).
func (p *peerFuzz) run(t *testing.T, data []byte) {
	if len(data) == 0 {
		return
	}
	mode, data := data[0]%3, data[1:]
	switch mode {
	case 1:
		p.send(t, kindStream, data)
	case 2:
		p.raw(t, data)
	default:
		var stream []byte
		for len(data) >= 3 {
			flags, n := data[0], int(binary.BigEndian.Uint16(data[1:3]))
			data = data[3:]
			n = min(n, len(data))
			body := data[:n]
			data = data[n:]
			m := &raftpb.Message{}
			if proto.Unmarshal(body, m) != nil {
				stream = appendRawFrame(stream, body)
				continue
			}
			p.rebase(m, flags)
			if m.GetType() == raftpb.MsgSnap {
				m.Snapshot = raftpb.EnsureSnapshot(m.Snapshot)
				frame, err := appendFrame(nil, snapshotHeader(m), DefaultMaxFrameSize)
				if err == nil {
					p.send(t, kindSnapshot, appendSnapshotSize(frame, 0))
				}
				continue
			}
			if frame, err := appendFrame(stream, m, DefaultMaxFrameSize); err == nil {
				stream = frame
			}
		}
		p.send(t, kindStream, stream)
	}
}

func appendRawFrame(b, body []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(body)))
	return append(b, body...)
}

func (p *peerFuzz) rebase(m *raftpb.Message, flags byte) {
	m.From, m.To = new(uint64(fuzzPeer)), new(uint64(1))
	term := p.node.Status().Term
	last, _ := p.node.Storage().LastIndex()
	if flags&relTerms != 0 {
		if t := m.GetType(); t != raftpb.MsgProp && t != raftpb.MsgReadIndex {
			m.Term = new(m.GetTerm() + term)
		}
		m.LogTerm = new(m.GetLogTerm() + term)
		for _, e := range m.GetEntries() {
			e.Term = new(e.GetTerm() + term)
		}
		if md := m.GetSnapshot().GetMetadata(); md != nil {
			md.Term = new(md.GetTerm() + term)
		}
	}
	if flags&relIndexes != 0 {
		m.Index, m.Commit, m.RejectHint = new(m.GetIndex()+last), new(m.GetCommit()+last), new(m.GetRejectHint()+last)
		if md := m.GetSnapshot().GetMetadata(); md != nil {
			md.Index = new(md.GetIndex() + last)
		}
	}
	if flags&relEntryIndex != 0 {
		for _, e := range m.GetEntries() {
			e.Index = new(e.GetIndex() + last)
		}
	}
}

// send writes data after a valid hello of the given kind and waits for the
// acceptor to finish with the connection.
func (p *peerFuzz) send(t *testing.T, kind byte, data []byte) {
	c, err := net.Dial("tcp", p.tr.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(appendHello(nil, hello{version: protocolVersion, kind: kind, from: fuzzPeer, to: 1, cluster: p.tr.cfg.ClusterID})); err != nil {
		t.Fatal(err)
	}
	if err := readReply(c); err != nil {
		t.Fatalf("hello refused: %v", err)
	}
	p.finish(t, c, data)
}

func (p *peerFuzz) raw(t *testing.T, data []byte) {
	c, err := net.Dial("tcp", p.tr.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	p.finish(t, c, data)
}

// finish writes data, half-closes, and reads until the acceptor closes: by
// then every frame it read was handed to raft.
func (p *peerFuzz) finish(t *testing.T, c net.Conn, data []byte) {
	_, _ = c.Write(data) // the acceptor may close first, on a bad frame
	_ = c.(*net.TCPConn).CloseWrite()
	// A reset is fine (the acceptor closed with our data unread); a
	// timeout means the node stopped reading.
	if _, err := io.Copy(io.Discard, c); isTimeout(err) {
		t.Fatalf("waiting for the node to finish the connection: %v", err)
	}
}

// FuzzPeerFrames drives a real raft node through its peer listener with
// whatever a registered member could send. After every input the node must
// still run, without a fatal error: no frame panics raft or stops the node.
func FuzzPeerFrames(f *testing.F) {
	p := newPeerFuzz(f)
	for _, seed := range peerSeeds(f) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p.run(t, data)
		select {
		case <-p.node.Done():
			t.Fatalf("the node stopped: %v", p.node.Err())
		default:
		}
		if err := p.node.Err(); err != nil {
			t.Fatalf("fatal error: %v", err)
		}
	})
}

// memberFrame encodes one mode-0 frame.
func memberFrame(t testing.TB, flags byte, m *raftpb.Message) []byte {
	body, err := proto.Marshal(m)
	must(t, err)
	b := []byte{flags}
	b = binary.BigEndian.AppendUint16(b, uint16(len(body)))
	return append(b, body...)
}

func memberInput(t testing.TB, frames ...[]byte) []byte {
	in := []byte{0}
	for _, fr := range frames {
		in = append(in, fr...)
	}
	return in
}

// peerSeeds: the known killers of raft, and valid traffic. Numbers are
// relative (see run): 0 is the node's current term or last index, ^0 one
// below it.
func peerSeeds(t testing.TB) [][]byte {
	const minus1 = ^uint64(0)
	all := byte(relTerms | relIndexes | relEntryIndex)
	typ := func(mt raftpb.MessageType) *raftpb.MessageType { return mt.Enum() }
	entry := func(index, term uint64, data string) *raftpb.Entry {
		return &raftpb.Entry{Index: new(index), Term: new(term), Type: raftpb.EntryNormal.Enum(), Data: []byte(data)}
	}
	snap := func(index, term uint64, voters ...uint64) *raftpb.Message {
		return &raftpb.Message{Type: typ(raftpb.MsgSnap), Snapshot: &raftpb.Snapshot{Metadata: &raftpb.SnapshotMetadata{
			Index: new(index), Term: new(term), ConfState: &raftpb.ConfState{Voters: voters}}}}
	}
	badCC := &raftpb.Entry{Type: raftpb.EntryConfChange.Enum(), Data: []byte{0xff, 0xff}}
	addMe, err := proto.Marshal(&raftpb.ConfChange{Type: raftpb.ConfChangeAddNode.Enum(), NodeId: new(uint64(fuzzPeer))})
	must(t, err)

	seeds := [][]byte{
		// Killers.
		memberInput(t, memberFrame(t, all, &raftpb.Message{Type: typ(raftpb.MsgHeartbeat), Commit: new(uint64(1000))})),
		memberInput(t, memberFrame(t, relTerms|relIndexes, &raftpb.Message{Type: typ(raftpb.MsgApp),
			Entries: []*raftpb.Entry{entry(1, 0, "conflict")}})),
		memberInput(t, memberFrame(t, all, &raftpb.Message{Type: typ(raftpb.MsgApp), Commit: new(uint64(5)),
			Entries: []*raftpb.Entry{entry(1, 0, "a"), entry(3, 0, "gap")}})),
		memberInput(t, memberFrame(t, all, snap(10, 0, 1, 1))),
		memberInput(t, memberFrame(t, all, snap(10, 0, 7))),
		memberInput(t, memberFrame(t, all, snap(0, 0, 1))),
		memberInput(t, memberFrame(t, 0, &raftpb.Message{Type: typ(raftpb.MsgProp)})),
		memberInput(t, memberFrame(t, 0, &raftpb.Message{Type: typ(raftpb.MsgProp), Entries: []*raftpb.Entry{badCC}})),
		memberInput(t, memberFrame(t, 0, &raftpb.Message{Type: typ(raftpb.MsgHeartbeat), Term: new(minus1)})),
		memberInput(t, memberFrame(t, relIndexes, &raftpb.Message{Type: typ(raftpb.MsgHeartbeat)})),
		memberInput(t, memberFrame(t, relTerms, &raftpb.Message{Type: typ(raftpb.MsgAppResp), Index: new(minus1)})),
		// A higher-term leader appends, commits, is heartbeaten past, then
		// this node's own term resumes.
		memberInput(t,
			memberFrame(t, all, &raftpb.Message{Type: typ(raftpb.MsgApp), Term: new(uint64(5)), Commit: new(uint64(1)),
				Entries: []*raftpb.Entry{entry(1, 5, "x")}}),
			memberFrame(t, all, &raftpb.Message{Type: typ(raftpb.MsgHeartbeat), Commit: new(uint64(0))}),
			memberFrame(t, all, &raftpb.Message{Type: typ(raftpb.MsgHeartbeat), Commit: new(uint64(1))})),
		// Valid traffic.
		memberInput(t, memberFrame(t, all, &raftpb.Message{Type: typ(raftpb.MsgHeartbeat)})),
		memberInput(t, memberFrame(t, all, &raftpb.Message{Type: typ(raftpb.MsgApp), Commit: new(uint64(1)),
			Entries: []*raftpb.Entry{entry(1, 0, "next")}})),
		memberInput(t, memberFrame(t, 0, &raftpb.Message{Type: typ(raftpb.MsgProp), Entries: []*raftpb.Entry{{Data: []byte("prop")}}})),
		memberInput(t, memberFrame(t, 0, &raftpb.Message{Type: typ(raftpb.MsgProp),
			Entries: []*raftpb.Entry{{Type: raftpb.EntryConfChange.Enum(), Data: addMe}}})),
		memberInput(t, memberFrame(t, all, &raftpb.Message{Type: typ(raftpb.MsgVote), Term: new(uint64(1))})),
		memberInput(t, memberFrame(t, all, &raftpb.Message{Type: typ(raftpb.MsgPreVote), Term: new(uint64(1))})),
		memberInput(t, memberFrame(t, all, &raftpb.Message{Type: typ(raftpb.MsgAppResp)})),
		memberInput(t, memberFrame(t, all, snap(10, 0, 1))),
		memberInput(t, memberFrame(t, all, &raftpb.Message{Type: typ(raftpb.MsgTimeoutNow)})),
	}
	// Mode 1: absolute numbers after a valid hello; mode 2: raw bytes.
	hb, err := appendFrame(nil, &raftpb.Message{Type: typ(raftpb.MsgHeartbeat), From: new(uint64(fuzzPeer)), To: new(uint64(1)),
		Term: new(uint64(2)), Commit: new(uint64(1 << 40))}, DefaultMaxFrameSize)
	must(t, err)
	seeds = append(seeds, append([]byte{1}, hb...))
	seeds = append(seeds, append([]byte{1}, 0, 0, 0, 3, 0xff, 0xff, 0xff))
	hello := appendHello(nil, hello{version: protocolVersion, kind: kindStream, from: fuzzPeer, to: 1, cluster: "test-cluster"})
	seeds = append(seeds, append(append([]byte{2}, hello...), hb...))
	seeds = append(seeds, append([]byte{2}, "CLRT\x01\x02garbage"...))
	return seeds
}
