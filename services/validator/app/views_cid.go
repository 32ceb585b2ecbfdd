package app

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"
	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/pkg/proposal"
	"github.com/contentledger/contentledger/services/validator/internal/state"
)

// The CID routes of the local-diagnostic layer. Validators keep the CIDs
// of binaries (the ledger:cid property), never the binaries: the figures
// come from the live nodes, the statistics from the storage views' kept
// scan, the reverse lookup from a scan of its own (a diagnostic read, not a
// hot path: it reads every live node).

// errStopScan ends a scan that has what it needs.
var errStopScan = errors.New("scan stopped")

func (v *opsViews) registerCIDs(e *echo.Echo) {
	e.GET("/api/cid/stats", v.cidStats)
	e.GET("/api/cid/reverse/:cid", v.cidReverse)
}

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

func (v *opsViews) cidStats(c echo.Context) error {
	s, err := v.storage.live()
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, api.CIDStats{NodeID: v.cfg.NodeID, AppliedIndex: s.applied, ComputedAt: s.at.UTC(),
		NodesWithCID: s.cids, DistinctCIDs: s.distinctCIDs, StoredBytes: s.cids * proposal.CIDLength})
}

func (v *opsViews) cidReverse(c echo.Context) error {
	cid := c.Param("cid")
	if err := proposal.ValidateCID(cid); err != nil {
		return apierror.Field("cid", "%v", err)
	}
	view, err := v.machine.ReadView()
	if err != nil {
		return err
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
		return err
	}
	if len(out.Nodes) == 0 {
		return apierror.New(apierror.NotFound, "no live content references %s", cid)
	}
	return c.JSON(http.StatusOK, out)
}
