// Package buildinfo names the software version of the running binary, the
// same way in every service, from what the Go toolchain stamped into it.
package buildinfo

import "runtime/debug"

// Devel is the version of a binary that carries neither a module version
// nor a VCS revision (go run of a tree outside version control, tests).
const Devel = "devel"

// revisionLength is how much of a commit hash the version keeps: enough to
// name a commit of the repository, short enough to read on a header.
const revisionLength = 12

// Version is the software version of this binary: the main module's version
// when it was built as a released module (go install module@version), else
// the VCS revision it was built from (12 hex digits, "+dirty" when the work
// tree had changes), else Devel.
func Version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return Devel
	}
	return versionOf(info)
}

// versionOf is Version for given build information.
func versionOf(info *debug.BuildInfo) string {
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var revision string
	var modified bool
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if revision == "" {
		return Devel
	}
	if len(revision) > revisionLength {
		revision = revision[:revisionLength]
	}
	if modified {
		revision += "+dirty"
	}
	return revision
}
