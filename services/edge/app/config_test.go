package app

import (
	"context"
	"strings"
	"testing"

	"github.com/kelseyhightower/envconfig"
	"go.uber.org/zap"
)

// TestLogLevel: OPS_LOG_LEVEL is info unless set, and a value that is not
// one of the four levels refuses the configuration, naming the setting,
// before the edge listens.
func TestLogLevel(t *testing.T) {
	var cfg Config
	if err := envconfig.Process("OPS", &cfg); err != nil || cfg.LogLevel != "info" || cfg.Validate() != nil {
		t.Fatalf("unset: %q %v %v", cfg.LogLevel, err, cfg.Validate())
	}
	t.Setenv("OPS_LOG_LEVEL", "warn")
	if err := envconfig.Process("OPS", &cfg); err != nil || cfg.LogLevel != "warn" || cfg.Validate() != nil {
		t.Fatalf("warn: %q %v %v", cfg.LogLevel, err, cfg.Validate())
	}
	cfg.LogLevel = "loud"
	cfg.HTTPAddr = "127.0.0.1:0"
	for _, err := range []error{cfg.Validate(), Run(context.Background(), cfg, zap.NewNop(), nil)} {
		if err == nil || !strings.Contains(err.Error(), "OPS_LOG_LEVEL") || !strings.Contains(err.Error(), "want one of debug, info, warn, error") {
			t.Errorf("loud: %v", err)
		}
	}
}
