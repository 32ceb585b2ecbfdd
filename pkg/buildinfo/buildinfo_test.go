package buildinfo

import (
	"runtime/debug"
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
		if got := versionOf(&c.info); got != c.want {
			t.Errorf("%s: %q, want %q", name, got, c.want)
		}
	}
}

// TestVersion: the running binary always has a version to show.
func TestVersion(t *testing.T) {
	if Version() == "" {
		t.Fatal("empty version")
	}
}
