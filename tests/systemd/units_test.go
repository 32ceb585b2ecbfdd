// Package systemd_test checks the systemd units of deployments/systemd: the hardening every service
// runs under, its user and state directory, and the order against NATS; and, where systemd's tools
// are installed (CI installs them), that systemd itself accepts the units and the sysusers file.
package systemd_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const unitsDir = "../../deployments/systemd"

// unit is a parsed unit file: section, then directive, then its assignments in order (a directive
// may be given more than once, as SystemCallFilter=).
type unit map[string]map[string][]string

// last returns the directive's effective value where a later assignment replaces an earlier one.
func (u unit) last(section, key string) (string, bool) {
	values := u[section][key]
	if len(values) == 0 {
		return "", false
	}
	return values[len(values)-1], true
}

// words returns the space-separated words of every assignment of a list directive (After=, Wants=).
func (u unit) words(section, key string) []string {
	var out []string
	for _, value := range u[section][key] {
		out = append(out, strings.Fields(value)...)
	}
	return out
}

// parseUnit reads a unit file as systemd.syntax(7) describes it: [Section] headers, Key=Value lines,
// comments starting with # or ;, and lines continued by a trailing backslash.
func parseUnit(path string) (unit, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	u := unit{}
	section := ""
	var pending string
	scanner := bufio.NewScanner(strings.NewReader(string(data)))
	for n := 1; scanner.Scan(); n++ {
		line := strings.TrimSpace(scanner.Text())
		if pending != "" {
			line = pending + " " + line
			pending = ""
		}
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if strings.HasSuffix(line, `\`) {
			pending = strings.TrimSuffix(line, `\`)
			continue
		}
		if line[0] == '[' {
			if !strings.HasSuffix(line, "]") {
				return nil, fmt.Errorf("%s:%d: bad section header %q", path, n, line)
			}
			section = line[1 : len(line)-1]
			if u[section] == nil {
				u[section] = map[string][]string{}
			}
			continue
		}
		key, value, ok := strings.Cut(line, "=")
		if !ok || section == "" {
			return nil, fmt.Errorf("%s:%d: not a directive in a section: %q", path, n, line)
		}
		key = strings.TrimSpace(key)
		u[section][key] = append(u[section][key], strings.TrimSpace(value))
	}
	return u, scanner.Err()
}

// service is what the test expects of one unit.
type service struct {
	file     string // unit file name
	binary   string // the ExecStart binary under /usr/local/bin
	env      string // env file under deployments/env (installed in /etc/contentledger)
	state    string // StateDirectory=
	usesNATS bool
}

var services = []service{
	{file: "contentledger-validator.service", binary: "validator", env: "validator.env", state: "contentledger/validator", usesNATS: true},
	{file: "contentledger-chain-watcher.service", binary: "chain-watcher", env: "chain-watcher.env", state: "contentledger/chain-watcher", usesNATS: true},
	{file: "contentledger-edge.service", binary: "edge", env: "edge.env", state: "contentledger/edge"},
}

// hardening is each [Service] directive every unit must set, with its value. The services bind TCP
// ports above 1024 and write only their state directory, so none needs a capability or a device.
var hardening = map[string]string{
	"NoNewPrivileges":         "yes",
	"CapabilityBoundingSet":   "",
	"AmbientCapabilities":     "",
	"ProtectSystem":           "strict",
	"ProtectHome":             "yes",
	"PrivateTmp":              "yes",
	"PrivateDevices":          "yes",
	"DevicePolicy":            "closed",
	"PrivateMounts":           "yes",
	"ProtectKernelTunables":   "yes",
	"ProtectKernelModules":    "yes",
	"ProtectKernelLogs":       "yes",
	"ProtectControlGroups":    "yes",
	"ProtectClock":            "yes",
	"ProtectHostname":         "yes",
	"ProtectProc":             "invisible",
	"RestrictNamespaces":      "yes",
	"RestrictRealtime":        "yes",
	"RestrictSUIDSGID":        "yes",
	"LockPersonality":         "yes",
	"MemoryDenyWriteExecute":  "yes",
	"RemoveIPC":               "yes",
	"SystemCallArchitectures": "native",
	"UMask":                   "0077",
}

// allowedFamilies are the socket families a service may open: TCP over IPv4 and IPv6, local
// sockets (the C resolver's nscd/resolved), netlink (getaddrinfo's AI_ADDRCONFIG, interface lists).
var allowedFamilies = []string{"AF_UNIX", "AF_INET", "AF_INET6", "AF_NETLINK"}

func TestUnitsHardened(t *testing.T) {
	users := sysusers(t)
	for _, svc := range services {
		t.Run(svc.file, func(t *testing.T) {
			u, err := parseUnit(filepath.Join(unitsDir, svc.file))
			if err != nil {
				t.Fatal(err)
			}
			for key, want := range hardening {
				got, ok := u.last("Service", key)
				if !ok || got != want {
					t.Errorf("[Service] %s=%q (set: %v), want %q", key, got, ok, want)
				}
			}
			families := u.words("Service", "RestrictAddressFamilies")
			if len(families) == 0 || strings.HasPrefix(families[0], "~") {
				t.Errorf("RestrictAddressFamilies=%v: want an allow list", families)
			}
			for _, family := range families {
				if !slices.Contains(allowedFamilies, family) {
					t.Errorf("RestrictAddressFamilies allows %s; the services need only %v", family, allowedFamilies)
				}
			}
			filters := u["Service"]["SystemCallFilter"]
			if len(filters) == 0 || filters[0] != "@system-service" {
				t.Errorf("SystemCallFilter=%v: the first must be the allow list @system-service", filters)
			}
			if !slices.Contains(filters, "~@privileged") {
				t.Errorf("SystemCallFilter=%v: want ~@privileged as well", filters)
			}
			if got, _ := u.last("Service", "SystemCallErrorNumber"); got != "EPERM" {
				t.Errorf("SystemCallErrorNumber=%q, want EPERM (a refused call fails instead of killing the service)", got)
			}
			// ProtectSystem=strict makes everything read-only; only the state directory is written.
			for _, key := range []string{"ReadWritePaths", "CacheDirectory", "LogsDirectory", "RuntimeDirectory", "DynamicUser"} {
				if _, ok := u.last("Service", key); ok {
					t.Errorf("[Service] %s set: the service writes its state directory only", key)
				}
			}

			user, _ := u.last("Service", "User")
			group, _ := u.last("Service", "Group")
			if !slices.Contains(users, user) || group != user {
				t.Errorf("User=%q Group=%q: want a user (and its group) that %s creates (%v)", user, group, sysusersFile, users)
			}
			if state, _ := u.last("Service", "StateDirectory"); state != svc.state {
				t.Errorf("StateDirectory=%q, want %q", state, svc.state)
			}
			stateDir := "/var/lib/" + svc.state
			if dir, _ := u.last("Service", "WorkingDirectory"); dir != stateDir {
				t.Errorf("WorkingDirectory=%q, want the state directory %s", dir, stateDir)
			}
			if mode, _ := u.last("Service", "StateDirectoryMode"); mode != "0700" {
				t.Errorf("StateDirectoryMode=%q, want 0700", mode)
			}
			if execStart, _ := u.last("Service", "ExecStart"); execStart != "/usr/local/bin/"+svc.binary {
				t.Errorf("ExecStart=%q, want /usr/local/bin/%s", execStart, svc.binary)
			}
			if env, _ := u.last("Service", "EnvironmentFile"); env != "/etc/contentledger/"+svc.env {
				t.Errorf("EnvironmentFile=%q, want /etc/contentledger/%s", env, svc.env)
			}
			if _, err := os.Stat(filepath.Join("../../deployments/env", svc.env)); err != nil {
				t.Errorf("the unit's env file has no example: %v", err)
			}

			after, wants := u.words("Unit", "After"), u.words("Unit", "Wants")
			for _, target := range []string{"network-online.target"} {
				if !slices.Contains(after, target) || !slices.Contains(wants, target) {
					t.Errorf("After=%v Wants=%v: want both to name %s", after, wants, target)
				}
			}
			if svc.usesNATS && (!slices.Contains(after, "nats-server.service") || !slices.Contains(wants, "nats-server.service")) {
				t.Errorf("After=%v Wants=%v: want both to name nats-server.service", after, wants)
			}
			if wanted := u.words("Install", "WantedBy"); !slices.Contains(wanted, "multi-user.target") {
				t.Errorf("WantedBy=%v, want multi-user.target", wanted)
			}
		})
	}
}

// TestValidatorDataDirInStateDirectory holds the validator's Pebble directory inside the one directory
// the unit lets it write, both in the unit's default and in the example env file.
func TestValidatorDataDirInStateDirectory(t *testing.T) {
	u, err := parseUnit(filepath.Join(unitsDir, "contentledger-validator.service"))
	if err != nil {
		t.Fatal(err)
	}
	state, _ := u.last("Service", "StateDirectory")
	stateDir := "/var/lib/" + state
	var fromUnit string
	for _, assignment := range u.words("Service", "Environment") {
		if value, ok := strings.CutPrefix(assignment, "SVC_VALIDATOR_DATA_DIR="); ok {
			fromUnit = value
		}
	}
	env, err := os.ReadFile("../../deployments/env/validator.env")
	if err != nil {
		t.Fatal(err)
	}
	var fromEnv string
	for line := range strings.Lines(string(env)) {
		if value, ok := strings.CutPrefix(strings.TrimSpace(line), "SVC_VALIDATOR_DATA_DIR="); ok {
			fromEnv = value
		}
	}
	for name, dir := range map[string]string{"the unit's Environment=": fromUnit, "validator.env": fromEnv} {
		if dir != stateDir && !strings.HasPrefix(dir, stateDir+"/") {
			t.Errorf("%s sets SVC_VALIDATOR_DATA_DIR=%q, outside the state directory %s", name, dir, stateDir)
		}
	}
}

const sysusersFile = "contentledger.sysusers"

// sysusers returns the users the sysusers.d file declares (lines "u NAME ...").
func sysusers(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(unitsDir, sysusersFile))
	if err != nil {
		t.Fatal(err)
	}
	var users []string
	for line := range strings.Lines(string(data)) {
		fields := strings.Fields(line)
		if len(fields) >= 2 && fields[0] == "u" {
			users = append(users, fields[1])
		}
	}
	if len(users) == 0 {
		t.Fatalf("%s declares no user", sysusersFile)
	}
	return users
}

// systemdTool finds one of systemd's tools; missing, it skips, except in CI (.ci/run installs them),
// where the check must not pass silently.
func systemdTool(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s not found; .ci/run installs Debian's systemd package", name)
		}
		t.Skipf("%s not installed", name)
	}
	return path
}

// TestUnitsVerify runs systemd-analyze verify on the units. It checks that ExecStart= names an
// executable, so the copies run /bin/true-like binaries in place of /usr/local/bin's.
func TestUnitsVerify(t *testing.T) {
	analyze := systemdTool(t, "systemd-analyze")
	stand, err := exec.LookPath("true")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var paths []string
	for _, svc := range services {
		data, err := os.ReadFile(filepath.Join(unitsDir, svc.file))
		if err != nil {
			t.Fatal(err)
		}
		text := strings.ReplaceAll(string(data), "ExecStart=/usr/local/bin/"+svc.binary, "ExecStart="+stand)
		path := filepath.Join(dir, svc.file)
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, path)
	}
	cmd := exec.Command(analyze, append([]string{"verify", "--man=no"}, paths...)...)
	out, err := cmd.CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// TestSysusersCreatesUsers applies the sysusers.d file to an empty root and finds every unit's user
// in its /etc/passwd, as systemd-sysusers makes them on a real machine.
func TestSysusersCreatesUsers(t *testing.T) {
	tool := systemdTool(t, "systemd-sysusers")
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	file, err := filepath.Abs(filepath.Join(unitsDir, sysusersFile))
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(tool, "--root="+root, file).CombinedOutput(); err != nil {
		t.Fatalf("systemd-sysusers: %v\n%s", err, out)
	}
	passwd, err := os.ReadFile(filepath.Join(root, "etc/passwd"))
	if err != nil {
		t.Fatal(err)
	}
	for _, svc := range services {
		u, err := parseUnit(filepath.Join(unitsDir, svc.file))
		if err != nil {
			t.Fatal(err)
		}
		user, _ := u.last("Service", "User")
		if !strings.Contains(string(passwd), "\n"+user+":") && !strings.HasPrefix(string(passwd), user+":") {
			t.Errorf("%s runs as %q, which systemd-sysusers did not create:\n%s", svc.file, user, passwd)
		}
	}
}
