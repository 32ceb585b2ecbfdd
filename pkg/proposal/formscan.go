package proposal

import (
	"strings"

	"github.com/ethereum/go-ethereum/common"
)

// ScanID finds the proposal id in an encoded form (the body of a proposal
// route) without decoding the form: the validator's intake uses it to
// refuse an unpaid submission while its payment hold is full before
// paying for the decoding and hashing of a message of up to a MiB
// (ADR 0030). ok is false unless the form holds exactly one proposalId
// field, its key and value written without escapes and the value a valid
// hash; the caller then parses the form as usual. When ok, the id is the
// one ParseWrite and ParseDelete would read from url.ParseQuery's result
// (FuzzScanID checks it against them).
func ScanID(body string) (id common.Hash, ok bool) {
	const key = FieldProposalID + "="
	found := false
	for rest := body; rest != ""; {
		pair, next, _ := strings.Cut(rest, "&")
		rest = next
		value, isID := strings.CutPrefix(pair, key)
		if !isID {
			continue
		}
		if found || strings.ContainsAny(value, "%+") {
			return common.Hash{}, false
		}
		if id, ok = ParseHash(value); !ok {
			return common.Hash{}, false
		}
		found = true
	}
	return id, found
}
