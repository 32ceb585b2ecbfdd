package transport

// Wire format
//
// Every connection is one-way: the dialer sends, the acceptor receives and
// only ever answers the handshake (and, on a snapshot connection, the final
// acknowledgement). A node therefore has one outbound connection per peer
// (its stream) plus short-lived snapshot connections, and accepts the same
// from every peer.
//
//	hello (dialer → acceptor)
//	  magic    4 bytes  "CLRT"
//	  version  1 byte   protocolVersion
//	  kind     1 byte   kindStream | kindSnapshot
//	  from     8 bytes  sender's raft id, big-endian
//	  to       8 bytes  receiver's raft id, big-endian
//	  idLen    1 byte   1..255
//	  cluster  idLen bytes
//
//	reply (acceptor → dialer; also the snapshot acknowledgement)
//	  magic    4 bytes  "CLRT"
//	  status   1 byte   statusOK or a refusal code
//	  len      1 byte
//	  reason   len bytes of text for the dialer's log
//
//	stream: frames until either side closes
//	  length   4 bytes  big-endian, at most Config.MaxFrameSize
//	  message  length bytes of a marshaled raftpb.Message
//
//	snapshot: one header frame (the MsgSnap, which carries no data), then
//	  size     8 bytes  big-endian payload size, at most Config.MaxSnapshotSize
//	  payload  size bytes: the sender's snapshot file, written in chunks of
//	           snapshotChunk as it is read, and stored by the receiver as it
//	           arrives; its own frame (consensus) carries a checksum
//	  ← reply  statusOK once raft has accepted the message
//
// The magic, the version byte that follows it and the reply layout are
// frozen: a peer speaking another version reads them and is refused with a
// readable reason instead of a parse error. Everything after the version may
// change with it.
//
// No checksum: TCP (and TLS's MAC when configured) already protect the
// bytes, and every frame is length-bounded before anything is allocated.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

const (
	magic = "CLRT"
	// protocolVersion 2: a snapshot's payload is the sender's snapshot
	// file, streamed (version 1 sent Snapshot.Data from memory).
	protocolVersion = 2

	kindStream   byte = 1
	kindSnapshot byte = 2

	helloFixedLen = 4 + 1 + 1 + 8 + 8 + 1
	replyFixedLen = 4 + 1 + 1
	frameHdrLen   = 4
	maxReasonLen  = 255
)

// Reply statuses. The values are part of the wire format.
const (
	statusOK byte = iota
	statusBadVersion
	statusClusterMismatch
	statusWrongReceiver
	statusUnknownSender
	statusRejected
)

// Protocol errors. A refused handshake wraps the sentinel of its status
// with the acceptor's reason.
var (
	// ErrBadMagic: the other end does not speak this protocol (a wrong
	// port, an HTTP client, garbage).
	ErrBadMagic = errors.New("transport: not a raft transport connection")
	// ErrVersionMismatch: the peer speaks another protocol version.
	ErrVersionMismatch = errors.New("transport: protocol version mismatch")
	// ErrClusterMismatch: the peer belongs to another cluster.
	ErrClusterMismatch = errors.New("transport: cluster id mismatch")
	// ErrWrongReceiver: the address reached a node with another raft id.
	ErrWrongReceiver = errors.New("transport: connected to the wrong node")
	// ErrUnknownSender: the acceptor has no peer with the sender's id (it
	// must AddPeer it first).
	ErrUnknownSender = errors.New("transport: sender is not a known peer")
	// ErrRejected: the acceptor refused the connection or the snapshot for
	// another reason given in the error text.
	ErrRejected = errors.New("transport: rejected by peer")
	// ErrProtocol: a malformed handshake, frame or message.
	ErrProtocol = errors.New("transport: protocol error")
	// ErrFrameTooLarge: a frame above Config.MaxFrameSize.
	ErrFrameTooLarge = errors.New("transport: frame too large")
	// ErrSnapshotTooLarge: a snapshot above Config.MaxSnapshotSize.
	ErrSnapshotTooLarge = errors.New("transport: snapshot too large")
)

func statusErr(status byte) error {
	switch status {
	case statusBadVersion:
		return ErrVersionMismatch
	case statusClusterMismatch:
		return ErrClusterMismatch
	case statusWrongReceiver:
		return ErrWrongReceiver
	case statusUnknownSender:
		return ErrUnknownSender
	default:
		return ErrRejected
	}
}

// hello opens every connection.
type hello struct {
	version byte
	kind    byte
	from    uint64
	to      uint64
	cluster string
}

func appendHello(b []byte, h hello) []byte {
	b = append(b, magic...)
	b = append(b, h.version, h.kind)
	b = binary.BigEndian.AppendUint64(b, h.from)
	b = binary.BigEndian.AppendUint64(b, h.to)
	b = append(b, byte(len(h.cluster)))
	return append(b, h.cluster...)
}

// readHello reads a hello. With another version it returns what it read so
// far and ErrVersionMismatch, without reading the rest (whose layout it
// does not know), so that the acceptor can still answer with a reason.
func readHello(r io.Reader) (hello, error) {
	var fixed [helloFixedLen]byte
	if _, err := io.ReadFull(r, fixed[:6]); err != nil {
		return hello{}, err
	}
	if string(fixed[:4]) != magic {
		return hello{}, ErrBadMagic
	}
	h := hello{version: fixed[4], kind: fixed[5]}
	if h.version != protocolVersion {
		return h, fmt.Errorf("%w: peer speaks version %d, this node %d", ErrVersionMismatch, h.version, protocolVersion)
	}
	if _, err := io.ReadFull(r, fixed[6:]); err != nil {
		return h, err
	}
	h.from = binary.BigEndian.Uint64(fixed[6:14])
	h.to = binary.BigEndian.Uint64(fixed[14:22])
	n := int(fixed[22])
	if h.kind != kindStream && h.kind != kindSnapshot {
		return h, fmt.Errorf("%w: unknown connection kind %d", ErrProtocol, h.kind)
	}
	if n == 0 || h.from == 0 || h.to == 0 {
		return h, fmt.Errorf("%w: empty cluster id or zero node id in handshake", ErrProtocol)
	}
	cluster := make([]byte, n)
	if _, err := io.ReadFull(r, cluster); err != nil {
		return h, err
	}
	h.cluster = string(cluster)
	return h, nil
}

func appendReply(b []byte, status byte, reason string) []byte {
	if len(reason) > maxReasonLen {
		reason = reason[:maxReasonLen]
	}
	b = append(b, magic...)
	b = append(b, status, byte(len(reason)))
	return append(b, reason...)
}

// readReply reads a reply and returns nil for statusOK, or the refusal as
// an error wrapping the sentinel of its status.
func readReply(r io.Reader) error {
	var fixed [replyFixedLen]byte
	if _, err := io.ReadFull(r, fixed[:]); err != nil {
		return err
	}
	if string(fixed[:4]) != magic {
		return ErrBadMagic
	}
	status := fixed[4]
	reason := make([]byte, fixed[5])
	if _, err := io.ReadFull(r, reason); err != nil {
		return err
	}
	if status == statusOK {
		return nil
	}
	return fmt.Errorf("%w: %q", statusErr(status), reason)
}

// appendFrame appends m as one length-prefixed frame to b. It returns
// ErrFrameTooLarge, leaving b as it was, when the message exceeds limit.
func appendFrame(b []byte, m *raftpb.Message, limit int) ([]byte, error) {
	start := len(b)
	b = append(b, 0, 0, 0, 0)
	b, err := proto.MarshalOptions{}.MarshalAppend(b, m)
	if err != nil {
		return b[:start], err
	}
	size := len(b) - start - frameHdrLen
	if size > limit {
		return b[:start], fmt.Errorf("%w: %s of %d bytes, limit %d", ErrFrameTooLarge, m.GetType(), size, limit)
	}
	binary.BigEndian.PutUint32(b[start:], uint32(size))
	return b, nil
}

// readFrame reads one frame into buf (grown as needed, up to limit) and
// returns its body, which is valid until the next call with the same buf.
// The length is checked before anything is allocated.
func readFrame(r io.Reader, limit int, buf *[]byte) ([]byte, error) {
	var hdr [frameHdrLen]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	size := binary.BigEndian.Uint32(hdr[:])
	if uint64(size) > uint64(limit) {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrFrameTooLarge, size, limit)
	}
	if cap(*buf) < int(size) {
		*buf = make([]byte, size)
	}
	body := (*buf)[:size]
	if _, err := io.ReadFull(r, body); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return body, nil
}

// decodeMessage unmarshals a received frame and checks it against the
// handshake that opened its connection: it must come from the sender and be
// addressed to this node, never be one of raft's local messages (raft
// would ignore it, but a peer that sends one is broken), and travel on the
// right kind of connection (MsgSnap only on a snapshot connection, with its
// payload outside the header).
func decodeMessage(body []byte, h hello) (*raftpb.Message, error) {
	m := &raftpb.Message{}
	if err := proto.Unmarshal(body, m); err != nil {
		return nil, fmt.Errorf("%w: unmarshal message: %v", ErrProtocol, err)
	}
	switch {
	case raftpb.MessageType_name[int32(m.GetType())] == "":
		// raft.IsLocalMsg would index its table with a negative type.
		return nil, fmt.Errorf("%w: unknown message type %d", ErrProtocol, int32(m.GetType()))
	case m.GetFrom() != h.from || m.GetTo() != h.to:
		return nil, fmt.Errorf("%w: message from %d to %d on a connection from %d to %d",
			ErrProtocol, m.GetFrom(), m.GetTo(), h.from, h.to)
	case raft.IsLocalMsg(m.GetType()):
		return nil, fmt.Errorf("%w: local message %s received from a peer", ErrProtocol, m.GetType())
	case len(m.GetResponses()) > 0:
		return nil, fmt.Errorf("%w: message carries local responses", ErrProtocol)
	case h.kind == kindStream && m.GetType() == raftpb.MsgSnap:
		return nil, fmt.Errorf("%w: snapshot on a stream connection", ErrProtocol)
	case h.kind == kindSnapshot && (m.GetType() != raftpb.MsgSnap || m.GetSnapshot() == nil || len(m.GetSnapshot().GetData()) > 0):
		return nil, fmt.Errorf("%w: snapshot connection header is %s, not a MsgSnap without data", ErrProtocol, m.GetType())
	}
	return m, nil
}

// snapshotHeader returns m without its snapshot payload, sharing every other
// field with m (read-only: it is only marshaled). Copying field by field
// through reflection, rather than naming fields, keeps fields that a newer
// raftpb adds.
func snapshotHeader(m *raftpb.Message) *raftpb.Message {
	h := &raftpb.Message{}
	src, dst := m.ProtoReflect(), h.ProtoReflect()
	src.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Name() != "snapshot" {
			dst.Set(fd, v)
		}
		return true
	})
	h.Snapshot = &raftpb.Snapshot{Metadata: m.GetSnapshot().GetMetadata()}
	return h
}

func appendSnapshotSize(b []byte, n int64) []byte {
	return binary.BigEndian.AppendUint64(b, uint64(n))
}

func readSnapshotSize(r io.Reader, limit int64) (int64, error) {
	var b [8]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return 0, err
	}
	n := binary.BigEndian.Uint64(b[:])
	if n > uint64(limit) {
		return 0, fmt.Errorf("%w: %d bytes, limit %d", ErrSnapshotTooLarge, n, limit)
	}
	return int64(n), nil
}
