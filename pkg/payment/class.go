// Package payment holds the payment classes of the payment contract, with
// both price columns, the contract's ProposalPaid and DebtPaid events, the
// rule that decides whether an observed payment pays for a proposal
// (ADR 0007), and the one that decides whether a DebtPaid log pays a
// wallet's GC debt, and how much (ADR 0011).
//
// Prices here must equal the contract's constants; a test in tools/contracts
// reads them from the deployed contract and compares.
package payment

import (
	"fmt"
	"math/big"
	"strings"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
)

// Class is a payment class. Its numeric value is the contract's Tier enum.
type Class uint8

const (
	Standard Class = iota
	Express
	Priority
)

// Classes lists every class in contract order.
var Classes = [...]Class{Standard, Express, Priority}

// Token is the currency of a payment, numbered as the contract's enum.
type Token uint8

const (
	ETH Token = iota
	USDC
)

// Tokens lists every token in contract order.
var Tokens = [...]Token{ETH, USDC}

// String returns the token's symbol.
func (t Token) String() string {
	switch t {
	case ETH:
		return "ETH"
	case USDC:
		return "USDC"
	}
	return fmt.Sprintf("Token(%d)", uint8(t))
}

// Valid reports whether t is a token of the contract.
func (t Token) Valid() bool { return t <= USDC }

// Decimals is the number of decimals of the token's smallest unit.
func (t Token) Decimals() int {
	if t == USDC {
		return 6
	}
	return 18
}

var (
	// Class prices in wei and in USDC's 6-decimal unit, in contract order.
	weiPrices  = [...]int64{1_000_000_000_000_000, 2_000_000_000_000_000, 10_000_000_000_000_000}
	usdcPrices = [...]int64{3_250_000, 6_500_000, 32_500_000}
)

// Price returns the class's price in the token's smallest unit (wei for ETH,
// micro-USDC for USDC). It returns a fresh value the caller may modify.
func (c Class) Price(t Token) *big.Int {
	if !c.Valid() || !t.Valid() {
		return nil
	}
	if t == USDC {
		return big.NewInt(usdcPrices[c])
	}
	return big.NewInt(weiPrices[c])
}

// Name is the lowercase class name used in forms, signatures and JSON.
func (c Class) Name() string {
	switch c {
	case Standard:
		return "standard"
	case Express:
		return "express"
	case Priority:
		return "priority"
	}
	return fmt.Sprintf("class(%d)", uint8(c))
}

// String returns the uppercase class name of the contract page.
func (c Class) String() string { return strings.ToUpper(c.Name()) }

// Valid reports whether c is a class of the contract.
func (c Class) Valid() bool { return c <= Priority }

// Proto converts the class to its wire enum.
func (c Class) Proto() ledgerpb.Tier { return ledgerpb.Tier(c) }

// ClassFromProto converts a wire enum to a class.
func ClassFromProto(t ledgerpb.Tier) Class { return Class(t) }

// ParseClass accepts a class name in any letter case ("express", "EXPRESS").
func ParseClass(s string) (Class, error) {
	for _, c := range Classes {
		if strings.EqualFold(s, c.Name()) {
			return c, nil
		}
	}
	return 0, fmt.Errorf("unknown payment class %q (want standard, express or priority)", s)
}

// FormatAmount renders an amount of the token's smallest unit as a decimal
// string in whole units, e.g. 3250000 USDC units -> "3.25".
func FormatAmount(amount *big.Int, t Token) string {
	if amount == nil {
		return "0"
	}
	r := new(big.Rat).SetFrac(amount, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(t.Decimals())), nil))
	s := r.FloatString(t.Decimals())
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}
