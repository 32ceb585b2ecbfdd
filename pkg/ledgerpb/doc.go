// Package ledgerpb holds the Go code generated from proto/contentledger/v1.
// Regenerate with `make generate`; do not edit ledger.pb.go by hand.
package ledgerpb
