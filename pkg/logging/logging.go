// Package logging builds the services' loggers the same way in every
// service: zap's production logger (JSON to stderr, sampled), at the level
// the service's LOG_LEVEL setting names.
package logging

import (
	"fmt"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// DefaultLevel is the level of a service whose LOG_LEVEL is unset.
const DefaultLevel = "info"

// Levels are the values a LOG_LEVEL setting takes, most verbose first.
func Levels() []string { return []string{"debug", "info", "warn", "error"} }

// ParseLevel is the zap level that name (one of Levels) names; "" (a
// configuration built in code, leaving it out) is DefaultLevel. Any other
// value, zap's own panic and fatal levels included, is an error: a setting
// that would silence the warnings is refused rather than guessed at.
func ParseLevel(name string) (zapcore.Level, error) {
	switch name {
	case "debug":
		return zapcore.DebugLevel, nil
	case "info", "":
		return zapcore.InfoLevel, nil
	case "warn":
		return zapcore.WarnLevel, nil
	case "error":
		return zapcore.ErrorLevel, nil
	}
	return 0, fmt.Errorf("log level %q: want one of debug, info, warn, error", name)
}

// Config is zap's production configuration at the level name names.
func Config(name string) (zap.Config, error) {
	level, err := ParseLevel(name)
	if err != nil {
		return zap.Config{}, err
	}
	cfg := zap.NewProductionConfig()
	cfg.Level = zap.NewAtomicLevelAt(level)
	return cfg, nil
}

// New is the production logger at the level name names.
func New(name string) (*zap.Logger, error) {
	cfg, err := Config(name)
	if err != nil {
		return nil, err
	}
	return cfg.Build()
}
