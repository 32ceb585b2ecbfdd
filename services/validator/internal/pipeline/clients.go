package pipeline

import (
	"context"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/pkg/signing"
	"github.com/contentledger/contentledger/services/validator/internal/state"
)

// Bindings reads the applied client bindings (state.Machine).
type Bindings interface {
	// ClientBinding is a client id's binding, nil when it is unbound.
	ClientBinding(clientID string) (*ledgerpb.ClientBinding, error)
	// WalletClients counts the client ids bound to a wallet, up to
	// state.MaxClientsPerWallet.
	WalletClients(wallet [20]byte) (int, error)
}

// Clients binds client ids to wallets through raft (docs/adr/0038): the
// wallet's signature is verified here, on the leader, and the binding is a
// route change that apply decides. It implements the API's Clients.
type Clients struct {
	p        *Pipeline
	bindings Bindings
}

// NewClients returns the client registrations of p, read from bindings.
func NewClients(p *Pipeline, bindings Bindings) *Clients {
	return &Clients{p: p, bindings: bindings}
}

// Binding is the registration of a client id; ok false when it is unbound.
func (c *Clients) Binding(clientID string) (reg api.ClientRegistration, ok bool, err error) {
	b, err := c.bindings.ClientBinding(clientID)
	if err != nil || b == nil {
		return api.ClientRegistration{}, false, err
	}
	return registration(b), true, nil
}

func registration(b *ledgerpb.ClientBinding) api.ClientRegistration {
	return api.ClientRegistration{
		ContractVersion: api.ClientRegistrationVersion, ClientID: b.GetClientId(),
		Wallet: strings.ToLower(common.BytesToAddress(b.GetWallet()).Hex()), Index: b.GetIndex(),
		RegisteredAt: time.UnixMilli(b.GetAtMs()).UTC(), Signature: hexutil.Encode(b.GetSignature()),
	}
}

// Register binds clientID to wallet, which signed sig over both
// (signing.ClientRegistration under the pipeline's domain), and returns the
// binding once applied. A binding to the same wallet answers it unchanged;
// one to another wallet fails client_bound_elsewhere, a wallet at the cap
// client_limit_reached, a signature not the wallet's invalid_signature:
// none of them proposes anything.
func (c *Clients) Register(ctx context.Context, clientID string, wallet common.Address, sig []byte) (api.ClientRegistration, error) {
	if err := c.p.signer.VerifyClientRegistration(signing.ClientRegistration{ClientID: clientID, Wallet: wallet}, sig); err != nil {
		return api.ClientRegistration{}, apierror.New(apierror.InvalidSignature, "%v", err)
	}
	decided := func() (*ledgerpb.ClientBinding, bool, error) {
		b, err := c.bindings.ClientBinding(clientID)
		if err != nil || b != nil {
			return b, true, err
		}
		n, err := c.bindings.WalletClients(wallet)
		return nil, n >= state.MaxClientsPerWallet, err
	}
	b, done, err := decided()
	if err != nil {
		return api.ClientRegistration{}, err
	}
	if !done {
		err := c.p.awaitRoute(ctx, "the client registration", "it may still be, read it and retry", routeChange{
			entry: &ledgerpb.Entry{Op: &ledgerpb.Entry_ClientRegister{ClientRegister: &ledgerpb.ClientRegister{
				ClientId: clientID, Wallet: wallet[:], Signature: sig, AtMs: c.p.cfg.Now().UnixMilli()}}},
			// Applied, or refused by apply: the id is bound (to anyone),
			// or the wallet reached the cap meanwhile.
			applied: func() (bool, error) { _, done, err := decided(); return done, err },
		})
		if err != nil {
			return api.ClientRegistration{}, err
		}
		if b, _, err = decided(); err != nil {
			return api.ClientRegistration{}, err
		}
	}
	switch {
	case b == nil:
		return api.ClientRegistration{}, apierror.New(apierror.ClientLimitReached,
			"wallet %s has bound %d client ids, as many as one wallet may", strings.ToLower(wallet.Hex()), state.MaxClientsPerWallet).
			WithDetail("limit", state.MaxClientsPerWallet)
	case common.BytesToAddress(b.GetWallet()) != wallet:
		other := strings.ToLower(common.BytesToAddress(b.GetWallet()).Hex())
		return api.ClientRegistration{}, apierror.New(apierror.ClientBoundElsewhere,
			"client id %q is bound to wallet %s", clientID, other).WithDetail("wallet", other)
	}
	return registration(b), nil
}
