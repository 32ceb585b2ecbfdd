package payments

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// DefaultStatusStale is the age past which the chain-watcher's status
// counts as stopped: it publishes at least every 30 s while it runs
// (chain-watcher DESIGN, status).
const DefaultStatusStale = 90 * time.Second

// Probe asks the NATS server for the payment stream: the deep health check
// of the stream the index follows.
func (f *Follower) Probe(ctx context.Context) (string, error) {
	s, err := f.JS.Stream(ctx, f.Stream)
	if err != nil {
		return "", fmt.Errorf("JetStream stream %s: %w", f.Stream, err)
	}
	info := s.CachedInfo()
	return fmt.Sprintf("stream %s: %d messages, last sequence %d", f.Stream, info.State.Msgs, info.State.LastSeq), nil
}

// Probe checks that the chain-watcher's status is recent: the deep health
// check that the watcher runs.
func (c *ChainStatus) Probe(context.Context) (string, error) {
	s, at, ok := c.Latest()
	if !ok {
		return "", errors.New("no status from the chain-watcher yet")
	}
	age := c.now().Sub(at).Round(time.Millisecond)
	cursor := "none yet"
	if s.Cursor != nil {
		cursor = fmt.Sprint(s.Cursor.Number)
	}
	detail := fmt.Sprintf("chain-watcher status received %s ago: head %d, cursor %s", age, s.Head.Number, cursor)
	if age > c.staleAfter() {
		return "", fmt.Errorf("the chain-watcher's status is older than %s: %s", c.staleAfter(), detail)
	}
	return detail, nil
}
