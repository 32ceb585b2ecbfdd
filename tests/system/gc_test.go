package system

import (
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/pkg/proposal"
	"github.com/contentledger/contentledger/tools/ledgerclient"
)

// The GC system tests (docs/adr/0033). Every cluster runs in MOCK mode with
// an epoch an hour long, so epochs move only when a test advances the
// leader's clock (/api/mock/advance-epoch). The leader proposes COMPACT
// when an epoch is final that no run has had yet and the garbage since the
// last run reaches gcTestSizeDelta: the first run comes as soon as the
// writes reach the threshold (the clock starts with epochs already final),
// each later one when the test advances the epoch. A test reads runs back
// (/v1/gc/status lastRun) with a deadline.

// gcTestSizeDelta is SVC_VALIDATOR_GC_SIZE_DELTA in these tests: a few
// writes are garbage enough.
const gcTestSizeDelta = 8 << 10

// gcTestStepBytes is SVC_VALIDATOR_GC_STEP_BYTES in these tests: a run
// takes several steps, with writes applied between them.
const gcTestStepBytes = 16 << 10

// gcEnv are the settings of a GC test cluster: extra and those above.
func gcEnv(extra ...string) []string {
	return append([]string{"SVC_VALIDATOR_GC_SIZE_DELTA=" + strconv.Itoa(gcTestSizeDelta), "SVC_VALIDATOR_EPOCH_LENGTH=1h",
		"SVC_VALIDATOR_GC_STEP_BYTES=" + strconv.Itoa(gcTestStepBytes)}, extra...)
}

// gcRunDeadline bounds the wait for a GC run after an epoch advance: the
// leader looks once a second (FinalizeInterval), and under load the garbage
// may still have to reach the threshold.
const gcRunDeadline = 30 * time.Second

func gcStatus(n *node) (api.GcStatus, error) {
	var st api.GcStatus
	err := get(n.url()+"/v1/gc/status", &st)
	return st, err
}

// lastRun is n's last GC run, 0 for none.
func lastRun(n *node) (api.GcRun, error) {
	st, err := gcStatus(n)
	if err != nil || st.LastRun == nil {
		return api.GcRun{}, err
	}
	return *st.LastRun, nil
}

// advanceEpoch moves leader's MOCK clock one epoch on: one more epoch is
// final, and a compaction is due once the garbage reaches the threshold.
func (c *cluster) advanceEpoch(leader *node) {
	c.t.Helper()
	if code, out := send(c.t, http.MethodPost, leader.url()+"/api/mock/advance-epoch", nil); code != http.StatusOK {
		c.t.Fatalf("advancing validator %d's epoch: %d %s", leader.id, code, out)
	}
}

// waitRun waits until n has applied GC run number run to its end (or a
// later run) and returns n's last run.
func (c *cluster) waitRun(n *node, run uint64) api.GcRun {
	c.t.Helper()
	deadline := time.Now().Add(gcRunDeadline)
	for {
		r, err := lastRun(n)
		if err == nil && (r.Run > run || r.Run == run && r.State != api.GcRunRunning) {
			return r
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("validator %d has not applied GC run %d within %s: last run %+v, %v", n.id, run, gcRunDeadline, r, err)
		}
		time.Sleep(20 * time.Millisecond) // polling the validator
	}
}

// compactOnce waits for GC run number run on the leader, after advancing
// its epoch for every run but the first: the leader proposed COMPACT on a
// finalized epoch, a majority committed it and the leader applied it.
func (c *cluster) compactOnce(leader *node, run uint64) api.GcRun {
	c.t.Helper()
	if run > 1 {
		c.advanceEpoch(leader)
	}
	r := c.waitRun(leader, run)
	if r.Run != run {
		c.t.Fatalf("validator %d went from GC run %d to %d on one epoch advance", leader.id, run-1, r.Run)
	}
	return r
}

// sameRun waits until every node in running has applied run and checks
// that each records it alike: the same epoch, commit index, generation,
// figures and state hash (apply is deterministic). Runs only move on the
// test's epoch advances, so each node's last run is run itself.
func (c *cluster) sameRun(want api.GcRun, running ...*node) {
	c.t.Helper()
	for _, n := range running {
		got := c.waitRun(n, want.Run)
		if !sameGcRun(got, want) {
			c.t.Fatalf("validator %d recorded GC run %d as %+v, the leader as %+v", n.id, want.Run, got, want)
		}
	}
}

// sameGcRun reports whether a and b record a run alike.
func sameGcRun(a, b api.GcRun) bool {
	if (a.EndAt == nil) != (b.EndAt == nil) || a.EndAt != nil && !a.EndAt.Equal(*b.EndAt) {
		return false
	}
	a.EndAt, b.EndAt = nil, nil
	return a == b
}

// compactionProposals are n's applied COMPACT entries.
func compactionProposals(t *testing.T, n *node) []api.CompactionProposal {
	t.Helper()
	var out api.CompactionProposals
	if err := get(n.url()+"/v1/compaction/proposals", &out); err != nil {
		t.Fatal(err)
	}
	return out.Proposals
}

// checkRetained checks n's segment store after the GC runs runs: only the
// generations of the last two runs are left (the contract keeps two), the
// oldest segment kept is the first one the next-to-last run wrote, every
// TAR file is named after its generation, and the runs after the first
// reclaimed what cleanup dropped.
func checkRetained(t *testing.T, n *node, runs []api.GcRun) {
	t.Helper()
	last := runs[len(runs)-1]
	prev := runs[len(runs)-2]
	st, err := gcStatus(n)
	if err != nil {
		t.Fatal(err)
	}
	if want := []uint32{prev.Generation, last.Generation}; !slices.Equal(st.Generations.Present, want) || st.Generations.Current != last.Generation {
		t.Fatalf("validator %d holds generations %v (current %d), want %v after GC run %d", n.id, st.Generations.Present, st.Generations.Current, want, last.Run)
	}
	var tars api.SegmentTars
	if err := get(n.url()+"/api/segments/tars", &tars); err != nil {
		t.Fatal(err)
	}
	if len(tars.Tars) == 0 || tars.Tars[0].FirstIndex != prev.CommitIndex {
		t.Fatalf("validator %d's oldest TAR file %+v does not start at GC run %d's first segment (index %d)", n.id, tars.Tars[:min(1, len(tars.Tars))], prev.Run, prev.CommitIndex)
	}
	for _, f := range tars.Tars {
		if f.Generation != prev.Generation && f.Generation != last.Generation {
			t.Fatalf("validator %d still lists %s of generation %d after GC run %d", n.id, f.Name, f.Generation, last.Run)
		}
		if letter := string(rune('a' + f.Generation)); !strings.HasSuffix(f.Name, letter+".tar") {
			t.Fatalf("validator %d's TAR file %s of generation %d is not named with the letter %s", n.id, f.Name, f.Generation, letter)
		}
		if !f.ChainOK {
			t.Fatalf("validator %d's TAR file %s does not chain: %+v", n.id, f.Name, f)
		}
	}
	for _, r := range runs[1:] {
		if r.SegmentsReclaimed == 0 || r.ReclaimedBytes == 0 || r.KeptFromGeneration != r.Generation-1 {
			t.Fatalf("GC run %d reclaimed %d segments, %d bytes, kept from generation %d: its cleanup dropped nothing", r.Run, r.SegmentsReclaimed, r.ReclaimedBytes, r.KeptFromGeneration)
		}
	}
}

// gcLoad is a steady load of writes of new paths, overwrites and deletes
// (about 70/20/10) by a few wallets, each working through its own paths in
// order, so the last outcome of every path is known.
type gcLoad struct {
	c    *cluster
	cfg  api.BlockchainConfig
	stop chan struct{}
	wg   sync.WaitGroup

	mu        sync.Mutex
	committed int
	want      map[string]string // full path: the value last written, "" once deleted
	problems  []string
}

// startGCLoad starts workers writing through the nodes given, in turn.
func startGCLoad(t *testing.T, c *cluster, workers int, through []*node) *gcLoad {
	t.Helper()
	cfg, err := c.client(through[0]).BlockchainConfig(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	l := &gcLoad{c: c, cfg: cfg, stop: make(chan struct{}), want: map[string]string{}}
	for w := range workers {
		key, _ := crypto.GenerateKey()
		client := c.client(through[w%len(through)])
		l.wg.Go(func() { l.run(w, key, client) })
	}
	return l
}

func (l *gcLoad) run(worker int, key *ecdsa.PrivateKey, client *ledgerclient.Client) {
	rng := mrand.New(mrand.NewPCG(uint64(worker), 19))
	var live []string // this worker's paths that exist, as sub paths
	next := 0
	for {
		select {
		case <-l.stop:
			return
		default:
		}
		var p *ledgerclient.Proposal
		value := ""
		switch r := rng.IntN(10); {
		case len(live) == 0 || r < 7:
			sub := fmt.Sprintf("gc/w%d/p%d", worker, next)
			next++
			value = randomValue(512)
			p = &ledgerclient.Proposal{Message: []byte(`{"v":"` + value + `"}`), ContentType: "page", Path: sub}
			live = append(live, sub)
		case r < 9:
			value = randomValue(512)
			p = &ledgerclient.Proposal{Message: []byte(`{"v":"` + value + `"}`), ContentType: "page", Path: live[rng.IntN(len(live))]}
		default:
			i := rng.IntN(len(live))
			p = &ledgerclient.Proposal{Action: proposal.Delete, ContentType: "page", Path: live[i]}
			live = slices.Delete(live, i, i+1)
		}
		path, err := l.commit(client, key, p)
		l.mu.Lock()
		if err != nil {
			l.problems = append(l.problems, fmt.Sprintf("worker %d: %s %s: %v", worker, p.Action, p.Path, err))
			l.mu.Unlock()
			return
		}
		l.committed++
		l.want[path] = value
		l.mu.Unlock()
	}
}

// commit submits p and waits for it to commit; it returns p's full path.
func (l *gcLoad) commit(client *ledgerclient.Client, key *ecdsa.PrivateKey, p *ledgerclient.Proposal) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	action := p.Action
	if action == "" {
		action = proposal.Write
	}
	form, path, err := ledgerclient.Form(l.cfg, key, p, common.Hash{})
	if err != nil {
		return "", err
	}
	if _, err := client.Submit(ctx, action, form); err != nil {
		return "", fmt.Errorf("submit: %w", err)
	}
	s, err := client.WaitFinal(ctx, p.ID, nil)
	if err != nil || !api.Committed(s.Status) {
		return "", fmt.Errorf("proposal %s: %s %v", p.ID, s.Status, err)
	}
	return path, nil
}

// committedCount is how many operations have committed so far; it fails
// the test at once if one did not.
func (l *gcLoad) committedCount(t *testing.T) int {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.problems) > 0 {
		t.Fatalf("a write failed under GC: %s", strings.Join(l.problems, "; "))
	}
	return l.committed
}

// waitCommitted waits until at least n operations have committed.
func (l *gcLoad) waitCommitted(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for l.committedCount(t) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d operations committed within 30s, want %d", l.committedCount(t), n)
		}
		time.Sleep(20 * time.Millisecond) // polling the load
	}
}

// finish stops the load, waits for the operations in flight and returns
// what every path must read.
func (l *gcLoad) finish(t *testing.T) map[string]string {
	t.Helper()
	close(l.stop)
	l.wg.Wait()
	l.committedCount(t)
	return l.want
}

func randomValue(n int) string {
	raw := make([]byte, n/2)
	_, _ = rand.Read(raw)
	return hex.EncodeToString(raw)
}

// checkContent reads every path on every node: a path last written holds
// its last value (property v), a deleted one is absent.
func checkContent(t *testing.T, want map[string]string, nodes ...*node) {
	t.Helper()
	for _, n := range nodes {
		for path, value := range want {
			got, found, err := readValue(n, path)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case value == "" && found:
				t.Fatalf("validator %d still serves %s, deleted", n.id, path)
			case value != "" && !found:
				t.Fatalf("validator %d lost %s", n.id, path)
			case got != value:
				t.Fatalf("validator %d's %s is not the value last written", n.id, path)
			}
		}
	}
}

// readValue reads the string property v of the node at path on n.
func readValue(n *node, path string) (value string, found bool, err error) {
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(n.url() + "/api/explore?path=" + url.QueryEscape(path))
	if err != nil {
		return "", false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		var body apierror.Body
		if json.NewDecoder(resp.Body).Decode(&body) == nil && body.Error != nil && body.Error.Code == apierror.NotFound {
			return "", false, nil
		}
		return "", false, fmt.Errorf("explore %s on validator %d: 404 without not_found", path, n.id)
	}
	if resp.StatusCode != http.StatusOK {
		return "", false, fmt.Errorf("explore %s on validator %d: %s", path, n.id, resp.Status)
	}
	var node api.Node
	if err := json.NewDecoder(resp.Body).Decode(&node); err != nil {
		return "", false, err
	}
	if err := json.Unmarshal(node.Properties["v"], &value); err != nil {
		return "", true, fmt.Errorf("validator %d's %s: property v: %v", n.id, path, err)
	}
	return value, true, nil
}

// TestGCUnderWriteLoad runs three GC runs while wallets keep writing,
// overwriting and deleting through all three validators. It proves that a
// COMPACT commits and applies beside writes (none fails, and writes commit
// between the runs), that every validator records each run alike, with
// the same state hash, that cleanup drops generation N-2 (only the last two
// generations are listed, down to the TAR files), and that compaction keeps
// the live content as it was: every path reads its last value, and no
// deleted path comes back. The segment archives stay byte-identical across
// validators and verify as one chain across the compactions.
func TestGCUnderWriteLoad(t *testing.T) {
	c := newCluster(t, 3, "MOCK", gcEnv()...)
	leader := c.waitLeaderKnown(c.nodes)
	load := startGCLoad(t, c, 4, c.nodes)

	var runs []api.GcRun
	for run := uint64(1); run <= 3; run++ {
		// Writes before each run: garbage for it, and proof that writes
		// commit after the previous one.
		load.waitCommitted(t, load.committedCount(t)+20)
		r := c.compactOnce(leader, run)
		c.sameRun(r, c.nodes...)
		runs = append(runs, r)
		t.Logf("GC run %d at index %d (epoch %d) to %d in %d steps: generation %d, %d live nodes in %d segments (%d bytes), %d written meanwhile, reclaimed %d segments (%d bytes); %d operations so far",
			r.Run, r.CommitIndex, r.Epoch, r.EndIndex, r.Steps, r.Generation, r.LiveNodes, r.SegmentsWritten, r.BytesWritten, r.NodesCurrent,
			r.SegmentsReclaimed, r.ReclaimedBytes, load.committedCount(t))
		// In steps, with other entries (the load's writes) applied between
		// them: writes flow while a run goes on.
		if r.State != api.GcRunDone || r.Steps < 2 || r.EndIndex-r.CommitIndex <= r.Steps {
			t.Fatalf("GC run %d: %s in %d steps from index %d to %d: not in steps with writes between", r.Run, r.State, r.Steps, r.CommitIndex, r.EndIndex)
		}
	}
	load.waitCommitted(t, load.committedCount(t)+10)
	want := load.finish(t)
	c.converged(c.nodes...)

	for _, n := range c.nodes {
		proposals := compactionProposals(t, n)
		if len(proposals) != len(runs) {
			t.Fatalf("validator %d lists %d compaction proposals, want %d: %+v", n.id, len(proposals), len(runs), proposals)
		}
		for i, p := range proposals {
			if p.State != "applied" || p.CommitIndex != runs[i].CommitIndex || p.Epoch != runs[i].Epoch || p.Generation != runs[i].Generation {
				t.Fatalf("validator %d lists compaction proposal %+v for GC run %+v", n.id, p, runs[i])
			}
		}
		checkRetained(t, n, runs)
	}
	c.sameArchives(c.nodes...)
	deleted := 0
	for _, v := range want {
		if v == "" {
			deleted++
		}
	}
	if deleted == 0 || deleted == len(want) {
		t.Fatalf("the load left %d of %d paths deleted: not a mix to check", deleted, len(want))
	}
	checkContent(t, want, c.nodes...)
	t.Logf("%d operations committed; %d paths checked on every validator, %d of them deleted", load.committedCount(t), len(want), deleted)
}

// buildLedgerctl builds tools/ledgerctl into a temporary directory.
func buildLedgerctl(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "ledgerctl")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/contentledger/contentledger/tools/ledgerctl").CombinedOutput()
	if err != nil {
		t.Fatalf("building ledgerctl: %v\n%s", err, out)
	}
	return bin
}

// ledgerctl runs the built binary and returns its output; it fails the
// test if the command fails.
func ledgerctl(t *testing.T, bin string, args ...string) string {
	t.Helper()
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("ledgerctl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// fetchAndVerify downloads every TAR file of n with ledgerctl segments
// fetch into a new directory, then checks them offline with ledgerctl
// segments verify, in the listing's (chain) order, as one chain. It checks
// that the chain starts from anchor (the hash its first segment names),
// that verify reports the compactions at compactedAt (the raft indexes of
// the runs that started a generation after the first one held) and ends
// at the head n lists, and that the files in the wrong order do not verify.
func fetchAndVerify(t *testing.T, bin string, n *node, anchor string, compactedAt ...uint64) api.SegmentTars {
	t.Helper()
	var tars api.SegmentTars
	if err := get(n.url()+"/api/segments/tars", &tars); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	fetched := ledgerctl(t, bin, "segments", "fetch", "--validator", n.url(), "--dir", dir)
	var files []string
	for _, f := range tars.Tars {
		files = append(files, filepath.Join(dir, f.Name))
		if _, err := os.Stat(files[len(files)-1]); err != nil {
			t.Fatalf("ledgerctl segments fetch did not write %s: %v\n%s", f.Name, err, fetched)
		}
	}
	verified := ledgerctl(t, bin, append([]string{"segments", "verify"}, files...)...)
	if firstLine, _, _ := strings.Cut(verified, "\n"); !strings.Contains(firstLine, "chains from "+anchor+" ") {
		t.Fatalf("ledgerctl segments verify does not start the chain from %s:\n%s", anchor, verified)
	}
	for _, index := range compactedAt {
		if !strings.Contains(verified, fmt.Sprintf("a compaction starts the next generation at segment %d\n", index)) {
			t.Fatalf("ledgerctl segments verify does not report the compaction at index %d:\n%s", index, verified)
		}
	}
	if got := strings.Count(verified, "a compaction starts"); got != len(compactedAt) {
		t.Fatalf("ledgerctl segments verify reports %d compactions, want %d:\n%s", got, len(compactedAt), verified)
	}
	head := tars.Tars[len(tars.Tars)-1]
	if want := fmt.Sprintf("ok: %d archives chain to segment %d, hash %s\n", len(files), head.LastIndex, head.HeadHash); len(files) < 2 || !strings.HasSuffix(verified, want) {
		t.Fatalf("ledgerctl segments verify does not end with %q:\n%s", want, verified)
	}
	reversed := slices.Clone(files)
	slices.Reverse(reversed)
	if out, err := exec.Command(bin, append([]string{"segments", "verify"}, reversed...)...).CombinedOutput(); err == nil {
		t.Fatalf("ledgerctl segments verify accepts the archives in reverse order:\n%s", out)
	}
	t.Logf("ledgerctl segments verify:\n%s", verified)
	return tars
}

// TestSegmentsVerifyAcrossCompaction downloads a validator's TAR files
// with ledgerctl after one compaction and again after a second, whose
// cleanup dropped generation 0. It proves that the segment chain stays one
// verifiable chain across a compaction (the new generation's first segment
// names the old head), that verify says where each compaction happened,
// and that after cleanup the files left still verify as one chain from
// the first segment kept, the first of a compaction, anchored at the head
// of the generation dropped (which the run records).
func TestSegmentsVerifyAcrossCompaction(t *testing.T) {
	bin := buildLedgerctl(t)
	c := newCluster(t, 1, "MOCK", gcEnv()...)
	v := c.waitLeader()
	client := c.client(v)
	writeRandom(t, client, 8, 4<<10)
	first := c.compactOnce(v, 1)
	writeRandom(t, client, 8, 4<<10)
	genesis := "0x" + strings.Repeat("0", 64)
	tars := fetchAndVerify(t, bin, v, genesis, first.CommitIndex)
	if tars.Tars[0].Generation != 0 || tars.Tars[0].FirstIndex > first.CommitIndex {
		t.Fatalf("before cleanup the TAR files start at %+v, not with generation 0", tars.Tars[0])
	}

	second := c.compactOnce(v, 2)
	writeRandom(t, client, 8, 4<<10)
	// The oldest segment kept is the first run's first: it names the head
	// of generation 0, which cleanup dropped and the run recorded.
	tars = fetchAndVerify(t, bin, v, first.OldHead, second.CommitIndex)
	if tars.Tars[0].Generation != 1 || tars.Tars[0].FirstIndex != first.CommitIndex {
		t.Fatalf("after the second run the TAR files start at %+v, not at the first run's segments (index %d)", tars.Tars[0], first.CommitIndex)
	}
}

// appliedIndex is n's applied index.
func appliedIndex(t testing.TB, n *node) uint64 {
	t.Helper()
	st, err := consensusStatus(n)
	if err != nil {
		t.Fatal(err)
	}
	return st.AppliedIndex
}

// TestFollowerDownAcrossTwoCompactions stops a follower, runs two
// compactions while the others keep taking writes and truncate their raft
// log (a snapshot every 50 entries), and restarts it. It proves that a
// validator that missed two compactions, the second of which dropped the
// generation it last held, catches up through a snapshot that carries the
// generations left, and ends with the others' applied index, state hash,
// runs, generations, segment archives and content.
func TestFollowerDownAcrossTwoCompactions(t *testing.T) {
	const snapshotEntries = 50
	c := newCluster(t, 3, "MOCK", gcEnv("SVC_VALIDATOR_SNAPSHOT_ENTRIES="+strconv.Itoa(snapshotEntries), "SVC_VALIDATOR_COMPACTION_MARGIN=5")...)
	leader := c.waitLeader()
	down := c.others(leader)[0]
	running := slices.DeleteFunc(slices.Clone(c.nodes), func(n *node) bool { return n == down })
	load := startGCLoad(t, c, 2, []*node{leader})
	load.waitCommitted(t, 20)
	c.kill(down)
	left := appliedIndex(t, leader)

	var runs []api.GcRun
	for run := uint64(1); run <= 2; run++ {
		load.waitCommitted(t, load.committedCount(t)+20)
		r := c.compactOnce(leader, run)
		c.sameRun(r, running...)
		runs = append(runs, r)
	}
	// Far enough past the stopped follower that the leader's log no longer
	// holds what it misses.
	deadline := time.Now().Add(30 * time.Second)
	for appliedIndex(t, leader) < left+3*snapshotEntries {
		if time.Now().After(deadline) {
			t.Fatalf("the leader applied %d entries since the follower stopped at %d, want %d", appliedIndex(t, leader)-left, left, 3*snapshotEntries)
		}
		time.Sleep(20 * time.Millisecond) // polling the leader
	}
	want := load.finish(t)

	c.start(down)
	index, hash := c.converged(c.nodes...)
	if sent := snapshotsSentTo(t, running, down.id); sent == 0 {
		t.Fatal("no validator sent the restarted follower a snapshot")
	}
	if len(logRecords(t, down, "caught up through a snapshot")) == 0 {
		t.Fatal("the restarted follower's log records no snapshot installed")
	}
	c.sameRun(runs[1], down)
	if proposals := compactionProposals(t, down); len(proposals) != 2 || proposals[0].CommitIndex != runs[0].CommitIndex || proposals[1].CommitIndex != runs[1].CommitIndex {
		t.Fatalf("the restarted follower lists compaction proposals %+v, want the runs at %d and %d", proposals, runs[0].CommitIndex, runs[1].CommitIndex)
	}
	checkRetained(t, down, runs)
	c.sameArchives(c.nodes...)
	checkContent(t, want, down)
	t.Logf("the follower stopped at index %d and caught up through a snapshot to index %d, state hash %s, across GC runs at %d and %d",
		left, index, hash, runs[0].CommitIndex, runs[1].CommitIndex)
}

// killDuringApply advances leader's epoch and kills victim with SIGKILL
// once it has received the entries the advance brings and has not applied
// them for a while: a long apply, a compaction step's. If victim applies GC
// run number run to its end first, it is killed then (the kill missed). It
// returns the last status seen before the kill.
func (c *cluster) killDuringApply(leader, victim *node, run uint64) api.ConsensusStatus {
	c.t.Helper()
	const stalled = 10 * time.Millisecond
	before := appliedIndex(c.t, victim)
	c.advanceEpoch(leader)
	var seen api.ConsensusStatus
	var applied api.GcRun // the leader's last run, read now and then
	since, asked := time.Now(), time.Time{}
	deadline := since.Add(gcRunDeadline)
	for time.Now().Before(deadline) {
		st, err := consensusStatus(victim)
		if err != nil {
			c.t.Fatal(err)
		}
		if st.AppliedIndex != seen.AppliedIndex {
			since = time.Now()
		}
		seen = st
		if st.AppliedIndex > before && st.CommitIndex > st.AppliedIndex && time.Since(since) >= stalled {
			break
		}
		if applied.Run < run && time.Since(asked) > 50*time.Millisecond {
			if applied, err = lastRun(leader); err != nil {
				c.t.Fatal(err)
			}
			asked = time.Now()
		}
		if applied.Run > run || applied.Run == run && applied.State != api.GcRunRunning && st.AppliedIndex >= applied.EndIndex {
			break // missed: the victim applied the whole run between two looks
		}
		time.Sleep(time.Millisecond) // polling the victim closely: the window is one apply
	}
	c.kill(victim)
	return seen
}

// TestKill9DuringCompaction kills a follower with SIGKILL while it applies
// a compaction of about 12 MiB of live content (rewritten into a new
// generation in steps of 4 MiB), restarts it, and repeats for two more
// runs. It proves that a validator dying in the middle of a run restarts
// from what it had made durable, applies the rest of the run, and
// converges: the others' applied index and state hash, the run recorded
// alike, the same segment archives. At least one kill must land while the
// victim had committed an entry of the run it had not applied yet, or the
// test proves nothing and fails.
func TestKill9DuringCompaction(t *testing.T) {
	c := newCluster(t, 3, "MOCK", gcEnv("SVC_VALIDATOR_GC_STEP_BYTES="+strconv.Itoa(4<<20))...)
	leader := c.waitLeader()
	victim := c.others(leader)[0]
	client := c.client(leader)
	writeRandom(t, client, 48, 256<<10)
	c.waitRun(leader, 1) // due at once: these writes are garbage enough
	c.converged(c.nodes...)

	landed := 0
	for run := uint64(2); run <= 4; run++ {
		writeRandom(t, client, 4, 8<<10) // garbage for the run
		seen := c.killDuringApply(leader, victim, run)
		r := c.waitRun(leader, run)
		mid := seen.AppliedIndex < r.EndIndex && seen.CommitIndex >= r.CommitIndex && seen.CommitIndex > seen.AppliedIndex
		if mid {
			landed++
		}
		c.start(victim)
		index, hash := c.converged(c.nodes...)
		c.sameRun(r, c.nodes...)
		t.Logf("GC run %d from index %d to %d in %d steps (%d bytes written): killed at applied %d, commit %d (mid-compaction: %t); converged at %d, %s",
			r.Run, r.CommitIndex, r.EndIndex, r.Steps, r.BytesWritten, seen.AppliedIndex, seen.CommitIndex, mid, index, hash)
	}
	if landed == 0 {
		t.Fatal("no kill landed while the victim had an entry of the run committed and not applied")
	}
	c.sameArchives(c.nodes...)
}

// TestCompactionGivesUpCleanly runs a cluster whose leader may hold writes
// for no time at all (SVC_VALIDATOR_GC_FORCE_TIMEOUT=1ns): every step
// overruns it, so with retryCount 2 the leader gives each run up after two
// steps. It proves that a run that cannot finish ends cleanly: every
// validator records it abandoned alike with the reason, /gc.log says why,
// the event stream carries consensus compact_abandoned with the reason,
// writes go on, and the next run's cleanup keeps the incomplete
// generation's predecessor (here nothing is complete, so nothing is
// dropped).
func TestCompactionGivesUpCleanly(t *testing.T) {
	// A run starts once 256 KiB were written: enough live content for
	// more than two steps.
	c := newCluster(t, 3, "MOCK", gcEnv("SVC_VALIDATOR_GC_FORCE_TIMEOUT=1ns", "SVC_VALIDATOR_GC_RETRY_COUNT=2",
		"SVC_VALIDATOR_GC_SIZE_DELTA="+strconv.Itoa(256<<10))...)
	leader := c.waitLeader()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var events streamLog
	go func() { _ = follow(ctx, leader.url(), "", &events) }()
	client := c.client(leader)
	writeRandom(t, client, 40, 8<<10) // garbage enough for run 1
	r := c.waitRun(leader, 1)
	c.sameRun(r, c.nodes...)
	if r.State != api.GcRunAbandoned || r.Steps != 2 || !strings.Contains(r.Abandoned, "2 compaction cycles failed in a row (retryCount 2)") ||
		!strings.Contains(r.Abandoned, "longer than forceTimeout 1ns") || r.EndAt == nil || r.StateHash == "" {
		t.Fatalf("GC run 1: %+v", r)
	}

	resp, err := http.Get(leader.url() + "/gc.log")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "GC run 1 (epoch ") ||
		!strings.Contains(string(body), "gave up: "+r.Abandoned+"; generation 1 is incomplete") {
		t.Fatalf("/gc.log: %d %v\n%s", resp.StatusCode, err, body)
	}

	deadline := time.Now().Add(10 * time.Second)
	for {
		evs, problems := events.snapshot()
		if len(problems) > 0 {
			t.Fatalf("event stream: %v", problems)
		}
		i := slices.IndexFunc(evs, func(ev api.Event) bool {
			return ev.Type == api.EventConsensus && ev.Action == "compact_abandoned" && ev.Reason == r.Abandoned && ev.Epoch == r.Epoch
		})
		if i >= 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no consensus compact_abandoned event for run 1 among %d events", len(evs))
		}
		time.Sleep(20 * time.Millisecond) // polling the stream's log
	}

	// Writes go on, and the next run, also given up, drops nothing: no
	// generation is complete.
	writeRandom(t, client, 40, 8<<10)
	r2 := c.compactOnce(leader, 2)
	c.sameRun(r2, c.nodes...)
	if r2.State != api.GcRunAbandoned || r2.SegmentsReclaimed != 0 || r2.KeptFromGeneration != 0 || r2.Generation != 2 {
		t.Fatalf("GC run 2: %+v", r2)
	}
	if st, err := gcStatus(leader); err != nil || !slices.Equal(st.Generations.Present, []uint32{0, 1, 2}) {
		t.Fatalf("generations after two runs given up: %+v %v", st.Generations, err)
	}
	c.converged(c.nodes...)
}
