package segments

import (
	"cmp"
	"slices"
	"strings"

	"github.com/ethereum/go-ethereum/common"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
)

// A wallet's fragmentation is the node bytes its segments wrote against
// the bytes of its nodes live now: dead bytes are written bytes no live
// node holds any more, which GC could reclaim. The figures come from the
// kept scan (live).

// Fragmentation sums every wallet's bytes written against its live bytes,
// with the first api.MaxFragmentationWallets wallets in address order.
func (c *Catalog) Fragmentation() (api.FragmentationMetrics, error) {
	s, err := c.live()
	if err != nil {
		return api.FragmentationMetrics{}, err
	}
	all := s.wallets()
	out := api.FragmentationMetrics{ContractVersion: api.FragmentationMetricsVersion, FragmentationComputed: s.computed(c.cfg.NodeID),
		Totals: api.FragmentationTotals{Wallets: len(all), TarFiles: len(s.tars)}}
	for _, f := range all {
		out.Totals.BytesWritten += f.BytesWritten
		out.Totals.LiveBytes += f.LiveBytes
		out.Totals.DeadBytes += f.DeadBytes
	}
	if out.Totals.BytesWritten > 0 {
		out.Totals.FragmentationScore = float64(out.Totals.DeadBytes) / float64(out.Totals.BytesWritten)
	}
	if len(all) > api.MaxFragmentationWallets {
		all, out.WalletsTruncated = all[:api.MaxFragmentationWallets], true
	}
	out.Wallets = all
	return out, nil
}

// WalletFragmentation is one wallet's figures; a wallet no segment wrote
// or deleted anything of is an apierror.NotFound.
func (c *Catalog) WalletFragmentation(wallet common.Address) (api.FragmentationWallet, error) {
	s, err := c.live()
	if err != nil {
		return api.FragmentationWallet{}, err
	}
	f, ok := s.fragmentation(wallet)
	if !ok {
		return api.FragmentationWallet{}, apierror.New(apierror.NotFound, "wallet %s has written nothing (as of applied index %d)",
			strings.ToLower(wallet.Hex()), s.applied)
	}
	return api.FragmentationWallet{ContractVersion: api.FragmentationWalletVersion,
		FragmentationComputed: s.computed(c.cfg.NodeID), WalletFragmentation: f}, nil
}

// TopFragmented is the limit (at least 1) most fragmented wallets: by
// fragmentation score, then dead bytes, highest first, then by address.
func (c *Catalog) TopFragmented(limit int) (api.FragmentationTop, error) {
	s, err := c.live()
	if err != nil {
		return api.FragmentationTop{}, err
	}
	all := s.wallets()
	slices.SortStableFunc(all, func(a, b api.WalletFragmentation) int {
		if c := cmp.Compare(b.FragmentationScore, a.FragmentationScore); c != 0 {
			return c
		}
		return cmp.Compare(b.DeadBytes, a.DeadBytes) // equal: address order, as wallets() gives them
	})
	return api.FragmentationTop{ContractVersion: api.FragmentationTopVersion,
		FragmentationComputed: s.computed(c.cfg.NodeID), Limit: limit, Wallets: all[:min(limit, len(all))]}, nil
}
