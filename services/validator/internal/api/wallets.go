package api

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/labstack/echo/v4"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/pkg/proposal"
)

// maxPageSize bounds pageSize on /v1/wallets/content.
const maxPageSize = 200

// parseWallet checks a wallet address given as field.
func parseWallet(raw, field string) (common.Address, error) {
	if len(raw) != 42 || !strings.HasPrefix(raw, "0x") || !common.IsHexAddress(raw) {
		return common.Address{}, apierror.Field(field, "must be 0x followed by 40 hex digits")
	}
	return common.HexToAddress(raw), nil
}

// intParam reads an optional integer query parameter within [lo, hi].
func intParam(c echo.Context, name string, def, lo, hi int) (int, error) {
	raw := c.QueryParam(name)
	if raw == "" {
		return def, nil
	}
	v, err := strconv.Atoi(raw)
	if err != nil || v < lo || v > hi {
		return 0, apierror.Field(name, "must be an integer from %d to %d", lo, hi)
	}
	return v, nil
}

func (s *Server) walletContent(c echo.Context) error {
	wallet, err := parseWallet(c.QueryParam("wallet"), "wallet")
	if err != nil {
		return err
	}
	page, err := intParam(c, "page", 0, 0, 1_000_000)
	if err != nil {
		return err
	}
	size, err := intParam(c, "pageSize", 50, 1, maxPageSize)
	if err != nil {
		return err
	}
	root := proposal.WalletRoot(s.cfg.Form.ContentRoot, wallet)
	items, more, err := s.walletItems(root, page*size, size)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, api.WalletContent{ContractVersion: api.WalletContentVersion, Wallet: strings.ToLower(wallet.Hex()),
		WalletPath: root, Page: page, PageSize: size, Items: items, HasMore: more})
}

func (s *Server) walletItems(root string, offset, limit int) ([]api.WalletItem, bool, error) {
	nodes, more, err := s.deps.Content.WalletNodes(root, offset, limit)
	if err != nil {
		return nil, false, err
	}
	items := make([]api.WalletItem, len(nodes))
	for i, n := range nodes {
		items[i] = api.WalletItem{Path: n.GetPath(), PrimaryType: n.GetPrimaryType(), Organization: n.GetOrganization(),
			ContentType: n.GetContentType(), ProposalID: common.BytesToHash(n.GetProposalId()).Hex(), Revision: n.GetRevision(),
			CommitIndex: n.GetCommitIndex(), UpdatedAt: msTime(n.GetUpdatedAtMs())}
	}
	return items, more, nil
}

func msTime(ms int64) *time.Time {
	if ms <= 0 {
		return nil
	}
	t := time.UnixMilli(ms).UTC()
	return &t
}

func (s *Server) walletStats(c echo.Context) error {
	wallet, err := parseWallet(c.QueryParam("wallet"), "wallet")
	if err != nil {
		return err
	}
	st, err := s.walletFigures(wallet)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, st)
}

func (s *Server) walletFigures(wallet common.Address) (api.WalletStats, error) {
	ws, err := s.deps.Content.WalletStats(wallet)
	if err != nil {
		return api.WalletStats{}, err
	}
	acc, err := s.deps.GC.Account(wallet)
	if err != nil {
		return api.WalletStats{}, err
	}
	return api.WalletStats{
		ContractVersion: api.WalletStatsVersion, Wallet: strings.ToLower(wallet.Hex()),
		WalletPath:   proposal.WalletRoot(s.cfg.Form.ContentRoot, wallet),
		ContentCount: ws.GetNodes(), TotalWrites: ws.GetWrites(), TotalDeletes: ws.GetDeletes(),
		LastWriteAt: msTime(ws.GetLastWriteAtMs()), LastWritePath: ws.GetLastWritePath(),
		GC: acc,
	}, nil
}

// explorerWallet serves /v1/explorer/wallets/{walletAddress}: a wallet the
// ledger knows nothing of is 404, as the contract lists for the route
// (walletKnown).
func (s *Server) explorerWallet(c echo.Context) error {
	wallet, err := parseWallet(c.Param("wallet"), "walletAddress")
	if err != nil {
		return err
	}
	st, err := s.walletFigures(wallet)
	if err != nil {
		return err
	}
	items, more, err := s.walletItems(st.WalletPath, 0, api.MaxExplorerContent)
	if err != nil {
		return err
	}
	known, err := s.walletKnown(wallet, st, len(items))
	if err != nil {
		return err
	}
	if !known {
		return apierror.New(apierror.NotFound, "wallet %s has no content and no GC account", st.Wallet)
	}
	st.ContractVersion = api.ExplorerWalletVersion
	return c.JSON(http.StatusOK, api.ExplorerWallet{WalletStats: st, Content: items, HasMore: more})
}

// walletKnown reports whether applied state holds anything of the wallet:
// a live node, a committed write or delete in its figures (every committed
// proposal of the wallet is one of those), or a stored GC account (debt
// from deletes, a payment or a limit set by the operator). A wallet whose
// proposals are all pending or rejected has nothing yet: applied state
// keeps no proposal by wallet, and a rejected one changed nothing.
func (s *Server) walletKnown(wallet common.Address, st api.WalletStats, items int) (bool, error) {
	if items > 0 || st.ContentCount > 0 || st.TotalWrites > 0 || st.TotalDeletes > 0 {
		return true, nil
	}
	acc, err := s.deps.Content.Account(wallet)
	return acc != nil, err
}
