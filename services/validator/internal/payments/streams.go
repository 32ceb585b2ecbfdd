package payments

import (
	"context"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/contentledger/contentledger/pkg/api"
)

// streamsKeptFor is how long the streams' state is reused: one JetStream
// API request per stream, and the edge asks every validator about as often.
const streamsKeptFor = time.Second

// Streams reads the state of the JetStream streams the ledger uses (the
// chain-watcher's payments, the published events) for /v1/chain/status,
// reusing a reading for streamsKeptFor. It is safe for concurrent use.
type Streams struct {
	js    jetstream.JetStream
	names []string
	now   func() time.Time

	mu      sync.Mutex
	streams []api.StreamState
	missing []api.Gap
	readAt  time.Time
}

// NewStreams reads the streams names through js.
func NewStreams(js jetstream.JetStream, names []string, now func() time.Time) *Streams {
	return &Streams{js: js, names: names, now: now}
}

// States returns each stream's state; a stream not found or not answered
// is a gap.
func (s *Streams) States(ctx context.Context) ([]api.StreamState, []api.Gap) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.streams != nil && s.now().Sub(s.readAt) < streamsKeptFor {
		return s.streams, s.missing
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	streams, missing := []api.StreamState{}, []api.Gap{}
	for _, name := range s.names {
		st, err := s.js.Stream(ctx, name)
		var info *jetstream.StreamInfo
		if err == nil {
			info, err = st.Info(ctx)
		}
		if err != nil {
			missing = append(missing, api.Gap{Field: "streams." + name, Reason: "not read: " + err.Error()})
			continue
		}
		state := info.State
		streams = append(streams, api.StreamState{Name: name, Messages: state.Msgs, Bytes: state.Bytes, FirstSeq: state.FirstSeq,
			LastSeq: state.LastSeq, Consumers: state.Consumers, ReadAt: s.now().UTC()})
	}
	s.streams, s.missing, s.readAt = streams, missing, s.now()
	return streams, missing
}
