package transport

import (
	"net"
	"slices"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
)

// dialMember opens a stream (or snapshot) connection to tr as registered
// peer from, past a valid hello.
func dialMember(t testing.TB, tr *Transport, kind byte, from uint64) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", tr.Addr())
	must(t, err)
	_, err = c.Write(appendHello(nil, hello{version: protocolVersion, kind: kind, from: from, to: tr.cfg.NodeID, cluster: tr.cfg.ClusterID}))
	must(t, err)
	must(t, readReply(c))
	return c
}

// A registered peer that sends what etcd raft panics on — a heartbeat
// committing past the follower's last index, a MsgApp whose entry
// conflicts with a committed one — does not stop the follower: the messages
// are refused before raft sees them, the cluster keeps committing, and the
// follower applies what it commits. On the code before the peer guard, the
// first frame panicked raft's goroutine and with it the test binary.
func TestHostileFramesDoNotStopNode(t *testing.T) {
	c := newCluster(t, 3, nil)
	l := c.leader(10 * time.Second)
	c.propose(l, "before", c.ids...)
	var f *member
	for _, id := range c.ids {
		if id != l.id {
			f = c.members[id]
			break
		}
	}
	// A member of the transport that is not (yet) a raft voter: the frames
	// come through the same path as any peer's.
	const hostile = 9
	must(t, f.tr.AddPeer(hostile, freeAddr(t)))

	st := f.node.Status()
	last, err := f.node.Storage().LastIndex()
	must(t, err)
	lastTerm, err := f.node.Storage().Term(last)
	must(t, err)
	term := new(st.Term)
	from, to := new(uint64(hostile)), new(f.id)

	conn := dialMember(t, f.tr, kindStream, hostile)
	defer conn.Close()
	beforeProto, beforeStep := f.tr.Totals().ProtocolErrors, f.tr.Totals().StepErrors

	// Past the last index: refused as inconsistent with this log, the
	// connection kept (a peer that lost its data is not malformed).
	hb := &raftpb.Message{Type: raftpb.MsgHeartbeat.Enum(), From: from, To: to, Term: term, Commit: new(last + 1000)}
	_, err = conn.Write(mustFrame(t, hb))
	must(t, err)
	// The node counts the refusal inside Step, the transport its error
	// once Step returned: wait for both.
	waitFor(t, 5*time.Second, "the heartbeat refused", func() bool {
		return f.node.PeerMessagesRefused() == 1 && f.tr.Totals().StepErrors == beforeStep+1
	})
	if got := f.tr.Totals().ProtocolErrors; got != beforeProto {
		t.Fatalf("an inconsistent heartbeat closed the stream (protocol errors %d → %d)", beforeProto, got)
	}

	// Conflicting with committed entry 1 (numbered out of sequence, so
	// raft's check that Index is not below the commit does not catch it):
	// malformed, so the stream is closed.
	app := &raftpb.Message{Type: raftpb.MsgApp.Enum(), From: from, To: to, Term: term,
		Index: new(last), LogTerm: new(lastTerm), Commit: new(last),
		Entries: []*raftpb.Entry{{Index: new(uint64(1)), Term: new(st.Term), Type: raftpb.EntryNormal.Enum(), Data: []byte("evil")}}}
	_, err = conn.Write(mustFrame(t, app))
	must(t, err)
	waitFor(t, 5*time.Second, "the append refused and its stream closed", func() bool {
		return f.node.PeerMessagesRefused() == 2 && f.tr.Totals().ProtocolErrors == beforeProto+1
	})

	// Still running, still a follower of the same cluster, still applying.
	select {
	case <-f.node.Done():
		t.Fatalf("node %d stopped: %v", f.id, f.node.Err())
	default:
	}
	c.propose(c.leader(10*time.Second), "after", c.ids...)
	if err := f.node.Err(); err != nil {
		t.Fatalf("node %d: %v", f.id, err)
	}
	if slices.Contains(f.app.data(t), "evil") {
		t.Fatal("the hostile entry was applied")
	}
}
