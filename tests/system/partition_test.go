package system

import (
	"context"
	"crypto/ecdsa"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/pkg/proposal"
	"github.com/contentledger/contentledger/tests/harness"
	"github.com/contentledger/contentledger/tools/ledgerclient"
)

// consensusStatus reads n's /v1/consensus/status.
func consensusStatus(n *node) (api.ConsensusStatus, error) {
	var st api.ConsensusStatus
	return st, get(n.url()+"/v1/consensus/status", &st)
}

// waitLeaderKnown waits until every one of nodes names the same leader, one
// of them that reports itself leader, and returns it: a follower that does
// not know the leader yet answers writes with 503 leader_unknown.
func (c *cluster) waitLeaderKnown(nodes []*node) *node {
	c.t.Helper()
	var leader *node
	harness.Eventually(c.t, 30*time.Second, func() bool {
		leader = nil
		var id uint64
		for _, n := range nodes {
			st, err := consensusStatus(n)
			if err != nil || st.Leader == 0 || (id != 0 && st.Leader != id) {
				return false
			}
			id = st.Leader
			if st.Role == api.RoleLeader {
				leader = n
			}
		}
		return leader != nil && leader.id == id
	})
	return leader
}

// signedWrite builds the signed form of a write of message at sub (below the
// key's wallet and the default organization; "" for a path of its own).
func signedWrite(t testing.TB, cfg api.BlockchainConfig, key *ecdsa.PrivateKey, sub, message string) (*ledgerclient.Proposal, map[string][]string, string) {
	t.Helper()
	p := &ledgerclient.Proposal{Message: []byte(message), ContentType: "page", Path: sub}
	form, path, err := ledgerclient.Form(cfg, key, p, common.Hash{})
	if err != nil {
		t.Fatal(err)
	}
	return p, form, path
}

// TestPartition cuts the leader's raft links to both followers (both
// directions) and checks that the isolated leader steps down (CheckQuorum)
// without raising its term (PreVote), that the majority elects a new leader
// and commits, that a write submitted to the isolated node never commits
// while it is cut off, and that after healing the three converge.
func TestPartition(t *testing.T) {
	pc := newPartitionableCluster(t, 3)
	old := pc.waitLeaderKnown(pc.nodes)
	majority := pc.others(old)
	pc.write(majority[0], `{"title":"before the partition"}`)
	pc.converged(pc.nodes...)

	isolated := pc.client(old)
	ctx := context.Background()
	cfg, err := isolated.BlockchainConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	key, err := crypto.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	before, err := consensusStatus(old)
	if err != nil || before.Role != api.RoleLeader {
		t.Fatalf("validator %d before the cut: %+v %v", old.id, before, err)
	}

	pc.isolate(old)
	cutAt := time.Now()
	t.Logf("validator %d (leader, term %d) cut off from %d and %d", old.id, before.Term, majority[0].id, majority[1].id)

	// Right after the cut the old leader still believes it leads, and takes
	// the write in; but intake replicates the acceptance before answering
	// 202, which it cannot do now: after its commit timeout it answers 503
	// leader_unknown ("resubmit"), unless it knew no leader by then (503 at
	// once). It must not commit while the node is cut off.
	early, form, _ := signedWrite(t, cfg, key, "", `{"title":"submitted to the isolated leader"}`)
	type submitted struct {
		sub ledgerclient.Submitted
		err error
		in  time.Duration
	}
	earlyDone := make(chan submitted, 1)
	go func() {
		sub, err := isolated.Submit(ctx, proposal.Write, form)
		earlyDone <- submitted{sub, err, time.Since(cutAt)}
	}()
	notCommitted := func(when string) {
		t.Helper()
		for _, n := range pc.nodes {
			s, err := pc.client(n).Status(ctx, early.ID, 0)
			// A majority node that does not hold the proposal forwards the
			// read to the leader it knows over HTTP, which the raft
			// partition does not cut: until the majority elects a new
			// leader it may answer the isolated node's PENDING/VERIFIED.
			switch {
			case err == nil && api.Terminal(s.Status):
				t.Fatalf("%s: validator %d reports the isolated write %s", when, n.id, s.Status)
			case err != nil && apierror.CodeOf(err) != apierror.NotFound && apierror.CodeOf(err) != apierror.LeaderUnknown:
				t.Fatalf("%s: status of the isolated write on validator %d: %v", when, n.id, err)
			}
		}
	}
	notCommitted("right after the cut")

	// The isolated leader steps down once an election timeout passes
	// without hearing from a quorum.
	var down api.ConsensusStatus
	harness.Eventually(t, 10*time.Second, func() bool {
		var err error
		down, err = consensusStatus(old)
		return err == nil && down.Role != api.RoleLeader
	})
	t.Logf("validator %d stepped down after %v: role %s, term %d, leader %d", old.id, time.Since(cutAt).Round(time.Millisecond),
		down.Role, down.Term, down.Leader)
	if down.Leader != 0 {
		t.Fatalf("the isolated validator %d names validator %d as leader", old.id, down.Leader)
	}
	// Knowing no leader, it refuses new writes with 503 leader_unknown.
	_, form2, _ := signedWrite(t, cfg, key, "", `{"title":"after the step-down"}`)
	if _, err := isolated.Submit(ctx, proposal.Write, form2); apierror.CodeOf(err) != apierror.LeaderUnknown {
		t.Fatalf("write to the isolated validator after it stepped down: %v, want 503 leader_unknown", err)
	}

	// Its deep health names the failing part.
	if code, h := deepHealth(t, old); code != http.StatusServiceUnavailable || h.Status != "unavailable" || h.Checks["raft"].Status != "failing" {
		t.Fatalf("deep health of the isolated validator: %d %+v", code, h)
	}

	// The majority elects a new leader and commits, through the leader and
	// through the other follower (forwarding).
	next := pc.waitLeaderKnown(majority)
	if code, h := deepHealth(t, next); code != http.StatusOK || h.Status != "ok" {
		t.Fatalf("deep health of the majority's leader: %d %+v", code, h)
	}
	nextSt, _ := consensusStatus(next)
	t.Logf("validator %d leads the majority at term %d, %v after the cut", next.id, nextSt.Term, time.Since(cutAt).Round(time.Millisecond))
	var written []common.Hash
	for i, n := range majority {
		id, _ := pc.write(n, `{"title":"majority write"}`)
		written = append(written, id)
		notCommitted(fmt.Sprintf("after majority write %d", i+1))
	}
	pc.converged(majority...)
	res := <-earlyDone
	switch {
	case res.err == nil:
		t.Logf("the isolated leader answered %d %s for %s after %v", res.sub.HTTPStatus, res.sub.Receipt.Status, early.ID.Hex(),
			res.in.Round(time.Millisecond))
	case apierror.CodeOf(res.err) == apierror.LeaderUnknown:
		t.Logf("the isolated leader answered 503 leader_unknown after %v: %v", res.in.Round(time.Millisecond), res.err)
	default:
		t.Fatalf("write to the isolated leader: %v, want 202 or 503 leader_unknown", res.err)
	}
	notCommitted("after the isolated leader answered")

	// A fixed phase with the partition in place: the isolated node must not
	// commit the write, name a leader, nor raise its term (PreVote keeps a
	// node that cannot win from campaigning at ever higher terms).
	phase := time.NewTimer(2 * time.Second)
	tick := time.NewTicker(200 * time.Millisecond)
	for waiting := true; waiting; {
		select {
		case <-phase.C:
			waiting = false
		case <-tick.C:
		}
		notCommitted("during the partition")
		st, err := consensusStatus(old)
		if err != nil {
			t.Fatal(err)
		}
		if st.Role == api.RoleLeader || st.Leader != 0 || st.Term != before.Term {
			t.Fatalf("isolated validator %d: role %s, leader %d, term %d (term at the cut %d)", old.id, st.Role, st.Leader, st.Term, before.Term)
		}
	}
	tick.Stop()

	pc.heal()
	healedAt := time.Now()
	// The old leader rejoins as a follower of the new term and catches up
	// with the writes it missed.
	var rejoined api.ConsensusStatus
	harness.Eventually(t, 15*time.Second, func() bool {
		var err error
		rejoined, err = consensusStatus(old)
		return err == nil && rejoined.Leader != 0 && rejoined.Leader != old.id && rejoined.Term > before.Term
	})
	t.Logf("validator %d rejoined %v after healing: follower of %d at term %d", old.id, time.Since(healedAt).Round(time.Millisecond),
		rejoined.Leader, rejoined.Term)
	// Whatever the isolated leader answered, the write may still commit
	// now: the acceptance entry it proposed stays in its sender, which
	// proposes it again (through raft's forwarding to the new leader) until
	// it is applied, and a leader then adopts and decides it. A 503 from
	// intake is therefore a "maybe", as its "resubmit the same proposal"
	// says. Whatever happens, all validators must agree.
	fate := "not_found"
	fateCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	for fateCtx.Err() == nil {
		s, err := pc.client(next).Status(fateCtx, early.ID, time.Second)
		if err == nil {
			if fate = s.Status; api.Terminal(fate) {
				break
			}
			continue // the status changed within the wait, or it passed
		}
		if !pause(fateCtx, 100*time.Millisecond) { // not found yet: poll
			break
		}
	}
	cancel()
	t.Logf("after healing, the write submitted to the isolated leader is %s (%v after healing)", fate,
		time.Since(healedAt).Round(time.Millisecond))
	index, hash := pc.converged(pc.nodes...)
	for _, id := range written {
		if s, err := isolated.Status(ctx, id, 0); err != nil || !api.Committed(s.Status) {
			t.Fatalf("majority write %s on the rejoined validator %d: %s %v", id.Hex(), old.id, s.Status, err)
		}
	}
	if api.Terminal(fate) {
		for _, n := range pc.nodes {
			if s, err := pc.client(n).Status(ctx, early.ID, 0); err != nil || s.Status != fate {
				t.Fatalf("the write submitted to the isolated leader is %s on validator %d, %s on %d: %v", s.Status, n.id, fate, next.id, err)
			}
		}
	}
	final, _ := consensusStatus(next)
	t.Logf("all three at index %d, state hash %s; leader %d at term %d (majority leader was %d at term %d)",
		index, hash, final.Leader, final.Term, next.id, nextSt.Term)
}
