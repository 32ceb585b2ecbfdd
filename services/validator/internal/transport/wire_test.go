package transport

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"
)

func TestHelloRoundTrip(t *testing.T) {
	h := hello{version: protocolVersion, kind: kindSnapshot, from: 7, to: 1 << 60, cluster: "prod-eu"}
	b := appendHello(nil, h)
	got, err := readHello(bytes.NewReader(b))
	if err != nil || got != h {
		t.Fatalf("readHello = %+v, %v; want %+v", got, err, h)
	}
	for _, tc := range []struct {
		name string
		b    []byte
		want error
	}{
		{"bad magic", append([]byte("HTTP"), b[4:]...), ErrBadMagic},
		{"truncated", b[:len(b)-1], io.ErrUnexpectedEOF},
		{"empty", nil, io.EOF},
		{"kind", appendHello(nil, hello{version: protocolVersion, kind: 9, from: 1, to: 2, cluster: "c"}), ErrProtocol},
		{"zero id", appendHello(nil, hello{version: protocolVersion, kind: kindStream, from: 0, to: 2, cluster: "c"}), ErrProtocol},
		{"empty cluster", appendHello(nil, hello{version: protocolVersion, kind: kindStream, from: 1, to: 2}), ErrProtocol},
		{"version", appendHello(nil, hello{version: protocolVersion + 1, kind: kindStream, from: 1, to: 2, cluster: "c"}), ErrVersionMismatch},
		{"version 1 (snapshots from memory)", appendHello(nil, hello{version: 1, kind: kindStream, from: 1, to: 2, cluster: "c"}), ErrVersionMismatch},
	} {
		if _, err := readHello(bytes.NewReader(tc.b)); !errors.Is(err, tc.want) {
			t.Errorf("%s: readHello = %v, want %v", tc.name, err, tc.want)
		}
	}
}

func TestReplyRoundTrip(t *testing.T) {
	if err := readReply(bytes.NewReader(appendReply(nil, statusOK, ""))); err != nil {
		t.Fatal(err)
	}
	long := string(bytes.Repeat([]byte("r"), 1000))
	err := readReply(bytes.NewReader(appendReply(nil, statusClusterMismatch, long)))
	if !errors.Is(err, ErrClusterMismatch) {
		t.Fatalf("readReply = %v", err)
	}
	if err := readReply(bytes.NewReader(appendReply(nil, 200, "?"))); !errors.Is(err, ErrRejected) {
		t.Fatalf("unknown status = %v, want ErrRejected", err)
	}
	if err := readReply(bytes.NewReader([]byte("HTTP/1.1 400"))); !errors.Is(err, ErrBadMagic) {
		t.Fatalf("HTTP reply = %v", err)
	}
}

func TestFrameRoundTrip(t *testing.T) {
	m := appendMsg(1, 2, 10, bytes.Repeat([]byte{7}, 1000))
	b, err := appendFrame([]byte("prefix"), m, DefaultMaxFrameSize)
	must(t, err)
	var buf []byte
	r := bytes.NewReader(b[len("prefix"):])
	body, err := readFrame(r, DefaultMaxFrameSize, &buf)
	must(t, err)
	got, err := decodeMessage(body, hello{kind: kindStream, from: 1, to: 2})
	must(t, err)
	if !proto.Equal(got, m) {
		t.Fatalf("round trip: %v", got)
	}
	if _, err := appendFrame(nil, m, 100); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("oversized appendFrame = %v", err)
	}
	if _, err := readFrame(bytes.NewReader(b[len("prefix"):]), 100, &buf); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("oversized readFrame = %v", err)
	}
	if _, err := readFrame(bytes.NewReader(b[len("prefix"):len(b)-1]), DefaultMaxFrameSize, &buf); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("truncated readFrame = %v", err)
	}
}

func TestSnapshotHeader(t *testing.T) {
	m := snapMsg(1, 2, 42, []byte("payload"))
	m.Context = []byte("ctx")
	m.Entries = appendMsg(1, 2, 3, []byte("e")).Entries // lists are copied too
	h := snapshotHeader(m)
	if len(h.GetSnapshot().GetData()) != 0 || string(m.GetSnapshot().GetData()) != "payload" {
		t.Fatal("header kept the payload, or the original lost it")
	}
	h.Snapshot.Data = []byte("payload")
	if !proto.Equal(h, m) {
		t.Fatalf("header differs beyond the payload:\n%v\n%v", h, m)
	}
	b, err := appendFrame(nil, snapshotHeader(m), DefaultMaxFrameSize)
	must(t, err)
	var buf []byte
	body, err := readFrame(bytes.NewReader(b), DefaultMaxFrameSize, &buf)
	must(t, err)
	if _, err := decodeMessage(body, hello{kind: kindSnapshot, from: 1, to: 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := decodeMessage(body, hello{kind: kindStream, from: 1, to: 2}); !errors.Is(err, ErrProtocol) {
		t.Fatalf("MsgSnap accepted on a stream: %v", err)
	}
	full, err := appendFrame(nil, m, DefaultMaxFrameSize)
	must(t, err)
	body, err = readFrame(bytes.NewReader(full), DefaultMaxFrameSize, &buf)
	must(t, err)
	if _, err := decodeMessage(body, hello{kind: kindSnapshot, from: 1, to: 2}); !errors.Is(err, ErrProtocol) {
		t.Fatalf("snapshot header with its payload inline accepted: %v", err)
	}
}

// FuzzInbound feeds arbitrary bytes to everything that parses what a peer
// sends: the hello, then — as the accepting side does — the stream reader
// (through the real readStream, into a recording Raft) or the snapshot
// header and size, and separately the reply a dialer parses. None may
// panic, allocate beyond its limit, or let through a message that does not
// match its handshake.
func FuzzInbound(f *testing.F) {
	const maxFrame, maxSnap = 64 << 10, 1 << 20
	stream := appendHello(nil, hello{version: protocolVersion, kind: kindStream, from: 1, to: 2, cluster: "c"})
	for _, m := range []*raftpb.Message{heartbeat(1, 2), appendMsg(1, 2, 5, []byte("entry"))} {
		b, _ := appendFrame(nil, m, maxFrame)
		stream = append(stream, b...)
	}
	f.Add(stream)
	snap := appendHello(nil, hello{version: protocolVersion, kind: kindSnapshot, from: 1, to: 2, cluster: "c"})
	hdr, _ := appendFrame(nil, snapshotHeader(snapMsg(1, 2, 9, nil)), maxFrame)
	snap = appendSnapshotSize(append(snap, hdr...), 3)
	f.Add(append(snap, "abc"...))
	f.Add(appendReply(nil, statusRejected, "no"))
	f.Add([]byte("CLRT\x01\x01"))
	f.Add([]byte{})

	f.Fuzz(func(t *testing.T, data []byte) {
		_ = readReply(bytes.NewReader(data))

		r := bufio.NewReader(bytes.NewReader(data))
		h, err := readHello(r)
		if err != nil {
			return
		}
		if enc := appendHello(nil, h); !bytes.HasPrefix(data, enc) {
			t.Fatalf("hello %+v re-encodes to %x, input %x", h, enc, data[:min(len(data), len(enc))])
		}
		if h.kind == kindSnapshot {
			var buf []byte
			body, err := readFrame(r, maxFrame, &buf)
			if err != nil {
				return
			}
			if len(body) > maxFrame {
				t.Fatalf("frame of %d bytes above %d", len(body), maxFrame)
			}
			m, err := decodeMessage(body, h)
			if err != nil {
				return
			}
			if m.GetType() != raftpb.MsgSnap || m.GetFrom() != h.from || m.GetTo() != h.to {
				t.Fatalf("accepted %v on %+v", m, h)
			}
			if n, err := readSnapshotSize(r, maxSnap); err == nil && n > maxSnap {
				t.Fatalf("snapshot size %d above %d", n, maxSnap)
			}
			return
		}

		tr := &Transport{
			cfg: Config{NodeID: h.to, ClusterID: h.cluster, MaxFrameSize: maxFrame}.withDefaults(),
			log: zap.NewNop(),
			ctx: context.Background(),
		}
		rec := newRecorder()
		tr.raft.Store(&raftRef{rec})
		p := newPeer(tr, h.from, "127.0.0.1:1")
		defer p.cancel()
		if err := tr.readStream(r, h, p); err == nil {
			t.Fatal("readStream ended without an error")
		}
		for _, m := range rec.msgs {
			if m.GetFrom() != h.from || m.GetTo() != h.to || m.GetType() == raftpb.MsgSnap {
				t.Fatalf("stepped %v on %+v", m, h)
			}
		}
	})
}
