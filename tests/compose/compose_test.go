// Package compose checks deployments/compose: the compose file loads and
// validates with the compose specification's own library (compose-go), every
// variable it sets for a Content Ledger service is one that service reads,
// each service accepts the configuration it is given, and the services agree
// with one another, with the dev chain and with the NATS server's users. It
// needs no container and no network: `docker compose up` is the one thing it
// does not do.
package compose

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/dotenv"
	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/kelseyhightower/envconfig"
	"github.com/nats-io/nats-server/v2/server"

	"github.com/contentledger/contentledger/pkg/peercert"
	watcher "github.com/contentledger/contentledger/services/chain-watcher/app"
	edge "github.com/contentledger/contentledger/services/edge/app"
	validator "github.com/contentledger/contentledger/services/validator/app"
	"github.com/contentledger/contentledger/tools/devchain"
	"github.com/contentledger/contentledger/tools/devnats"
)

// dir is the compose deployment, from this package's directory.
const dir = "../../deployments/compose"

// service is what the test knows of one Content Ledger image: the prefix of
// its settings, its Config (whose envconfig tags name them), and how it
// loads and checks its configuration from the environment, as its main does.
type service struct {
	prefix string
	config any
	load   func() (any, error)
}

// services maps each Content Ledger image to its service. An image of
// contentledger/ that is not here fails the test: a new one needs its entry.
var services = map[string]service{
	"contentledger/validator":     {validator.EnvPrefix, &validator.Config{}, func() (any, error) { return validator.LoadConfig() }},
	"contentledger/chain-watcher": {watcher.EnvPrefix, &watcher.Config{}, func() (any, error) { return watcher.LoadConfig() }},
	"contentledger/edge": {"OPS", &edge.Config{}, func() (any, error) {
		var cfg edge.Config
		if err := envconfig.Process("OPS", &cfg); err != nil {
			return nil, err
		}
		return cfg, cfg.HTTPServer().Validate()
	}},
	// The dev chain reads no setting (tools/devchain has no Config read from
	// the environment): it gets none.
	"contentledger/devchain": {},
}

// loadProject loads compose.yaml as docker compose would, with .env made
// from .env.example the way prepare.sh makes it: every empty secret filled
// with 32 random bytes in hex. It returns the project and that environment.
func loadProject(t *testing.T) (*types.Project, map[string]string) {
	t.Helper()
	example, err := dotenv.Read(filepath.Join(dir, ".env.example"))
	if err != nil {
		t.Fatal(err)
	}
	env := make(map[string]string, len(example))
	for name, value := range example {
		if value == "" {
			value = randomSecret(t)
		}
		env[name] = value
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	project, err := loader.LoadWithContext(context.Background(), types.ConfigDetails{
		WorkingDir:  abs,
		ConfigFiles: []types.ConfigFile{{Filename: filepath.Join(abs, "compose.yaml")}},
		Environment: maps.Clone(env), // the loader adds its own variables
	}, func(o *loader.Options) { o.SetProjectName("contentledger", true) })
	if err != nil {
		t.Fatalf("compose.yaml does not load with .env.example's variables: %v", err)
	}
	return project, env
}

// randomSecret is what prepare.sh puts in an empty .env value (openssl rand -hex 32).
func randomSecret(t *testing.T) string {
	t.Helper()
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// TestComposeLoads: the file is valid by the compose specification (the
// loader checks it against the specification's schema), runs every part
// issue 21 names, and leaves no secret in the file.
func TestComposeLoads(t *testing.T) {
	project, env := loadProject(t)
	want := []string{"chain-watcher", "devchain", "edge-1", "edge-2", "edge-proxy", "grafana", "ipfs", "nats",
		"prometheus", "validator-1", "validator-2", "validator-3"}
	if got := slices.Sorted(maps.Keys(project.Services)); !slices.Equal(got, want) {
		t.Errorf("services %v, want %v", got, want)
	}
	// Atomic batches need NATS 2.12 or newer.
	nats := project.Services["nats"].Image
	if v, ok := strings.CutPrefix(nats, "nats:"); !ok || !atLeast(v, 2, 12) {
		t.Errorf("NATS image %q, want nats:2.12 or newer", nats)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for name, secret := range env {
		// Every variable of .env.example is used, and only through
		// interpolation (or a secret's environment source).
		if !bytes.Contains(raw, []byte("${"+name+":?")) && !bytes.Contains(raw, []byte("environment: "+name+"\n")) {
			t.Errorf(".env.example has %s, which compose.yaml does not use as ${%s:?...}", name, name)
		}
		if bytes.Contains(raw, []byte(secret)) {
			t.Errorf("compose.yaml holds the value of %s", name)
		}
	}
	// compose refuses to start without the secrets: .env.example's empty
	// values are not enough.
	abs, _ := filepath.Abs(dir)
	example, _ := dotenv.Read(filepath.Join(dir, ".env.example"))
	_, err = loader.LoadWithContext(context.Background(), types.ConfigDetails{
		WorkingDir: abs, ConfigFiles: []types.ConfigFile{{Filename: filepath.Join(abs, "compose.yaml")}}, Environment: example,
	}, func(o *loader.Options) { o.SetProjectName("contentledger", true) })
	if err == nil {
		t.Error("compose.yaml loads with the empty secrets of .env.example")
	}
}

// atLeast reports whether the version v (major.minor[...]) is at least
// major.minor.
func atLeast(v string, major, minor int) bool {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return false
	}
	a, err1 := strconv.Atoi(parts[0])
	b, err2 := strconv.Atoi(strings.SplitN(parts[1], "-", 2)[0])
	return err1 == nil && err2 == nil && (a > major || a == major && b >= minor)
}

// settingNames lists a service's settings as envconfig itself names them
// (its usage listing, as `-h` prints it): name → required.
func settingNames(t *testing.T, s service) map[string]bool {
	t.Helper()
	var out bytes.Buffer
	const format = "{{range .}}{{usage_key .}} {{usage_required .}}\n{{end}}"
	if err := envconfig.Usagef(s.prefix, s.config, &out, format); err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for line := range strings.Lines(out.String()) {
		name, required, _ := strings.Cut(strings.TrimSpace(line), " ")
		names[name] = required == "true"
	}
	if len(names) < 10 {
		t.Fatalf("envconfig lists %d settings of %s: the listing is not what the test expects", len(names), s.prefix)
	}
	return names
}

// environment is a service's environment after interpolation.
func environment(t *testing.T, svc types.ServiceConfig) map[string]string {
	t.Helper()
	env := make(map[string]string, len(svc.Environment))
	for name, value := range svc.Environment {
		if value == nil {
			t.Errorf("%s: %s is set without a value (taken from the shell running compose)", svc.Name, name)
			continue
		}
		env[name] = *value
	}
	return env
}

// imageName is the image without its tag.
func imageName(image string) string {
	name, _, _ := strings.Cut(image, ":")
	return name
}

// TestComposeSettingsAreRead: every variable the compose file sets for a
// Content Ledger service is a setting of that service (its Config's
// envconfig tags), every required one is set, and the service accepts the
// whole: its own LoadConfig and Validate, as at start.
func TestComposeSettingsAreRead(t *testing.T) {
	project, _ := loadProject(t)
	for _, name := range slices.Sorted(maps.Keys(project.Services)) {
		svc := project.Services[name]
		if !strings.HasPrefix(svc.Image, "contentledger/") {
			continue
		}
		t.Run(name, func(t *testing.T) {
			s, ok := services[imageName(svc.Image)]
			if !ok {
				t.Fatalf("image %s is not known to this test: add it to services", svc.Image)
			}
			env := environment(t, svc)
			if s.prefix == "" {
				if len(env) > 0 {
					t.Errorf("%s reads no setting, but compose sets %v", svc.Image, slices.Sorted(maps.Keys(env)))
				}
				return
			}
			names := settingNames(t, s)
			for _, v := range slices.Sorted(maps.Keys(env)) {
				if _, ok := names[v]; !ok {
					t.Errorf("%s is not a setting of %s (its Config has no such envconfig tag)", v, svc.Image)
				}
			}
			for v, required := range names {
				if _, set := env[v]; required && !set {
					t.Errorf("%s is required by %s and not set", v, svc.Image)
				}
			}
			if _, err := loadConfig(t, s, env); err != nil {
				t.Errorf("%s refuses the configuration compose gives it: %v", svc.Image, err)
			}
		})
	}
}

// loadConfig loads s's configuration from env alone, as the service does at
// start. Variables of the test's own environment with s's prefix are
// cleared first, so that only compose's settings count.
func loadConfig(t *testing.T, s service, env map[string]string) (cfg any, err error) {
	t.Helper()
	t.Run("load", func(t *testing.T) {
		for _, kv := range os.Environ() {
			if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, s.prefix+"_") {
				t.Setenv(name, "")
				if err := os.Unsetenv(name); err != nil {
					t.Fatal(err)
				}
			}
		}
		for name, value := range env {
			t.Setenv(name, value)
		}
		cfg, err = s.load()
	})
	return cfg, err
}

// configs loads the configuration of every service of image.
func configs[C any](t *testing.T, project *types.Project, image string) map[string]C {
	t.Helper()
	out := map[string]C{}
	for name, svc := range project.Services {
		if imageName(svc.Image) != image {
			continue
		}
		cfg, err := loadConfig(t, services[image], environment(t, svc))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out[name] = cfg.(C)
	}
	if len(out) == 0 {
		t.Fatalf("no service runs %s", image)
	}
	return out
}

// TestComposeServicesAgree: what one service is told of another is what
// the other is: the dev chain's contracts and chain id, the chain feed's
// stream, bucket, confirmations and epoch length, the cluster's members and
// id, the edges' validators and token, the peer certificates' mounts.
func TestComposeServicesAgree(t *testing.T) {
	project, _ := loadProject(t)
	validators := configs[validator.Config](t, project, "contentledger/validator")
	watchers := configs[watcher.Config](t, project, "contentledger/chain-watcher")
	edges := configs[edge.Config](t, project, "contentledger/edge")
	if len(validators) != 3 || len(watchers) != 1 || len(edges) != 2 {
		t.Fatalf("%d validators, %d watchers, %d edges; want 3, 1, 2", len(validators), len(watchers), len(edges))
	}
	w := watchers["chain-watcher"]

	// The dev chain's contracts: the real chain, started here.
	chain, err := devchain.Start(devchain.Config{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = chain.Close() })
	if !strings.EqualFold(w.ContractAddress, chain.PaymentLedger.Hex()) || w.StartBlock != chain.DeployBlock {
		t.Errorf("watcher reads contract %s from block %d; the dev chain deploys %s in block %d",
			w.ContractAddress, w.StartBlock, chain.PaymentLedger.Hex(), chain.DeployBlock)
	}
	if u, err := url.Parse(w.RPCURL); err != nil || u.Hostname() != "devchain" || u.Port() != "8545" {
		t.Errorf("watcher RPC_URL %q, want the devchain service's port 8545", w.RPCURL)
	}

	var members []validator.Member
	for name, v := range validators {
		if !strings.EqualFold(v.ContractAddress, chain.PaymentLedger.Hex()) || !strings.EqualFold(v.USDCAddress, chain.DevUSDC.Hex()) ||
			v.ChainID != chain.ChainID {
			t.Errorf("%s: chain %d contract %s USDC %s; the dev chain: %d, %s, %s", name, v.ChainID, v.ContractAddress,
				v.USDCAddress, chain.ChainID, chain.PaymentLedger.Hex(), chain.DevUSDC.Hex())
		}
		if v.Confirmations != w.Confirmations || v.EpochLength != w.EpochLength || v.PaymentStream != w.Stream || v.WatcherBucket != w.Bucket {
			t.Errorf("%s: confirmations %d, epoch %s, stream %s, bucket %s; the watcher: %d, %s, %s, %s", name,
				v.Confirmations, v.EpochLength, v.PaymentStream, v.WatcherBucket, w.Confirmations, w.EpochLength, w.Stream, w.Bucket)
		}
		if v.NATSURL != w.NATSURL {
			t.Errorf("%s: NATS %s, the watcher's %s", name, v.NATSURL, w.NATSURL)
		}
		m, err := validator.ParseCluster(v.InitialCluster)
		if err != nil {
			t.Fatal(err)
		}
		if members == nil {
			members = m
		} else if !reflect.DeepEqual(m, members) {
			t.Errorf("%s: INITIAL_CLUSTER differs from another validator's", name)
		}
		if !v.PeerTLS() {
			t.Errorf("%s: no peer mTLS", name)
		}
		checkPeerMounts(t, project.Services[name], v)
	}
	// Every member is a validator service, reached at its own ports, and
	// each service is the member of its NODE_ID.
	var apis []string
	for _, m := range members {
		host, port, _ := net.SplitHostPort(m.PeerAddr)
		v, ok := validators[host]
		switch {
		case !ok:
			t.Errorf("member %d at %s: no validator service %q", m.ID, m.PeerAddr, host)
			continue
		case v.NodeID != m.ID:
			t.Errorf("member %d is service %s, whose NODE_ID is %d", m.ID, host, v.NodeID)
		case !samePort(v.PeerAddr, port) || m.APIURL != "http://"+host+":"+portOf(v.HTTPAddr):
			t.Errorf("member %d (%s, %s) is not where %s listens (%s, %s)", m.ID, m.PeerAddr, m.APIURL, host, v.PeerAddr, v.HTTPAddr)
		}
		apis = append(apis, m.APIURL)
	}
	if len(members) != len(validators) {
		t.Errorf("INITIAL_CLUSTER has %d members, compose runs %d validators", len(members), len(validators))
	}
	for name, e := range edges {
		if !slices.Equal(e.Validators, apis) {
			t.Errorf("%s: validators %v, the cluster's APIs %v", name, e.Validators, apis)
		}
		for vname, v := range validators {
			if e.ClusterID != v.ClusterID {
				t.Errorf("%s: cluster %q, %s's %q", name, e.ClusterID, vname, v.ClusterID)
			}
			if !slices.Contains(strings.Split(v.OpsReadTokens, ","), e.ValidatorToken) {
				t.Errorf("%s: its validator token is not one of %s's ops-read tokens", name, vname)
			}
		}
		if e.APIAuthToken == "" || e.RuntimeAuthToken == "" {
			t.Errorf("%s: /ops/v1 open (OPS_API_AUTH_TOKEN or OPS_RUNTIME_AUTH_TOKEN unset)", name)
		}
	}
	proxy := project.Services["edge-proxy"].Networks["ledger"]
	for name, e := range edges {
		if proxy == nil || !slices.Contains(e.TrustedProxies, proxy.Ipv4Address) {
			t.Errorf("%s trusts proxies %v, not the edge proxy's address", name, e.TrustedProxies)
		}
	}
}

// checkPeerMounts: a validator's certificate and key are those of its
// NODE_ID (the names ledgerctl certs gives them), in a directory mounted
// from ./pki/v<id> as prepare.sh makes it, read-only; the CA certificate is
// mounted from ./pki/ca.crt, and the CA's key nowhere.
func checkPeerMounts(t *testing.T, svc types.ServiceConfig, v validator.Config) {
	t.Helper()
	mounts := map[string]types.ServiceVolumeConfig{}
	for _, m := range svc.Volumes {
		if m.Type == types.VolumeTypeBind {
			mounts[m.Target] = m
			if !m.ReadOnly {
				t.Errorf("%s: bind mount %s is writable", svc.Name, m.Target)
			}
			if strings.HasSuffix(m.Source, peercert.CAKeyFile) || filepath.Base(m.Source) == "pki" {
				t.Errorf("%s: mounts the CA's key (%s)", svc.Name, m.Source)
			}
		}
	}
	id := strconv.FormatUint(v.NodeID, 10)
	for file, want := range map[string]string{v.PeerTLSCert: peercert.NodeCertFile(v.NodeID), v.PeerTLSKey: peercert.NodeKeyFile(v.NodeID)} {
		m, ok := mounts[path.Dir(file)]
		if !ok || path.Base(file) != want || filepath.Base(m.Source) != "v"+id || filepath.Base(filepath.Dir(m.Source)) != "pki" {
			t.Errorf("%s: %s is not %s of a directory mounted from ./pki/v%s", svc.Name, file, want, id)
		}
	}
	if m, ok := mounts[v.PeerTLSCA]; !ok || filepath.Base(m.Source) != peercert.CACertFile {
		t.Errorf("%s: PEER_TLS_CA %s is not mounted from ./pki/%s", svc.Name, v.PeerTLSCA, peercert.CACertFile)
	}
}

func portOf(addr string) string {
	_, port, _ := net.SplitHostPort(addr)
	return port
}

func samePort(addr, port string) bool { return portOf(addr) == port }

// TestComposeNATS: the NATS server's configuration, as nats-server itself
// reads it with the passwords compose passes, runs JetStream synced on every
// write and has the users of ADR 0029 with exactly devnats's permissions;
// the watcher and the validators connect as their role's user, with its
// password.
func TestComposeNATS(t *testing.T) {
	project, _ := loadProject(t)
	svc := project.Services["nats"]
	env := environment(t, svc)
	var opts *server.Options
	t.Run("parse", func(t *testing.T) {
		for name, value := range env {
			t.Setenv(name, value)
		}
		var err error
		if opts, err = server.ProcessConfigFile(filepath.Join(dir, "nats", "nats-server.conf")); err != nil {
			t.Fatal(err)
		}
	})
	if opts == nil {
		t.FailNow()
	}
	if !opts.JetStream || !opts.SyncAlways {
		t.Errorf("JetStream %v, sync always %v; want both", opts.JetStream, opts.SyncAlways)
	}
	mounted := false
	for _, m := range svc.Volumes {
		mounted = mounted || m.Type == types.VolumeTypeVolume && strings.HasPrefix(opts.StoreDir, m.Target+"/")
	}
	if !mounted {
		t.Errorf("JetStream's store %s is not on a volume", opts.StoreDir)
	}
	users := map[string]*server.User{}
	for _, u := range opts.Users {
		users[u.Username] = u
	}
	perms := devnats.Auth{}.Permissions()
	for _, role := range devnats.Roles {
		u, ok := users[string(role)]
		if !ok {
			t.Errorf("no NATS user %s", role)
			continue
		}
		if !samePermissions(u.Permissions, perms[role]) {
			t.Errorf("user %s: permissions %s, devnats gives %s", role, describe(u.Permissions), describe(perms[role]))
		}
		if len(u.Password) < 32 {
			t.Errorf("user %s: password of %d characters, want the .env secret", role, len(u.Password))
		}
	}
	if len(users) != len(devnats.Roles) {
		t.Errorf("NATS users %v, want %v", slices.Sorted(maps.Keys(users)), devnats.Roles)
	}
	for name, c := range configs[validator.Config](t, project, "contentledger/validator") {
		if u := users[string(devnats.Validator)]; u == nil || c.NATSUser != u.Username || c.NATSPassword != u.Password {
			t.Errorf("%s does not connect as the NATS user validator", name)
		}
	}
	for name, c := range configs[watcher.Config](t, project, "contentledger/chain-watcher") {
		if u := users[string(devnats.Watcher)]; u == nil || c.NATSUser != u.Username || c.NATSPassword != u.Password {
			t.Errorf("%s does not connect as the NATS user watcher", name)
		}
	}
}

// samePermissions reports whether a and b allow and deny the same
// subjects, in any order (devnats names some API subjects twice).
func samePermissions(a, b *server.Permissions) bool {
	if a == nil || b == nil {
		return a == b
	}
	set := func(p *server.SubjectPermission) [2][]string {
		if p == nil {
			return [2][]string{}
		}
		return [2][]string{slices.Compact(slices.Sorted(slices.Values(p.Allow))), slices.Compact(slices.Sorted(slices.Values(p.Deny)))}
	}
	return reflect.DeepEqual(set(a.Publish), set(b.Publish)) && reflect.DeepEqual(set(a.Subscribe), set(b.Subscribe)) &&
		reflect.DeepEqual(a.Response, b.Response)
}

// describe prints permissions for a failure message.
func describe(p *server.Permissions) string {
	if p == nil {
		return "none"
	}
	return fmt.Sprintf("publish %+v subscribe %+v", p.Publish, p.Subscribe)
}

// TestComposePrometheus: Prometheus scrapes every validator, edge and
// watcher at the port it listens on, and reads the validators' ops-read
// token from the compose secret made from .env.
func TestComposePrometheus(t *testing.T) {
	project, env := loadProject(t)
	raw, err := os.ReadFile(filepath.Join(dir, "prometheus", "prometheus.yml"))
	if err != nil {
		t.Fatal(err)
	}
	for name, svc := range project.Services {
		var addr string
		switch imageName(svc.Image) {
		case "contentledger/validator":
			addr = environment(t, svc)["SVC_VALIDATOR_HTTP_ADDR"]
		case "contentledger/edge":
			addr = environment(t, svc)["OPS_HTTP_ADDR"]
		case "contentledger/chain-watcher":
			addr = environment(t, svc)["WATCHER_HTTP_ADDR"]
		default:
			continue
		}
		if target := `"` + name + ":" + portOf(addr) + `"`; !bytes.Contains(raw, []byte(target)) {
			t.Errorf("prometheus.yml does not scrape %s", target)
		}
	}
	secret, ok := project.Secrets["validator_ops_read_token"]
	if !ok || secret.Environment != "VALIDATOR_OPS_READ_TOKEN" || env[secret.Environment] == "" {
		t.Fatalf("the secret validator_ops_read_token is not made from .env's VALIDATOR_OPS_READ_TOKEN: %+v", secret)
	}
	if !bytes.Contains(raw, []byte("credentials_file: /run/secrets/validator_ops_read_token")) {
		t.Error("prometheus.yml does not read the validators' token from the secret")
	}
	if !slices.ContainsFunc(project.Services["prometheus"].Secrets, func(s types.ServiceSecretConfig) bool {
		return s.Source == "validator_ops_read_token"
	}) {
		t.Error("the prometheus service does not get the secret validator_ops_read_token")
	}
}
