// Package images checks the container images make builds (deployments/images,
// docs/adr/0044): every Containerfile's shape, one image built and its file
// system exported and inspected (running containers is not possible on every
// build machine), and the version make stamps without .git.
package images

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// The user every image runs as (distroless's nonroot).
const nonRoot = 65532

// images are the images make images builds and the ports each exposes.
var images = map[string][]string{
	"validator":     {"8090/tcp", "7090/tcp"},
	"edge":          {"8787/tcp"},
	"chain-watcher": {"8091/tcp"},
	"devchain":      {"8545/tcp"},
}

// builtImage is the one image the test builds: building them all takes
// minutes on a cold build cache; the others differ from it only in their
// Containerfile, which TestContainerfiles reads.
const builtImage = "edge"

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "Makefile")); err != nil {
		t.Fatalf("repository root: %v", err)
	}
	return root
}

// containerTool is podman, else docker, as the Makefile chooses.
func containerTool(t *testing.T) string {
	t.Helper()
	for _, tool := range []string{"podman", "docker"} {
		if p, err := exec.LookPath(tool); err == nil {
			return p
		}
	}
	t.Skip("neither podman nor docker is installed (.ci/run installs podman)")
	return ""
}

func run(t *testing.T, dir string, name string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, out, stderr.Bytes())
	}
	return out
}

// TestContainerfiles: every image starts from scratch (nothing to pull), runs
// as the non-root user, carries the OCI labels and exposes its ports.
func TestContainerfiles(t *testing.T) {
	dir := filepath.Join(repoRoot(t), "deployments", "images")
	files, err := filepath.Glob(filepath.Join(dir, "*.Containerfile"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(images) {
		t.Errorf("%d Containerfiles, want one per image (%d)", len(files), len(images))
	}
	for name, ports := range images {
		b, err := os.ReadFile(filepath.Join(dir, name+".Containerfile"))
		if err != nil {
			t.Error(err)
			continue
		}
		text := string(b)
		want := []string{
			"\nFROM scratch\n",
			fmt.Sprintf("\nUSER %d:%d\n", nonRoot, nonRoot),
			"\nEXPOSE " + strings.Join(ports, " ") + "\n",
			`ENTRYPOINT ["/usr/local/bin/` + name + `"]`,
			"COPY " + name + " /usr/local/bin/" + name + "\n",
			`org.opencontainers.image.title="contentledger-` + name + `"`,
		}
		for _, label := range []string{"version", "revision", "source", "licenses", "description"} {
			want = append(want, "org.opencontainers.image."+label+"=")
		}
		for _, w := range want {
			if !strings.Contains(text, w) {
				t.Errorf("%s.Containerfile lacks %q", name, w)
			}
		}
		if n := strings.Count(text, "\nFROM "); n != 1 {
			t.Errorf("%s.Containerfile has %d FROM lines, want 1", name, n)
		}
	}
}

// imageConfig is the part of podman's and docker's image inspect output
// the test reads.
type imageConfig struct {
	Config struct {
		User         string
		Entrypoint   []string
		ExposedPorts map[string]struct{}
		Labels       map[string]string
	}
}

// TestImage builds one image with make, stamped with a version and revision
// of its own, and checks its configuration and its exported file system:
// the binary is static, for this machine's architecture, and reports the
// stamp; the CA certificates are there; the state directory is the user's.
func TestImage(t *testing.T) {
	tool := containerTool(t)
	root := repoRoot(t)
	const (
		version  = "0.0.0-imagetest"
		revision = "0123456789abcdef0123456789abcdef01234567"
		prefix   = "contentledger-imagetest/"
	)
	ref := prefix + builtImage + ":" + version
	run(t, root, "make", "-s", "image-"+builtImage, "VERSION="+version, "REVISION="+revision,
		"IMAGE_PREFIX="+prefix, "CONTAINER="+tool, "IMAGE_ARCH="+runtime.GOARCH)
	t.Cleanup(func() { _ = exec.Command(tool, "rmi", "-f", ref).Run() })

	var inspected []imageConfig
	if err := json.Unmarshal(run(t, root, tool, "image", "inspect", ref), &inspected); err != nil || len(inspected) != 1 {
		t.Fatalf("image inspect %s: %v (%d images)", ref, err, len(inspected))
	}
	cfg := inspected[0].Config
	if want := fmt.Sprintf("%d:%d", nonRoot, nonRoot); cfg.User != want {
		t.Errorf("user %q, want %q", cfg.User, want)
	}
	entrypoint := "/usr/local/bin/" + builtImage
	if len(cfg.Entrypoint) != 1 || cfg.Entrypoint[0] != entrypoint {
		t.Errorf("entrypoint %q, want [%s]", cfg.Entrypoint, entrypoint)
	}
	for _, port := range images[builtImage] {
		if _, ok := cfg.ExposedPorts[port]; !ok {
			t.Errorf("port %s not exposed: %v", port, cfg.ExposedPorts)
		}
	}
	for label, want := range map[string]string{
		"version":  version,
		"revision": revision,
		"licenses": "Apache-2.0",
		"title":    "contentledger-" + builtImage,
		"source":   "https://github.com/contentledger/contentledger",
	} {
		if got := cfg.Labels["org.opencontainers.image."+label]; got != want {
			t.Errorf("label %s = %q, want %q", label, got, want)
		}
	}

	files := exportFiles(t, tool, ref)
	binary, ok := files[strings.TrimPrefix(entrypoint, "/")]
	if !ok {
		t.Fatalf("%s is not in the image", entrypoint)
	}
	checkStatic(t, binary.data)
	if certs := files["etc/ssl/certs/ca-certificates.crt"]; !bytes.Contains(certs.data, []byte("BEGIN CERTIFICATE")) {
		t.Error("the image has no CA certificates")
	}
	if state, ok := files["var/lib/contentledger/data"]; !ok || state.header.Uid != nonRoot {
		t.Errorf("var/lib/contentledger/data: present %v, owner %d; want the user's", ok, state.header.Uid)
	}

	// The image's own binary, run here (it is static and for this
	// architecture), reports what make stamped.
	exe := filepath.Join(t.TempDir(), builtImage)
	if err := os.WriteFile(exe, binary.data, 0o755); err != nil {
		t.Fatal(err)
	}
	out := run(t, root, exe, "-version")
	if want := fmt.Sprintf("%s %s (revision %s, ", builtImage, version, revision); !strings.HasPrefix(string(out), want) {
		t.Errorf("-version printed %q, want %q…", out, want)
	}
}

type file struct {
	header *tar.Header
	data   []byte
}

// exportFiles returns the file system of a container created (not started)
// from the image, by path without the leading slash.
func exportFiles(t *testing.T, tool, ref string) map[string]file {
	t.Helper()
	id := strings.TrimSpace(string(run(t, "", tool, "create", ref)))
	t.Cleanup(func() { _ = exec.Command(tool, "rm", "-f", id).Run() })
	cmd := exec.Command(tool, "export", id)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	files := map[string]file{}
	r := tar.NewReader(stdout)
	for {
		h, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("export: %v", err)
		}
		data, err := io.ReadAll(r)
		if err != nil {
			t.Fatalf("export %s: %v", h.Name, err)
		}
		files[path.Clean(strings.TrimPrefix(h.Name, "/"))] = file{header: h, data: data}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%s export: %v", tool, err)
	}
	return files
}

// checkStatic: an ELF executable for this machine with no interpreter and no
// shared libraries, which is what runs FROM scratch.
func checkStatic(t *testing.T, binary []byte) {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(binary))
	if err != nil {
		t.Fatalf("the binary is not ELF: %v", err)
	}
	machine := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[runtime.GOARCH]
	if f.Machine != machine {
		t.Errorf("binary for %v, want %v", f.Machine, machine)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary names an interpreter: it is dynamically linked")
		}
	}
	if libs, err := f.ImportedLibraries(); err != nil || len(libs) != 0 {
		t.Errorf("the binary needs shared libraries %v (%v)", libs, err)
	}
}

// TestStampWithoutGit: in a source tree without .git, make stamps the
// version and revision of the VERSION and REVISION files, else 0.0.0-dev
// and unknown.
func TestStampWithoutGit(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make is not installed")
	}
	makefile := filepath.Join(repoRoot(t), "Makefile")
	dir := t.TempDir()
	stamp := func() string {
		cmd := exec.Command("make", "-s", "-f", makefile, "version")
		cmd.Dir = dir
		// Neither the environment nor a parent make may set what make computes.
		cmd.Env = withoutVars(os.Environ(), "VERSION", "REVISION", "MAKEFLAGS", "MFLAGS", "MAKELEVEL")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("make version: %v\n%s", err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if got, want := stamp(), "0.0.0-dev unknown"; got != want {
		t.Errorf("no .git, no files: %q, want %q", got, want)
	}
	for name, content := range map[string]string{"VERSION": "1.2.3\n", "REVISION": "feedfacefeedfacefeedfacefeedfacefeedface\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := stamp(), "1.2.3 feedfacefeedfacefeedfacefeedfacefeedface"; got != want {
		t.Errorf("no .git, VERSION and REVISION files: %q, want %q", got, want)
	}
}

// withoutVars is env without the named variables.
func withoutVars(env []string, names ...string) []string {
	var out []string
next:
	for _, kv := range env {
		for _, name := range names {
			if strings.HasPrefix(kv, name+"=") {
				continue next
			}
		}
		out = append(out, kv)
	}
	return out
}
