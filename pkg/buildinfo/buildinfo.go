// Package buildinfo names the software version of the running binary, the
// same way in every service: the version and revision the build stamped
// into it (make build and make release pass them with -ldflags -X, ADR 0044),
// else what the Go toolchain recorded (module version, VCS revision).
package buildinfo

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// Devel is the version of a binary that carries neither a stamped version,
// a module version nor a VCS revision (go run of a tree outside version
// control, tests).
const Devel = "devel"

// revisionLength is how much of a commit hash the version keeps: enough to
// name a commit of the repository, short enough to read on a header.
const revisionLength = 12

// stampedVersion and stampedRevision are set only by the linker
// (-ldflags "-X <this package>.stampedVersion=…"), which can set nothing but
// a package-level string variable; no code assigns them. The Makefile
// computes them from git describe, or from its VERSION and REVISION files
// in a tree without .git, so that a build outside a work tree still says
// what it is.
var (
	stampedVersion  string
	stampedRevision string
)

// Version is the software version of this binary: the version stamped by
// the build, else the main module's version when it was built as a
// released module (go install module@version), else the VCS revision it was
// built from (12 hex digits, "+dirty" when the work tree had changes), else
// Devel.
func Version() string {
	info, _ := debug.ReadBuildInfo()
	return versionOf(stampedVersion, info)
}

// Revision is the commit this binary was built from: the revision stamped by
// the build, else the VCS revision the Go toolchain recorded, else "".
func Revision() string {
	info, _ := debug.ReadBuildInfo()
	return revisionOf(stampedRevision, info)
}

// Print writes the command's name, version and revision and the Go version
// it was built with on one line: what a -version flag prints.
func Print(w io.Writer, command string) error {
	revision := Revision()
	if revision == "" {
		revision = "unknown"
	}
	_, err := fmt.Fprintf(w, "%s %s (revision %s, %s)\n", command, Version(), revision, runtime.Version())
	return err
}

// versionOf is Version for a given stamp and build information (nil when the
// binary has none).
func versionOf(stamped string, info *debug.BuildInfo) string {
	if stamped != "" {
		return stamped
	}
	if info == nil {
		return Devel
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	revision, modified := vcsOf(info)
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

// revisionOf is Revision for a given stamp and build information.
func revisionOf(stamped string, info *debug.BuildInfo) string {
	if stamped != "" {
		return stamped
	}
	if info == nil {
		return ""
	}
	revision, _ := vcsOf(info)
	return revision
}

// vcsOf reads the VCS revision and whether the work tree was modified from
// the build settings.
func vcsOf(info *debug.BuildInfo) (revision string, modified bool) {
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	return revision, modified
}
