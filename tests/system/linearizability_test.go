package system

import (
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/pkg/proposal"
	"github.com/contentledger/contentledger/tools/ledgerclient"
)

// The register model: every content path is a register whose value is the
// id of the proposal that last wrote it ("" while no write has committed).
// A write sets it; a read returns it. Histories are partitioned by path, so
// each register is checked on its own.

// regInput is an operation on one register.
type regInput struct {
	Write bool
	Key   string // short name of the path, e.g. "k1"
	Value string // the value a write sets: its proposal id
}

// regOutput is what a read saw; writes have none.
type regOutput struct {
	Value string
}

// shortValue abbreviates a proposal id for the visualisation.
func shortValue(v string) string {
	if v == "" {
		return "∅"
	}
	if len(v) > 10 {
		return v[:10]
	}
	return v
}

var registerModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		for _, op := range history {
			k := op.Input.(regInput).Key
			byKey[k] = append(byKey[k], op)
		}
		keys := make([]string, 0, len(byKey))
		for k := range byKey {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() any { return "" },
	Step: func(state, input, output any) (bool, any) {
		in := input.(regInput)
		if in.Write {
			return true, in.Value
		}
		out, _ := output.(regOutput)
		return out.Value == state.(string), state
	},
	DescribeOperation: func(input, output any) string {
		in := input.(regInput)
		if in.Write {
			return fmt.Sprintf("write(%s, %s)", in.Key, shortValue(in.Value))
		}
		out, _ := output.(regOutput)
		return fmt.Sprintf("read(%s) → %s", in.Key, shortValue(out.Value))
	},
	DescribeState:             func(state any) string { return shortValue(state.(string)) },
	DescribeOperationMetadata: func(info any) string { s, _ := info.(string); return s },
}

// unknownReturn is the return time of an operation whose outcome is unknown
// (it failed or timed out and may still take effect): it stays open for
// ever, so the checker may linearize it anywhere after its call, or not at
// all.
const unknownReturn = math.MaxInt64

// checkLinearizable checks history against the register model. When it is
// not linearizable (or the check does not finish within timeout), the
// porcupine visualisation, with the fault annotations, is written to a file
// in dir and its path returned.
func checkLinearizable(history []porcupine.Operation, annotations []porcupine.Annotation, timeout time.Duration, dir, name string) (porcupine.CheckResult, string, error) {
	res, info := porcupine.CheckOperationsVerbose(registerModel, history, timeout)
	if res == porcupine.Ok {
		return res, "", nil
	}
	info.AddAnnotations(annotations)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return res, "", err
	}
	path := filepath.Join(dir, fmt.Sprintf("%s-%s.html", name, time.Now().Format("20060102-150405.000")))
	return res, path, porcupine.VisualizePath(registerModel, info, path)
}

// failureDir is where failing histories are kept: tests/testdata/failures
// (checkLinearizable creates it), which .gitignore leaves out.
func failureDir(t testing.TB) string {
	if wd, err := os.Getwd(); err == nil {
		return filepath.Join(wd, "..", "testdata", "failures")
	}
	return t.TempDir()
}

// TestRegisterModel feeds the model linearizable and non-linearizable
// histories, so that TestLinearizableUnderFaults can fail.
func TestRegisterModel(t *testing.T) {
	w := func(client int, key, value string, call, ret int64) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Input: regInput{Write: true, Key: key, Value: value}, Call: call, Return: ret}
	}
	r := func(client int, key, value string, call, ret int64) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Input: regInput{Key: key}, Output: regOutput{Value: value}, Call: call, Return: ret}
	}
	for _, tc := range []struct {
		name    string
		history []porcupine.Operation
		want    porcupine.CheckResult
	}{
		{"sequential", []porcupine.Operation{r(0, "k", "", 0, 1), w(0, "k", "a", 2, 3), r(1, "k", "a", 4, 5), w(1, "k", "b", 6, 7), r(0, "k", "b", 8, 9)}, porcupine.Ok},
		{"concurrent read sees either", []porcupine.Operation{w(0, "k", "a", 0, 10), r(1, "k", "", 1, 2), r(2, "k", "a", 3, 4)}, porcupine.Ok},
		{"unknown write may take effect late", []porcupine.Operation{w(0, "k", "a", 0, unknownReturn), r(1, "k", "", 1, 2), w(1, "k", "b", 3, 4), r(1, "k", "b", 5, 6), r(2, "k", "a", 7, 8)}, porcupine.Ok},
		{"unknown write may never happen", []porcupine.Operation{w(0, "k", "a", 0, unknownReturn), r(1, "k", "", 100, 101)}, porcupine.Ok},
		{"registers are independent", []porcupine.Operation{w(0, "k1", "a", 0, 1), r(1, "k2", "", 2, 3), r(1, "k1", "a", 4, 5)}, porcupine.Ok},
		{"stale read", []porcupine.Operation{w(0, "k", "a", 0, 10), r(1, "k", "", 20, 30)}, porcupine.Illegal},
		{"lost committed write", []porcupine.Operation{w(0, "k", "a", 0, 10), w(0, "k", "b", 20, 30), r(1, "k", "a", 40, 50)}, porcupine.Illegal},
		{"unknown write seen then unseen", []porcupine.Operation{w(0, "k", "a", 0, unknownReturn), r(1, "k", "a", 5, 6), r(1, "k", "", 7, 8)}, porcupine.Illegal},
		{"value from nowhere", []porcupine.Operation{r(1, "k", "x", 5, 6)}, porcupine.Illegal},
		{"one bad register fails the history", []porcupine.Operation{w(0, "k1", "a", 0, 1), r(1, "k1", "a", 2, 3), w(2, "k2", "b", 0, 1), r(1, "k2", "", 4, 5)}, porcupine.Illegal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			got, path, err := checkLinearizable(tc.history, []porcupine.Annotation{{Tag: "faults", Start: 0, End: 1, Description: "test"}}, 10*time.Second, dir, "model")
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("check: %s, want %s", got, tc.want)
			}
			if got != porcupine.Ok {
				b, err := os.ReadFile(path)
				if err != nil || !strings.Contains(string(b), "<html") {
					t.Fatalf("visualisation %s: %d bytes, %v", path, len(b), err)
				}
			}
		})
	}
}

// linHistory collects the operations of concurrent clients.
type linHistory struct {
	start   time.Time
	mu      sync.Mutex
	ops     []porcupine.Operation
	notes   []porcupine.Annotation
	clients atomic.Int64 // porcupine client ids handed out

	writesOK, writesUnknown, readsOK, readsFailed atomic.Int64
}

// now is the time since the start, in nanoseconds (monotonic clock).
func (h *linHistory) now() int64 { return int64(time.Since(h.start)) }

func (h *linHistory) add(op porcupine.Operation) {
	h.mu.Lock()
	h.ops = append(h.ops, op)
	h.mu.Unlock()
}

// annotate marks a fault in the visualisation.
func (h *linHistory) annotate(start int64, description string) {
	h.mu.Lock()
	h.notes = append(h.notes, porcupine.Annotation{Tag: "faults", Start: start, End: h.now(), Description: description,
		BackgroundColor: "#ffd9b3"})
	h.mu.Unlock()
}

// linClient is one client of the linearizability test. Operations are
// sequential per client; after an operation of unknown outcome the client
// continues under a new porcupine client id, since that operation stays
// open for ever.
type linClient struct {
	t       testing.TB
	c       *partitionableCluster
	h       *linHistory
	cfg     api.BlockchainConfig
	key     *ecdsa.PrivateKey
	rng     *rand.Rand
	id      int
	barrier string // this client's own path for read barriers
	n       int    // operations so far
}

const (
	linOpTimeout  = 5 * time.Second       // an operation not done by then has an unknown outcome
	linStatusWait = time.Second           // ?wait= of status polls
	linRetryPause = 50 * time.Millisecond // between attempts on different validators
	linLoad       = 15 * time.Second      // how long the clients run; their last operations may take linOpTimeout more
	linClients    = 4                     // concurrent clients
	linCheckLimit = 30 * time.Second      // porcupine's time budget
	linPathPrefix = "lin"                 // below the wallet and organization
	linKeys       = "k0 k1 k2"            // the registers
)

func (lc *linClient) pick() *node { return lc.c.nodes[lc.rng.IntN(len(lc.c.nodes))] }

// pause waits d or until ctx ends; false when ctx ended.
func pause(ctx context.Context, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func (lc *linClient) run(ctx context.Context) {
	keys := strings.Fields(linKeys)
	for ctx.Err() == nil {
		key := keys[lc.rng.IntN(len(keys))]
		if lc.rng.IntN(2) == 0 {
			lc.write(key)
		} else {
			lc.read(key)
		}
	}
}

// submitAndWait submits form and waits until its proposal is terminal.
// Submission is retried with the same form on other validators (a
// proposal id is spent once, ADR 0003, so a repeat is harmless) and
// status reads go to any validator. It returns the final status, or an
// error when the outcome is unknown at the deadline.
func (lc *linClient) submitAndWait(ctx context.Context, id common.Hash, form map[string][]string, first *node) (api.ProposalStatus, *node, error) {
	n := first
	var err error
	for {
		_, err = lc.c.client(n).Submit(ctx, proposal.Write, form)
		if err == nil {
			break
		}
		switch apierror.CodeOf(err) {
		case apierror.InvalidField, apierror.InvalidSignature, apierror.ProposalIDConflict, apierror.PathForbidden:
			lc.t.Errorf("client %d: submission refused: %v", lc.id, err)
			return api.ProposalStatus{}, n, err
		}
		if !pause(ctx, linRetryPause) {
			return api.ProposalStatus{}, n, fmt.Errorf("submitting: %w (last: %v)", ctx.Err(), err)
		}
		n = lc.pick()
	}
	for {
		s, err := lc.c.client(n).Status(ctx, id, linStatusWait)
		if err == nil && api.Terminal(s.Status) {
			return s, n, nil
		}
		if ctx.Err() != nil {
			return s, n, fmt.Errorf("waiting: %w (last: %s %v)", ctx.Err(), s.Status, err)
		}
		if err != nil {
			// The validator is down, knows no leader, or does not hold the
			// proposal yet: ask another.
			if !pause(ctx, linRetryPause) {
				return s, n, fmt.Errorf("waiting: %w (last: %v)", ctx.Err(), err)
			}
			n = lc.pick()
		}
	}
}

// write sets key to a new value (the proposal's id) and records the
// operation: ok once COMMITTED, of unknown outcome when it failed or timed
// out.
func (lc *linClient) write(key string) {
	lc.n++
	p := &ledgerclient.Proposal{Message: fmt.Appendf(nil, `{"title":"client %d op %d"}`, lc.id, lc.n), ContentType: "page",
		Path: linPathPrefix + "/" + key}
	form, _, err := ledgerclient.Form(lc.cfg, lc.key, p, common.Hash{})
	if err != nil {
		lc.t.Error(err)
		return
	}
	first := lc.pick()
	call := lc.h.now()
	ctx, cancel := context.WithTimeout(context.Background(), linOpTimeout)
	s, via, err := lc.submitAndWait(ctx, p.ID, form, first)
	cancel()
	ret := lc.h.now()
	op := porcupine.Operation{ClientId: lc.id, Input: regInput{Write: true, Key: key, Value: p.ID.Hex()}, Call: call, Output: regOutput{}}
	switch {
	case err == nil && s.Status == api.StatusCommitted:
		op.Return = ret
		op.Metadata = fmt.Sprintf("COMMITTED at index %d, submitted to %d, confirmed by %d", s.CommitIndex, first.id, via.id)
		lc.h.writesOK.Add(1)
	case err == nil:
		// REJECTED: replicated as such, so it never takes effect. In MOCK
		// mode a valid write has no reason to be rejected.
		lc.t.Errorf("client %d: write %s to %s was %s: %s", lc.id, p.ID.Hex(), key, s.Status, s.Reason)
		return
	default:
		op.Return = unknownReturn
		op.Metadata = fmt.Sprintf("outcome unknown after %v: %v", time.Duration(ret-call).Round(time.Millisecond), err)
		lc.h.writesUnknown.Add(1)
	}
	lc.h.add(op)
	if op.Return == unknownReturn {
		lc.id = int(lc.h.clients.Add(1)) - 1
	}
}

// read reads key through one validator and records it if it completes.
//
// Reads are made linearizable on the client side, by a barrier: the client
// commits a write to its own barrier path through validator n, waits until n
// has applied the barrier's raft index, and only then reads the path from
// n's state. The barrier's entry was created after the read began, so its
// index is above every entry committed before the read began (log matching:
// an entry committed earlier cannot follow one that did not exist yet), and
// n's state at or past that index holds every write committed before the
// read, and only committed ones. That makes any validator, follower or
// leader, a valid place to read from.
//
// The two simpler choices are not sound here, so the test does not use
// them: /api/explore reads the local state of whichever validator answers,
// without a ReadIndex or lease check (the consensus design defers ReadIndex).
// A follower may lag; and even "read from the leader, then check it is still
// the leader" admits stale reads: a leader cut off from the majority keeps
// its role until CheckQuorum demotes it (one to two election timeouts), while
// the majority may already have elected a new leader and committed writes
// (seen here: after cutting the leader off, in about half the attempts the
// old leader reported LEADER before and after a read that missed a write the
// new leader had already committed, for windows of some 100 ms), and a newly
// elected leader has not necessarily applied the entries of earlier terms
// when it first answers. Modelling "stale reads allowed" would instead
// weaken the register until it checked little.
//
// A read that fails (validator down, barrier not committed in time) is left
// out of the history: it has no effect, so it constrains nothing.
func (lc *linClient) read(key string) {
	lc.n++
	n := lc.pick()
	p := &ledgerclient.Proposal{Message: fmt.Appendf(nil, `{"title":"barrier %d"}`, lc.n), ContentType: "page", Path: lc.barrier}
	form, _, err := ledgerclient.Form(lc.cfg, lc.key, p, common.Hash{})
	if err != nil {
		lc.t.Error(err)
		return
	}
	path := proposal.ContentPath(lc.cfg.ContentRoot, crypto.PubkeyToAddress(lc.key.PublicKey), proposal.DefaultOrganization,
		linPathPrefix+"/"+key)
	call := lc.h.now()
	ctx, cancel := context.WithTimeout(context.Background(), linOpTimeout)
	defer cancel()
	value, applied, err := lc.barrierRead(ctx, n, p.ID, form, path)
	ret := lc.h.now()
	if err != nil {
		lc.h.readsFailed.Add(1)
		return
	}
	lc.h.readsOK.Add(1)
	lc.h.add(porcupine.Operation{ClientId: lc.id, Input: regInput{Key: key}, Call: call, Output: regOutput{Value: value}, Return: ret,
		Metadata: fmt.Sprintf("read from validator %d at applied index ≥ %d", n.id, applied)})
}

func (lc *linClient) barrierRead(ctx context.Context, n *node, id common.Hash, form map[string][]string, path string) (string, uint64, error) {
	client := lc.c.client(n)
	if _, err := client.Submit(ctx, proposal.Write, form); err != nil {
		return "", 0, err
	}
	var s api.ProposalStatus
	for {
		var err error
		s, err = client.Status(ctx, id, linStatusWait)
		if err == nil && api.Terminal(s.Status) {
			break
		}
		if ctx.Err() != nil {
			return "", 0, ctx.Err()
		}
		if err != nil && !pause(ctx, linRetryPause) {
			return "", 0, ctx.Err()
		}
	}
	if !api.Committed(s.Status) || s.CommitIndex == 0 {
		return "", 0, fmt.Errorf("barrier %s", s.Status)
	}
	// The status may have come from the leader (forwarded): wait until n
	// itself has applied the barrier.
	var applied uint64
	for {
		st, err := consensusStatus(n)
		if err == nil && st.AppliedIndex >= s.CommitIndex {
			applied = st.AppliedIndex
			break
		}
		if !pause(ctx, 20*time.Millisecond) {
			return "", 0, fmt.Errorf("validator %d did not apply index %d in time", n.id, s.CommitIndex)
		}
	}
	value, found, err := exploreProposal(ctx, n, path)
	if err != nil {
		return "", 0, err
	}
	if !found {
		return "", applied, nil
	}
	return value, applied, nil
}

// exploreProposal reads the node at path on n (GET /api/explore) and
// returns the id of the proposal that last wrote it; found is false when
// there is no node.
func exploreProposal(ctx context.Context, n *node, path string) (id string, found bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.url()+"/api/explore?path="+url.QueryEscape(path), nil)
	if err != nil {
		return "", false, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var body apierror.Body
		if json.NewDecoder(resp.Body).Decode(&body) == nil && body.Error != nil && body.Error.Code == apierror.NotFound {
			return "", false, nil
		}
		return "", false, fmt.Errorf("explore %s on validator %d: %s", path, n.id, resp.Status)
	}
	var node api.Node
	if err := json.NewDecoder(resp.Body).Decode(&node); err != nil {
		return "", false, err
	}
	return node.ProposalID, true, nil
}

// TestLinearizableUnderFaults runs concurrent clients writing unique values
// to a few paths and reading them back, while the leader is partitioned
// away, the partition healed, and then the leader killed with SIGKILL and
// restarted; the history is checked for linearizability against a register
// per path. Writes that fail or time out are of unknown outcome: porcupine
// may place them anywhere after their call, or drop them.
func TestLinearizableUnderFaults(t *testing.T) {
	pc := newPartitionableCluster(t, 3)
	first := pc.waitLeader()
	cfg, err := pc.client(first).BlockchainConfig(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	key, err := crypto.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)

	h := &linHistory{start: time.Now()}
	ctx, stop := context.WithTimeout(context.Background(), linLoad)
	defer stop()
	var wg sync.WaitGroup
	for i := range linClients {
		lc := &linClient{t: t, c: pc, h: h, cfg: cfg, key: key, rng: rand.New(rand.NewPCG(uint64(seed), uint64(i))),
			id: int(h.clients.Add(1)) - 1, barrier: fmt.Sprintf("%s/barrier-%d", linPathPrefix, i)}
		wg.Go(func() { lc.run(ctx) })
	}
	// However the test ends, the clients stop before the cluster goes.
	defer wg.Wait()
	defer stop()

	// The fault schedule is fixed in time (relative to the start of the
	// load); within it the test waits, with deadlines, for each fault to
	// have its effect: a new leader among the others.
	phaseUntil := func(at time.Duration) {
		timer := time.NewTimer(at - time.Since(h.start))
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-ctx.Done():
		}
	}
	phaseUntil(2 * time.Second)
	leader := pc.waitLeader()
	at := h.now()
	pc.isolate(leader)
	next := pc.waitLeaderAmong(pc.others(leader))
	t.Logf("validator %d (leader) partitioned at %v; validator %d leads the majority %v later", leader.id,
		time.Duration(at).Round(time.Millisecond), next.id, time.Duration(h.now()-at).Round(time.Millisecond))
	phaseUntil(6 * time.Second)
	pc.heal()
	h.annotate(at, fmt.Sprintf("validator %d (leader) partitioned", leader.id))

	phaseUntil(8 * time.Second)
	leader = pc.waitLeader()
	at = h.now()
	pc.kill(leader)
	next = pc.waitLeaderAmong(pc.others(leader))
	t.Logf("validator %d (leader) killed at %v; validator %d leads %v later", leader.id,
		time.Duration(at).Round(time.Millisecond), next.id, time.Duration(h.now()-at).Round(time.Millisecond))
	phaseUntil(11 * time.Second)
	pc.start(leader)
	h.annotate(at, fmt.Sprintf("validator %d (leader) killed", leader.id))
	if ctx.Err() != nil {
		t.Fatalf("the fault schedule overran the %v of load", linLoad)
	}

	<-ctx.Done()
	wg.Wait()
	t.Logf("%d clients for %v (the last operations done by %v): writes %d committed, %d of unknown outcome; reads %d done, %d failed",
		linClients, linLoad, time.Duration(h.now()).Round(time.Millisecond), h.writesOK.Load(), h.writesUnknown.Load(), h.readsOK.Load(), h.readsFailed.Load())
	index, hash := pc.converged(pc.nodes...)
	t.Logf("all three at index %d, state hash %s", index, hash)

	if h.writesOK.Load() < 10 || h.readsOK.Load() < 10 {
		t.Fatalf("too few completed operations to check anything: %d writes, %d reads", h.writesOK.Load(), h.readsOK.Load())
	}
	began := time.Now()
	res, path, err := checkLinearizable(h.ops, h.notes, linCheckLimit, failureDir(t), t.Name())
	t.Logf("porcupine: %s in %v over %d operations", res, time.Since(began).Round(time.Millisecond), len(h.ops))
	if err != nil {
		t.Errorf("writing the visualisation: %v", err)
	}
	switch res {
	case porcupine.Ok:
	case porcupine.Illegal:
		t.Fatalf("the history is not linearizable; visualisation: %s", path)
	default:
		t.Fatalf("porcupine did not decide within %v; visualisation: %s", linCheckLimit, path)
	}
}
