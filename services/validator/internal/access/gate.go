package access

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// DefaultFileCheck is how often a Gate looks whether its tokens file
// changed.
const DefaultFileCheck = 2 * time.Second

// Config configures a Gate.
type Config struct {
	// Static are the tokens given in the environment; they never change.
	Static Tokens
	// File, when set, is a tokens file (ParseFile) read at start and again
	// when it changes or Reload is called.
	File string
	// Check refuses a token that must not be used (StrongToken outside
	// MOCK mode, PrintableToken in it). Default PrintableToken.
	Check func(string) error
	// FileCheck is how often Run looks at the file. Default
	// DefaultFileCheck.
	FileCheck time.Duration
	// Logger receives reloads and refused files (never a token).
	Logger *zap.Logger
}

// ErrWouldOpen is wrapped by a reload refused because the new file would
// leave a guarded lane without any token: a truncated or half-written
// file must not open the operator lane to everyone.
var ErrWouldOpen = errors.New("access: the new tokens would open a guarded lane")

// Gate holds the tokens in force. Check is safe for concurrent use and
// takes no lock; Reload and Run replace the tokens as a whole.
type Gate struct {
	cfg     Config
	current atomic.Pointer[Tokens]
	// reloadMu serializes reloads; read is the file's content in force.
	reloadMu sync.Mutex
	read     []byte
}

// NewGate reads the tokens file, if any, and returns the gate. A file
// that cannot be read or parsed is an error: the validator refuses to start
// rather than run with fewer tokens than its operator meant.
func NewGate(cfg Config) (*Gate, error) {
	if cfg.Check == nil {
		cfg.Check = PrintableToken
	}
	if cfg.FileCheck <= 0 {
		cfg.FileCheck = DefaultFileCheck
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	g := &Gate{cfg: cfg}
	tokens := cfg.Static
	if cfg.File != "" {
		data, fromFile, err := g.readFile()
		if err != nil {
			return nil, err
		}
		tokens, g.read = tokens.Merge(fromFile), data
	}
	g.current.Store(&tokens)
	return g, nil
}

// readFile reads and parses the tokens file.
func (g *Gate) readFile() ([]byte, Tokens, error) {
	data, err := os.ReadFile(g.cfg.File)
	if err != nil {
		return nil, Tokens{}, fmt.Errorf("tokens file: %w", err)
	}
	t, err := ParseFile(data, g.cfg.Check)
	if err != nil {
		return nil, Tokens{}, fmt.Errorf("tokens file %s: %w", g.cfg.File, err)
	}
	return data, t, nil
}

// Tokens are the tokens in force.
func (g *Gate) Tokens() Tokens { return *g.current.Load() }

// Check decides what value is worth on lane with the tokens in force.
func (g *Gate) Check(lane Lane, value string) Decision { return g.Tokens().Check(lane, value) }

// Guarded reports whether lane needs a token.
func (g *Gate) Guarded(lane Lane) bool { return g.Tokens().Guarded(lane) }

// First returns a token of lane ("" when it is open), for the
// validator's calls to its peers.
func (g *Gate) First(lane Lane) string { return g.Tokens().First(lane) }

// Reload reads the tokens file again and puts its tokens in force. An
// unreadable or invalid file, or one that would open a lane that is
// guarded now, is refused: the tokens in force stay. Without a file it does
// nothing.
func (g *Gate) Reload() error {
	if g.cfg.File == "" {
		return nil
	}
	g.reloadMu.Lock()
	defer g.reloadMu.Unlock()
	data, fromFile, err := g.readFile()
	if err != nil {
		return err
	}
	if bytes.Equal(data, g.read) {
		return nil
	}
	next := g.cfg.Static.Merge(fromFile)
	now := g.Tokens()
	for _, l := range Lanes() {
		if now.Guarded(l) && !next.Guarded(l) {
			return fmt.Errorf("%w: the %s lane would have no token; the tokens in force stay", ErrWouldOpen, l)
		}
	}
	g.current.Store(&next)
	g.read = data
	g.cfg.Logger.Info("access tokens reloaded", zap.String("file", g.cfg.File), zap.Any("tokensByLane", next.count()))
	return nil
}

// Run reloads the tokens file when it changes, every FileCheck, and when
// a value arrives on reload (SIGHUP), until ctx ends. A refused reload is
// logged once; the tokens in force stay.
func (g *Gate) Run(ctx context.Context, reload <-chan os.Signal) {
	if g.cfg.File == "" {
		return
	}
	tick := time.NewTicker(g.cfg.FileCheck)
	defer tick.Stop()
	var refused string // logged once until it changes
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-reload:
		}
		err := g.Reload()
		switch {
		case err == nil:
			refused = ""
		case err.Error() != refused:
			refused = err.Error()
			g.cfg.Logger.Error("tokens file not reloaded", zap.Error(err))
		}
	}
}
