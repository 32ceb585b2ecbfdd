package app

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"

	"go.uber.org/zap"

	"github.com/contentledger/contentledger/pkg/lifecycle"
	"github.com/contentledger/contentledger/services/validator/internal/access"
)

// The access lanes of the HTTP API (internal/access, ADR 0024): which
// tokens open which lane, and the rules that keep a validator from running
// open on a network.

// tokenCheck is the rule a token must pass: any printable token in MOCK
// mode, a long one elsewhere.
func (c Config) tokenCheck() func(string) error {
	if c.Mode == Mock {
		return access.PrintableToken
	}
	return access.StrongToken
}

// staticTokens are the tokens the environment gives: AUTH_TOKEN for every
// lane, and each lane's list.
func (c Config) staticTokens() (access.Tokens, error) {
	check := c.tokenCheck()
	var out access.Tokens
	if c.AuthToken != "" {
		if err := check(c.AuthToken); err != nil {
			return access.Tokens{}, fmt.Errorf("SVC_VALIDATOR_AUTH_TOKEN %w", err)
		}
		out.AddAll(c.AuthToken)
	}
	for _, l := range []struct {
		lane access.Lane
		env  string
		list string
	}{
		{access.Submit, "SUBMIT_TOKENS", c.SubmitTokens},
		{access.OpsRead, "OPS_READ_TOKENS", c.OpsReadTokens},
		{access.Operator, "OPERATOR_TOKENS", c.OperatorTokens},
		{access.Mock, "MOCK_TOKENS", c.MockTokens},
	} {
		tokens, err := access.ParseList(l.lane, l.list, check)
		if err != nil {
			return access.Tokens{}, fmt.Errorf("SVC_VALIDATOR_%s: %w", l.env, err)
		}
		out = out.Merge(tokens)
	}
	return out, nil
}

// openLanes refuses what would leave a validator on a network open to
// anyone: outside MOCK mode, an operator lane without a token, and an
// ops-read lane without one on a listener that is not loopback (unless
// OPEN_OPS_READ allows it, which is logged loudly).
func (c Config) openLanes(tokens access.Tokens, log *zap.Logger) error {
	if c.Mode == Mock {
		return nil
	}
	if !tokens.Guarded(access.Operator) {
		return fmt.Errorf("the operator lane (membership, GC limits, manual pay) would be open to anyone in %s mode: "+
			"set SVC_VALIDATOR_OPERATOR_TOKENS, SVC_VALIDATOR_AUTH_TOKEN or SVC_VALIDATOR_TOKENS_FILE", c.Mode)
	}
	if tokens.Guarded(access.OpsRead) || loopback(c.HTTPAddr) {
		return nil
	}
	if !c.OpenOpsRead {
		return fmt.Errorf("the ops-read lane would be open to anyone on %s (not loopback) in %s mode: set SVC_VALIDATOR_OPS_READ_TOKENS "+
			"(or AUTH_TOKEN, TOKENS_FILE), bind SVC_VALIDATOR_HTTP_ADDR to loopback, or set SVC_VALIDATOR_OPEN_OPS_READ=true to allow it", c.Mode, c.HTTPAddr)
	}
	log.Warn("THE OPS-READ LANE IS OPEN: anyone who reaches " + c.HTTPAddr + " reads the cluster's state, metrics and configuration " +
		"(SVC_VALIDATOR_OPEN_OPS_READ=true)")
	return nil
}

// loopback reports whether addr (host:port) listens on loopback only.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// openAccess builds the access gate from the environment's tokens and the
// tokens file, refuses lanes that would be open, and keeps the file's
// tokens current: re-read when it changes and on SIGHUP.
func (v *validator) openAccess(g *lifecycle.Group) error {
	static, err := v.cfg.staticTokens()
	if err != nil {
		return err
	}
	gate, err := access.NewGate(access.Config{Static: static, File: v.cfg.TokensFile, Check: v.cfg.tokenCheck(),
		Logger: v.log.Named("access")})
	if err != nil {
		return fmt.Errorf("validator: %w", err)
	}
	if err := v.cfg.openLanes(gate.Tokens(), v.log); err != nil {
		return fmt.Errorf("validator: refusing to start: %w", err)
	}
	v.access = gate
	if v.cfg.TokensFile != "" {
		g.Loop("access tokens", func(ctx context.Context) {
			hup := make(chan os.Signal, 1)
			signal.Notify(hup, syscall.SIGHUP)
			defer signal.Stop(hup)
			gate.Run(ctx, hup)
		})
	}
	return nil
}
