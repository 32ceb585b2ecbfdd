package logging

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLevelIsHonoured: a logger built at a level writes the lines at that
// level and above, and none below it.
func TestLevelIsHonoured(t *testing.T) {
	for _, c := range []struct {
		level      string
		want, drop []string
	}{
		{"debug", []string{"a debug line", "an info line", "a warning", "an error"}, nil},
		{"info", []string{"an info line", "a warning", "an error"}, []string{"a debug line"}},
		{"warn", []string{"a warning", "an error"}, []string{"a debug line", "an info line"}},
		{"error", []string{"an error"}, []string{"a debug line", "an info line", "a warning"}},
	} {
		cfg, err := Config(c.level)
		if err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(t.TempDir(), "log")
		cfg.OutputPaths = []string{out}
		log, err := cfg.Build()
		if err != nil {
			t.Fatal(err)
		}
		log.Debug("a debug line")
		log.Info("an info line")
		log.Warn("a warning")
		log.Error("an error")
		_ = log.Sync()
		raw, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range c.want {
			if !strings.Contains(string(raw), `"msg":"`+line+`"`) {
				t.Errorf("%s: %q missing from %s", c.level, line, raw)
			}
		}
		for _, line := range c.drop {
			if strings.Contains(string(raw), `"msg":"`+line+`"`) {
				t.Errorf("%s: %q written: %s", c.level, line, raw)
			}
		}
	}
}

func TestInvalidLevelsAreRefused(t *testing.T) {
	for _, name := range []string{" ", "INFO", "Debug", "warning", "fatal", "panic", "dpanic", "trace", "0"} {
		if _, err := ParseLevel(name); err == nil || !strings.Contains(err.Error(), "want one of debug, info, warn, error") {
			t.Errorf("%q: %v", name, err)
		}
		if _, err := New(name); err == nil {
			t.Errorf("New(%q) built a logger", name)
		}
	}
	for _, name := range Levels() {
		if _, err := ParseLevel(name); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	for _, name := range []string{DefaultLevel, ""} {
		if level, err := ParseLevel(name); err != nil || level.String() != DefaultLevel {
			t.Errorf("%q: %v %v", name, level, err)
		}
	}
}
