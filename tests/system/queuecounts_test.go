package system

import (
	"fmt"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/tests/harness"
)

// queueCounters are the cumulative counters of the queue statistics.
type queueCounters struct {
	Verified, Processed, Finalized, Rejected uint64
	ByReason                                 map[string]uint64
}

func (q queueCounters) equal(o queueCounters) bool {
	return q.Verified == o.Verified && q.Processed == o.Processed && q.Finalized == o.Finalized &&
		q.Rejected == o.Rejected && maps.Equal(q.ByReason, o.ByReason)
}

// queueCountersOf reads the counters from node n's queue statistics and
// from its queue snapshot, which must agree.
func (c *cluster) queueCountersOf(n *node) (queueCounters, error) {
	client := &http.Client{Transport: bearer{operatorToken, http.DefaultTransport}}
	var stats api.QueueStats
	if err := harness.GetJSON(client, 2*time.Second, n.url()+"/v1/proposals/queue/stats", &stats); err != nil {
		return queueCounters{}, err
	}
	var snap api.QueueSnapshot
	if err := harness.GetJSON(client, 2*time.Second, n.url()+"/v1/ops/snapshots/queue", &snap); err != nil {
		return queueCounters{}, err
	}
	of := func(q api.QueueStats) queueCounters {
		return queueCounters{q.VerifiedCount, q.ProcessedCount, q.TotalFinalizedCount, q.RejectedCount, q.RejectedByReason}
	}
	if a, b := of(stats), of(snap.Queue); !a.equal(b) {
		return queueCounters{}, fmt.Errorf("validator %d: queue stats %+v, queue snapshot %+v", n.id, a, b)
	}
	return of(stats), nil
}

// bearer adds a bearer token to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// countersOf waits until every node in running answers with counters
// that satisfy ok (an election may briefly leave a route without a leader
// to ask) and returns those of the first.
func (c *cluster) countersOf(what string, ok func(*node, queueCounters) bool, running ...*node) queueCounters {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var first queueCounters
		seen := make([]string, len(running))
		all := true
		for i, n := range running {
			got, err := c.queueCountersOf(n)
			seen[i] = fmt.Sprintf("validator %d: %+v %v", n.id, got, err)
			all = all && err == nil && ok(n, got)
			if i == 0 {
				first = got
			}
		}
		if all {
			return first
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%s: not within 30s:\n%s", what, strings.Join(seen, "\n"))
		}
		time.Sleep(20 * time.Millisecond) // polling the validators
	}
}

// TestQueueCountersSurviveLeaderChangeAndRestart: the queue statistics'
// cumulative counters are the same on every validator and stay what they
// were when the leader is killed and another takes over, and when every
// validator is restarted.
func TestQueueCountersSurviveLeaderChangeAndRestart(t *testing.T) {
	// Short epochs: the committed proposals become final within seconds,
	// so totalFinalizedCount is tested too.
	c := newCluster(t, 3, "MOCK", "SVC_VALIDATOR_EPOCH_LENGTH=1s")
	leader := c.waitLeader()
	const n = 3
	for i := range n {
		c.write(leader, fmt.Sprintf(`{"title":"counted %d"}`, i))
	}
	want := c.countersOf("every proposal committed and final", func(_ *node, q queueCounters) bool {
		return q.Verified == n && q.Processed == n && q.Finalized == n && q.Rejected == 0
	}, c.nodes...)
	c.converged(c.nodes...)
	// Nothing is decided from here on: every answer must be want.
	same := func(v *node, q queueCounters) bool {
		if !q.equal(want) {
			t.Fatalf("validator %d reports %+v, before %+v", v.id, q, want)
		}
		return true
	}

	c.kill(leader)
	var survivors []*node
	for _, v := range c.nodes {
		if v != leader {
			survivors = append(survivors, v)
		}
	}
	if next := c.waitLeaderAmong(survivors); next == leader {
		t.Fatal("the killed leader is still leader")
	}
	c.countersOf("after the leader was killed", same, survivors...)

	for _, v := range survivors {
		c.kill(v)
	}
	for _, v := range c.nodes {
		c.start(v)
	}
	c.waitLeader()
	c.converged(c.nodes...)
	c.countersOf("after every validator restarted", same, c.nodes...)
}
