package watch

import (
	"cmp"
	"errors"
	"slices"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
)

// FuzzChainOrder puts eth_getLogs answers in chain order as a provider
// could send them: any order, repeats, and, rarely, logs of two branches.
// Each 4 bytes of the input make one log: block (0-3), log index (0-3),
// block-hash variant and payload variant. chainOrder either refuses with
// ErrInconsistentChain, exactly when one block has two hashes or one
// position two different logs, or returns every position once, in
// ascending order, with the log the answer had there.
func FuzzChainOrder(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 0, 1, 0, 0, 1, 0, 0, 0})
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 1})
	f.Add([]byte{0, 0, 0, 0, 0, 1, 1, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		var logs []types.Log
		for ; len(in) >= 4; in = in[4:] {
			logs = append(logs, types.Log{
				BlockNumber: uint64(in[0] % 4), Index: uint(in[1] % 4),
				BlockHash: common.Hash{in[0] % 4, in[2] % 2}, Data: []byte{in[3] % 2},
			})
		}
		answer := slices.Clone(logs)
		hashes := map[uint64]common.Hash{}
		at := map[[2]uint64]types.Log{}
		consistent := true
		for _, l := range answer {
			if h, ok := hashes[l.BlockNumber]; ok && h != l.BlockHash {
				consistent = false
			}
			hashes[l.BlockNumber] = l.BlockHash
			pos := [2]uint64{l.BlockNumber, uint64(l.Index)}
			if prev, ok := at[pos]; ok && !sameLog(prev, l) {
				consistent = false
			}
			at[pos] = l
		}
		out, err := chainOrder(logs)
		if !consistent {
			if !errors.Is(err, ErrInconsistentChain) {
				t.Fatalf("answer %v: err %v, want ErrInconsistentChain", answer, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("answer %v: %v", answer, err)
		}
		if len(out) != len(at) {
			t.Fatalf("answer %v: %d logs out, want %d", answer, len(out), len(at))
		}
		for i, l := range out {
			if i > 0 && cmp.Or(cmp.Compare(out[i-1].BlockNumber, l.BlockNumber), cmp.Compare(out[i-1].Index, l.Index)) >= 0 {
				t.Fatalf("answer %v: out of order %v", answer, out)
			}
			if want := at[[2]uint64{l.BlockNumber, uint64(l.Index)}]; !sameLog(want, l) || want.BlockHash != l.BlockHash {
				t.Fatalf("answer %v: log %v, want %v", answer, l, want)
			}
		}
	})
}
