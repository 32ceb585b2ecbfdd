package segments

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/pkg/blob"
	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/pkg/proposal"
	"github.com/contentledger/contentledger/services/validator/internal/state"
)

// Validators keep the CIDs of binaries (the ledger:cid property), never the
// binaries: the statistics come from the kept scan of the live nodes, the
// reverse lookup from a scan of its own (a diagnostic read, not a hot
// path: it reads every live node).

// errStopScan ends a scan that has what it needs.
var errStopScan = errors.New("scan stopped")

// nodeCID returns the CID a node references, if any.
func nodeCID(n *ledgerpb.Node) (string, bool) {
	for _, p := range n.GetProperties() {
		if p.GetName() != proposal.CIDProperty {
			continue
		}
		var cid string
		if json.Unmarshal([]byte(p.GetValueJson()), &cid) == nil && cid != "" {
			return cid, true
		}
	}
	return "", false
}

// CIDStats counts the live nodes that reference a CID, and the CIDs, from
// the kept scan.
func (c *Catalog) CIDStats() (api.CIDStats, error) {
	s, err := c.live()
	if err != nil {
		return api.CIDStats{}, err
	}
	return api.CIDStats{NodeID: c.cfg.NodeID, AppliedIndex: s.applied, ComputedAt: s.at.UTC(),
		NodesWithCID: s.cids, DistinctCIDs: s.distinctCIDs, StoredBytes: s.cids * blob.MaxCIDBytes}, nil
}

// CIDReferences lists the live nodes that reference cid, at most
// api.MaxCIDReferences (Truncated says more do). None is an
// apierror.NotFound. The caller checks that cid is one
// (proposal.ValidateCID).
func (c *Catalog) CIDReferences(cid string) (api.CIDReverse, error) {
	view, err := c.machine.ReadView()
	if err != nil {
		return api.CIDReverse{}, err
	}
	defer view.Close()
	out := api.CIDReverse{CID: cid, AppliedIndex: view.AppliedIndex(), Nodes: []api.CIDReference{}}
	needle := []byte(cid)
	node := &ledgerpb.Node{}
	err = view.Nodes(func(value []byte) error {
		if !bytes.Contains(value, needle) { // most nodes: no decoding
			return nil
		}
		if err := proto.Unmarshal(value, node); err != nil {
			return fmt.Errorf("%w: a content node: %v", state.ErrCorruptState, err)
		}
		if got, ok := nodeCID(node); !ok || got != cid {
			return nil // the CID appears elsewhere in the node
		}
		if len(out.Nodes) == api.MaxCIDReferences {
			out.Truncated = true
			return errStopScan
		}
		ref := api.CIDReference{Path: node.GetPath(), ProposalID: "0x" + hex.EncodeToString(node.GetProposalId()), CommitIndex: node.GetCommitIndex()}
		if len(node.GetWallet()) == 20 {
			ref.Wallet = walletHex([20]byte(node.GetWallet()))
		}
		out.Nodes = append(out.Nodes, ref)
		return nil
	})
	if err != nil && !errors.Is(err, errStopScan) {
		return api.CIDReverse{}, err
	}
	if len(out.Nodes) == 0 {
		return api.CIDReverse{}, apierror.New(apierror.NotFound, "no live content references %s", cid)
	}
	return out, nil
}
