package app

import (
	"cmp"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/contentledger/contentledger/pkg/httpserver"
	"github.com/contentledger/contentledger/services/chain-watcher/internal/rpcpool"
)

// FuzzRPCURLs: any RPC_URL value splits into trimmed, non-empty items
// without commas, each accepted or refused without panicking, and an
// accepted one has a host to name it by.
func FuzzRPCURLs(f *testing.F) {
	f.Add("http://127.0.0.1:8545")
	f.Add(" https://a.example/v3/KEY , ,wss://b.example:8546?x=1")
	f.Add("http://[::1]:8545,ws://user:pw@h/p")
	f.Add("%zz,http://%41")
	f.Fuzz(func(t *testing.T, raw string) {
		c := Config{RPCURL: raw}
		for i, u := range c.RPCURLs() {
			if u == "" || strings.TrimSpace(u) != u || strings.Contains(u, ",") {
				t.Fatalf("item %q of %q", u, raw)
			}
			if checkRPCURL(u) == nil && !strings.Contains(rpcpool.Name(i, u), ":") {
				t.Fatalf("accepted %q has no host to name it by", u)
			}
		}
		_ = c.Validate()
	})
}

// loadWithContract is LoadConfig with the one required variable set.
func loadWithContract(t *testing.T) (Config, error) {
	t.Helper()
	t.Setenv("WATCHER_CONTRACT_ADDRESS", "0x5FbDB2315678afecb367f032d93F642f64180aa3")
	return LoadConfig()
}

// TestModePresets: each mode fills the settings the environment leaves
// unset; without a mode the values are MOCK's, the ones used before modes
// existed.
func TestModePresets(t *testing.T) {
	for mode, want := range map[string]Preset{
		"":        {Confirmations: 2, PollInterval: time.Second, ReorgDepth: 128},
		"MOCK":    {Confirmations: 2, PollInterval: time.Second, ReorgDepth: 128},
		"TESTNET": {Confirmations: 3, PollInterval: 12 * time.Second, ReorgDepth: 256},
		"MAINNET": {Confirmations: 12, PollInterval: 12 * time.Second, ReorgDepth: 256},
	} {
		t.Run("mode="+mode, func(t *testing.T) {
			if mode != "" {
				t.Setenv("WATCHER_MODE", mode)
			}
			t.Setenv("WATCHER_NATS_TOKEN", "nats-token") // required in MAINNET
			cfg, err := loadWithContract(t)
			if err != nil {
				t.Fatal(err)
			}
			got := Preset{Confirmations: cfg.Confirmations, PollInterval: cfg.PollInterval, ReorgDepth: cfg.ReorgDepth}
			if got != want {
				t.Errorf("got %+v, want %+v", got, want)
			}
			if wantMode := cmp.Or(Mode(mode), ModeMock); cfg.mode() != wantMode {
				t.Errorf("effective mode %q, want %q", cfg.mode(), wantMode)
			}
			// Settings outside the presets keep their one default.
			if cfg.Finalized || cfg.RPCTimeout != 30*time.Second || cfg.Replicas != 1 || cfg.EpochInterval != 12*time.Second {
				t.Errorf("a setting outside the presets moved: %+v", cfg)
			}
		})
	}
}

// TestExplicitSettingsBeatThePreset: a variable set in the environment is
// kept whatever the mode, a zero included, and under envconfig's bare
// name too; the settings left unset still come from the preset.
func TestExplicitSettingsBeatThePreset(t *testing.T) {
	t.Setenv("WATCHER_MODE", "MAINNET")
	t.Setenv("WATCHER_NATS_TOKEN", "nats-token") // required in MAINNET
	t.Setenv("WATCHER_CONFIRMATIONS", "0")
	t.Setenv("WATCHER_POLL_INTERVAL", "250ms")
	cfg, err := loadWithContract(t)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Confirmations != 0 || cfg.PollInterval != 250*time.Millisecond || cfg.ReorgDepth != 256 || cfg.Mode != ModeMainnet {
		t.Fatalf("got %+v", cfg)
	}

	t.Setenv("WATCHER_MODE", "TESTNET")
	t.Setenv("REORG_DEPTH", "64") // envconfig's fallback to the bare name
	if cfg, err = loadWithContract(t); err != nil || cfg.ReorgDepth != 64 || cfg.Confirmations != 0 {
		t.Fatalf("bare name: %+v, %v", cfg, err)
	}

	// Set but empty is the operator's value, which envconfig refuses,
	// rather than an unset one the preset would fill.
	t.Setenv("WATCHER_CONFIRMATIONS", "")
	if _, err := loadWithContract(t); err == nil {
		t.Fatal("an empty CONFIRMATIONS was taken")
	}
}

// TestBadModeRejected: only the three modes, spelt as the validators spell
// them, are accepted, by LoadConfig and by Validate.
func TestBadModeRejected(t *testing.T) {
	for _, bad := range []string{"mainnet", "PRODUCTION", " MOCK", "TESTNET,MAINNET"} {
		t.Setenv("WATCHER_MODE", bad)
		if _, err := loadWithContract(t); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "MODE") {
			t.Errorf("MODE %q: %v", bad, err)
		}
	}
	c := Config{Mode: "STAGING"}
	if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), `MODE "STAGING"`) {
		t.Errorf("Validate: %v", err)
	}
}

// TestLogLevel: LOG_LEVEL is info unless set, one of the four levels
// when set, and anything else refuses the configuration, naming it.
func TestLogLevel(t *testing.T) {
	cfg, err := loadWithContract(t)
	if err != nil || cfg.LogLevel != "info" {
		t.Fatalf("unset: %q %v", cfg.LogLevel, err)
	}
	t.Setenv("WATCHER_LOG_LEVEL", "debug")
	if cfg, err = loadWithContract(t); err != nil || cfg.LogLevel != "debug" {
		t.Fatalf("debug: %q %v", cfg.LogLevel, err)
	}
	for _, bad := range []string{"verbose", "DEBUG", "fatal"} {
		t.Setenv("WATCHER_LOG_LEVEL", bad)
		if _, err := loadWithContract(t); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "LOG_LEVEL") ||
			!strings.Contains(err.Error(), "want one of debug, info, warn, error") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

// TestPresetFieldsAreTheUndefaulted: the preset fills exactly the
// variables that have no default of their own (MODE and the required
// CONTRACT_ADDRESS apart), under their real names, and every mode has a
// preset.
func TestPresetFieldsAreTheUndefaulted(t *testing.T) {
	var undefaulted []string
	typ := reflect.TypeFor[Config]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		name := f.Tag.Get("envconfig")
		if name == "" || name == "MODE" || name == "CONTRACT_ADDRESS" {
			continue
		}
		if _, ok := reflect.TypeFor[httpserver.Config]().FieldByName(strings.TrimPrefix(f.Name, "HTTP")); ok {
			continue // zero takes pkg/httpserver's default
		}
		if _, ok := f.Tag.Lookup("default"); !ok {
			undefaulted = append(undefaulted, name)
		}
	}
	var filled []string
	var c Config
	c.applyPreset(Preset{}, func(name string) bool {
		filled = append(filled, name)
		return true
	})
	slices.Sort(undefaulted)
	slices.Sort(filled)
	if !slices.Equal(undefaulted, filled) {
		t.Fatalf("without a default %v, filled by the preset %v", undefaulted, filled)
	}
	for _, m := range []Mode{ModeMock, ModeTestnet, ModeMainnet} {
		if p, ok := PresetOf(m); !ok || p.PollInterval <= 0 || p.ReorgDepth == 0 || p.ReorgDepth > maxReorgDepth {
			t.Errorf("preset of %s: %+v, %v", m, p, ok)
		}
	}
}
