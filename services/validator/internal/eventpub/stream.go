// Package eventpub publishes the replicated event log to NATS JetStream
// (ADR 0023): stream LEDGER_EVENTS, one message per event on
// ledger.events.<type>.<wallet>, with Nats-Msg-Id = the event id and the
// api.Event JSON as the body. Only the leader publishes; a new leader learns
// from the stream itself where publication stopped. DESIGN.md has the
// argument for no gap and no duplicate across failovers.
package eventpub

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
)

// Defaults of StreamConfig.
const (
	DefaultStream     = "LEDGER_EVENTS"
	DefaultMaxMsgs    = 1_000_000
	DefaultMaxBytes   = 1 << 30
	DefaultDuplicates = 2 * time.Minute
)

// MaxReplicas is the most copies JetStream keeps of a stream.
const MaxReplicas = 5

// SubjectPrefix starts every event subject; Subjects is the stream's filter.
const (
	SubjectPrefix = "ledger.events."
	Subjects      = SubjectPrefix + ">"
)

// NoToken stands in the subject for an event without a wallet (consensus
// events) or with a type or wallet that is not a valid token. The body
// carries the event as it is either way.
const NoToken = "_"

// StreamConfig is what EnsureStream declares. Zero fields take the defaults.
type StreamConfig struct {
	// Name of the stream; DefaultStream when empty.
	Name string
	// MaxMsgs and MaxBytes bound what the stream keeps; the oldest events
	// go first.
	MaxMsgs  int64
	MaxBytes int64
	// Duplicates is how long the server remembers message ids: an event
	// published again within it is acknowledged as a duplicate and not
	// stored.
	Duplicates time.Duration
	// Replicas is the number of copies in a NATS cluster, at most
	// MaxReplicas; 0 means 1.
	Replicas int
}

// WithDefaults fills the zero fields.
func (c StreamConfig) WithDefaults() StreamConfig {
	if c.Name == "" {
		c.Name = DefaultStream
	}
	if c.MaxMsgs == 0 {
		c.MaxMsgs = DefaultMaxMsgs
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	if c.Duplicates == 0 {
		c.Duplicates = DefaultDuplicates
	}
	return c
}

// Validate reports settings the stream cannot have.
func (c StreamConfig) Validate() error {
	var errs []error
	if strings.ContainsAny(c.Name, " \t\r\n.*>/\\") {
		errs = append(errs, fmt.Errorf("stream name %q is not a valid JetStream name", c.Name))
	}
	if c.MaxMsgs < 0 || c.MaxBytes < 0 || c.Duplicates < 0 || c.Replicas < 0 {
		errs = append(errs, errors.New("stream limits, duplicate window and replicas must not be negative"))
	}
	if c.Replicas > MaxReplicas {
		errs = append(errs, fmt.Errorf("replicas %d: JetStream keeps at most %d", c.Replicas, MaxReplicas))
	}
	return errors.Join(errs...)
}

// StreamManager is the part of jetstream.JetStream EnsureStream uses.
type StreamManager interface {
	CreateOrUpdateStream(ctx context.Context, cfg jetstream.StreamConfig) (jetstream.Stream, error)
}

// EnsureStream creates the stream, or updates an existing one to cfg, so
// that every validator that becomes leader can declare it.
//
// Retention is by count and size, never by age: the newest message is where
// a new leader learns how far publication went, and an age limit would
// remove it after a quiet spell. Durability: file storage, and the default
// persist mode where the ack follows the write (a stream found in async
// mode is refused). Atomic batch publication is enabled: the publisher
// relies on it. JetStream has no per-stream fsync setting: acknowledged
// events survive a machine crash only when the server runs with
// sync_interval: always (DESIGN.md).
func EnsureStream(ctx context.Context, js StreamManager, cfg StreamConfig) (jetstream.Stream, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("eventpub: %w", err)
	}
	s, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        cfg.Name,
		Description: "Replicated ledger events, published by the validators' leader",
		Subjects:    []string{Subjects},
		// Stated explicitly, so that a limit set by hand on the stream is
		// undone at the next declaration.
		Retention:         jetstream.LimitsPolicy,
		MaxAge:            0,
		MaxMsgs:           cfg.MaxMsgs,
		MaxBytes:          cfg.MaxBytes,
		MaxMsgsPerSubject: -1,
		Discard:           jetstream.DiscardOld,
		Storage:           jetstream.FileStorage,
		Replicas:          max(cfg.Replicas, 1),
		Duplicates:        cfg.Duplicates,
		PersistMode:       jetstream.DefaultPersistMode,
		// The publisher writes atomic batches: all of a batch or none of it.
		AllowAtomicPublish: true,
	})
	if err != nil {
		return nil, fmt.Errorf("eventpub: declare stream %s: %w", cfg.Name, err)
	}
	if s.CachedInfo().Config.PersistMode == jetstream.AsyncPersistMode {
		// The persist mode of an existing stream cannot be changed.
		return nil, fmt.Errorf("eventpub: stream %s uses async persistence; acknowledged events could be lost", cfg.Name)
	}
	if !s.CachedInfo().Config.AllowAtomicPublish {
		// A server before 2.12 ignores the setting, and would store the
		// messages of a batch one by one.
		return nil, fmt.Errorf("eventpub: stream %s does not take atomic batches (nats-server 2.12 or later is required)", cfg.Name)
	}
	return s, nil
}

// Subject is the subject of an event: ledger.events.<type>.<wallet>, the
// wallet lowercase 0x-hex, NoToken for a missing or unusable part.
func Subject(ev *ledgerpb.Event) string {
	return SubjectPrefix + typeToken(ev.GetType()) + "." + walletToken(ev.GetWallet())
}

// typeToken keeps a type made of lowercase letters, digits, '-' and '_'.
func typeToken(t string) string {
	if t == "" || len(t) > 64 {
		return NoToken
	}
	for _, c := range []byte(t) {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return NoToken
		}
	}
	return t
}

// walletToken keeps a 0x-prefixed 20-byte hex address, lowercased.
func walletToken(w string) string {
	w = strings.ToLower(w)
	if len(w) != 42 || !strings.HasPrefix(w, "0x") {
		return NoToken
	}
	for _, c := range []byte(w[2:]) {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return NoToken
		}
	}
	return w
}

// MsgID is the Nats-Msg-Id of event id: the id in decimal, as the SSE id.
func MsgID(id uint64) string { return strconv.FormatUint(id, 10) }

// ParseMsgID reads a Nats-Msg-Id written by MsgID; ok is false for
// anything else (a message of another publisher).
func ParseMsgID(s string) (id uint64, ok bool) {
	id, err := strconv.ParseUint(s, 10, 64)
	if err != nil || id == 0 || MsgID(id) != s {
		return 0, false
	}
	return id, true
}
