// Package headreport carries followers' reports of their head to the leader
// (POST /v1/follower/head-update, docs/adr/0038): the Reporter a follower
// runs, the Book in which the leader keeps the newest report of each
// member, and the agreement of a report with the leader's segment chain.
// See DESIGN.md.
package headreport

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/contentledger/contentledger/pkg/api"
)

// Path is the route a follower reports to.
const Path = "/v1/follower/head-update"

// DefaultInterval is how often a follower reports its head.
const DefaultInterval = 5 * time.Second

// Chain is this node's applied state (state.Machine).
type Chain interface {
	AppliedIndex() uint64
	// SegmentHead is the newest segment at or below index: its raft index
	// and hash; ok false when none is held.
	SegmentHead(index uint64) (segIndex uint64, hash [32]byte, ok bool, err error)
}

// Cluster is this node's view of its cluster (consensus/cluster).
type Cluster interface {
	Status() api.ConsensusStatus
	Members() []api.Member
}

// HeadOf is chain's head at its applied index, as a follower reports it.
func HeadOf(nodeID uint64, chain Chain) (api.HeadUpdate, error) {
	applied := chain.AppliedIndex()
	out := api.HeadUpdate{NodeID: nodeID, AppliedIndex: applied}
	idx, hash, ok, err := chain.SegmentHead(applied)
	if err != nil || !ok {
		return out, err
	}
	out.SegmentIndex, out.SegmentHash = idx, "0x"+hex.EncodeToString(hash[:])
	return out, nil
}

// Agreement compares a follower's reported head with the chain of the
// leader: agrees when the leader's newest segment at or below the
// follower's applied index is the one the follower names, by index and
// hash; unknown when the leader has not applied that index yet or holds
// no segment at or below it while the follower names one (compaction may
// have dropped it); diverged otherwise.
func Agreement(r api.HeadUpdate, chain Chain) (string, error) {
	if r.AppliedIndex > chain.AppliedIndex() {
		return api.HeadUnknown, nil
	}
	idx, hash, ok, err := chain.SegmentHead(r.AppliedIndex)
	switch {
	case err != nil:
		return "", err
	case !ok && r.SegmentIndex == 0:
		return api.HeadAgrees, nil
	case !ok:
		return api.HeadUnknown, nil
	case idx == r.SegmentIndex && strings.EqualFold(r.SegmentHash, "0x"+hex.EncodeToString(hash[:])):
		return api.HeadAgrees, nil
	}
	return api.HeadDiverged, nil
}

// CheckUpdate checks a report's form: a node id, a segment index at or
// below the applied index, and a hash (0x and 64 hex digits) exactly when
// it names a segment. It names the field that is wrong.
func CheckUpdate(r api.HeadUpdate) (field string, err error) {
	switch {
	case r.NodeID == 0:
		return "nodeId", errors.New("is required: the reporting member's raft id")
	case r.SegmentIndex > r.AppliedIndex:
		return "segmentIndex", errors.New("must be at or below appliedIndex: the newest segment the follower applied")
	case r.SegmentIndex == 0 && r.SegmentHash != "":
		return "segmentHash", errors.New("must be empty when segmentIndex is 0 (no segment yet)")
	case r.SegmentIndex > 0:
		b, err := hex.DecodeString(strings.TrimPrefix(r.SegmentHash, "0x"))
		if err != nil || len(b) != 32 || !strings.HasPrefix(r.SegmentHash, "0x") {
			return "segmentHash", errors.New("must be 0x followed by 64 hex digits: the hash of the segment at segmentIndex")
		}
	}
	return "", nil
}

// Report is a report the leader holds, and when it arrived.
type Report struct {
	api.HeadUpdate
	At time.Time
}

// Book is the leader's newest report of each member. It holds at most one
// report per member: Put drops the reports of ids no longer members, so it
// is bounded by the membership. Safe for concurrent use.
type Book struct {
	mu      sync.Mutex
	reports map[uint64]Report
}

// NewBook returns an empty book.
func NewBook() *Book { return &Book{reports: map[uint64]Report{}} }

// Put keeps r as its member's newest report, received at, and forgets the
// reports of every id not in members. r's member must be in members.
func (b *Book) Put(r api.HeadUpdate, at time.Time, members []uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	keep := make(map[uint64]bool, len(members))
	for _, id := range members {
		keep[id] = true
	}
	for id := range b.reports {
		if !keep[id] {
			delete(b.reports, id)
		}
	}
	if keep[r.NodeID] {
		b.reports[r.NodeID] = Report{HeadUpdate: r, At: at}
	}
}

// Get is a member's newest report; ok false when none is held.
func (b *Book) Get(id uint64) (Report, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r, ok := b.reports[id]
	return r, ok
}

// Config is a follower's reporter.
type Config struct {
	// NodeID is this node's raft id.
	NodeID uint64
	// Interval is how often it reports; 0: DefaultInterval.
	Interval time.Duration
	// Token is the bearer token it presents (the operator lane's); ""
	// when the lane is open.
	Token func() string
	// Client sends the reports; nil: a client with a 5 s timeout.
	Client *http.Client
	Logger *zap.Logger
}

// Reporter sends this node's head to the leader while it follows one.
type Reporter struct {
	cfg     Config
	chain   Chain
	cluster Cluster
}

// NewReporter returns a reporter of chain's head to cluster's leader.
func NewReporter(cfg Config, chain Chain, cluster Cluster) *Reporter {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: 5 * time.Second}
	}
	if cfg.Token == nil {
		cfg.Token = func() string { return "" }
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	return &Reporter{cfg: cfg, chain: chain, cluster: cluster}
}

// Run reports every interval until ctx ends. A failed report is logged at
// debug level once per change of its error, and tried again at the next
// tick: the leader keeps the newest anyway.
func (r *Reporter) Run(ctx context.Context) {
	t := time.NewTicker(r.cfg.Interval)
	defer t.Stop()
	var last string
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := r.ReportOnce(ctx)
		if msg := fmt.Sprint(err); err != nil && msg != last && ctx.Err() == nil {
			r.cfg.Logger.Debug("reporting the head to the leader", zap.Error(err))
			last = msg
		} else if err == nil {
			last = ""
		}
	}
}

// errNotFollowing: this node leads, or knows no leader.
var errNotFollowing = errors.New("no other leader is known")

// ReportOnce sends this node's head to the leader now.
func (r *Reporter) ReportOnce(ctx context.Context) error {
	st := r.cluster.Status()
	if st.Leader == 0 || st.Leader == r.cfg.NodeID {
		return errNotFollowing
	}
	var target string
	for _, m := range r.cluster.Members() {
		if m.ID == st.Leader {
			target = strings.TrimSuffix(m.APIURL, "/") + Path
		}
	}
	if target == "" {
		return fmt.Errorf("the leader %d has no API URL in the address book", st.Leader)
	}
	head, err := HeadOf(r.cfg.NodeID, r.chain)
	if err != nil {
		return err
	}
	body, err := json.Marshal(head)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if tok := r.cfg.Token(); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := r.cfg.Client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("the leader %d answered %s: %s", st.Leader, resp.Status, bytes.TrimSpace(msg))
	}
	return nil
}
