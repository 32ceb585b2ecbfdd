package buildinfo

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestVersionOf(t *testing.T) {
	const revision = "0123456789abcdef0123456789abcdef01234567"
	vcs := func(modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: revision},
			{Key: "vcs.modified", Value: modified}}
	}
	for name, c := range map[string]struct {
		info debug.BuildInfo
		want string
	}{
		"module version":      {debug.BuildInfo{Main: debug.Module{Version: "v1.4.0"}, Settings: vcs("true")}, "v1.4.0"},
		"pseudo-version":      {debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20260301120000-0123456789ab"}}, "v0.0.0-20260301120000-0123456789ab"},
		"revision":            {debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs("false")}, "0123456789ab"},
		"modified work tree":  {debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs("true")}, "0123456789ab+dirty"},
		"short revision":      {debug.BuildInfo{Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc"}}}, "abc"},
		"no version, no VCS":  {debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, Devel},
		"nothing at all":      {debug.BuildInfo{}, Devel},
		"modified, no commit": {debug.BuildInfo{Settings: []debug.BuildSetting{{Key: "vcs.modified", Value: "true"}}}, Devel},
	} {
		if got := versionOf("", &c.info); got != c.want {
			t.Errorf("%s: %q, want %q", name, got, c.want)
		}
	}
}

// TestStamped: what the build stamps wins over what the toolchain recorded,
// and a binary without build information still has a version.
func TestStamped(t *testing.T) {
	info := &debug.BuildInfo{Main: debug.Module{Version: "v1.4.0"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef"}}}
	if got := versionOf("1.5.0", info); got != "1.5.0" {
		t.Errorf("stamped version: %q", got)
	}
	if got := versionOf("", nil); got != Devel {
		t.Errorf("no build information: %q, want %q", got, Devel)
	}
	if got := revisionOf("feedface", info); got != "feedface" {
		t.Errorf("stamped revision: %q", got)
	}
	if got := revisionOf("", info); got != "0123456789abcdef" {
		t.Errorf("recorded revision: %q", got)
	}
	if got := revisionOf("", &debug.BuildInfo{}); got != "" {
		t.Errorf("no revision: %q", got)
	}
	if got := revisionOf("", nil); got != "" {
		t.Errorf("no build information: %q", got)
	}
}

// TestPrint: the -version line names the command, version and revision.
func TestPrint(t *testing.T) {
	var b strings.Builder
	if err := Print(&b, "edge"); err != nil {
		t.Fatal(err)
	}
	want := "edge " + Version() + " (revision "
	if !strings.HasPrefix(b.String(), want) || !strings.HasSuffix(b.String(), ")\n") {
		t.Errorf("Print: %q, want %q…", b.String(), want)
	}
}

// TestVersion: the running binary always has a version to show.
func TestVersion(t *testing.T) {
	if Version() == "" {
		t.Fatal("empty version")
	}
}
