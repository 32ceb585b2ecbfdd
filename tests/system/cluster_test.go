// Package system runs validator binaries as separate processes on loopback
// and does to them what production does: kill -9, restart, wipe. The chain,
// NATS and the chain-watcher run in the test process, except where the
// chain-watcher is the process killed.
package system

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/contentledger/contentledger/pkg/peercert"
	"github.com/contentledger/contentledger/tests/harness"
	"github.com/contentledger/contentledger/tools/ledgerclient"
)

// validatorBin and watcherBin are built once by TestMain.
var validatorBin, watcherBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "contentledger-system-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	validatorBin = filepath.Join(dir, "validator")
	build := exec.Command("go", "build", "-o", validatorBin, "github.com/contentledger/contentledger/services/validator/cmd/validator")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building the validator:", err)
		os.Exit(1)
	}
	watcherBin = filepath.Join(dir, "chain-watcher")
	build = exec.Command("go", "build", "-o", watcherBin, "github.com/contentledger/contentledger/services/chain-watcher/cmd/chain-watcher")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building the chain-watcher:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// node is one validator process.
type node struct {
	id       uint64
	httpAddr string
	peerAddr string
	dataDir  string
	logPath  string
	env      []string
	cmd      *exec.Cmd
	exited   chan struct{}
}

func (n *node) url() string { return "http://" + n.httpAddr }

// operatorToken is the token of the operator lane of every validator the
// system tests start.
const operatorToken = "system-operator-token-0123456789"

func freeAddr(t testing.TB) string {
	addr, release := reserveAddr(t)
	release()
	return addr
}

// reserveAddr holds a free loopback port until release is called
// (harness.ReserveAddr): release it right before the process that binds it
// starts.
func reserveAddr(t testing.TB) (string, func()) {
	addr, release, err := harness.ReserveAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr, release
}

// cluster is a set of validator processes sharing one chain and NATS.
type cluster struct {
	t     testing.TB
	net   *harness.Backing
	nodes []*node
	pki   string // the peer certificates' directory (peerTLSEnv)
}

// peerTLSEnv issues validator id's peer certificate from the cluster's CA
// and returns the settings naming it: every validator runs peer mTLS.
func (c *cluster) peerTLSEnv(id uint64) []string {
	c.t.Helper()
	files, err := peercert.Provision(c.pki, []uint64{id}, "127.0.0.1")
	if err != nil {
		c.t.Fatal(err)
	}
	return files[id].Env()
}

// newCluster starts size validators in mode; MOCK needs no chain. extraEnv
// adds settings to every validator.
func newCluster(t testing.TB, size int, mode string, extraEnv ...string) *cluster {
	t.Helper()
	return newClusterEnv(t, size, mode, nil, extraEnv...)
}

// newClusterEnv is newCluster where nodeEnv, when not nil, adds settings to
// each validator after all the others, so they override them (exec keeps the
// last value of a key).
func newClusterEnv(t testing.TB, size int, mode string, nodeEnv func(n *node, nodes []*node) []string, extraEnv ...string) *cluster {
	t.Helper()
	c := &cluster{t: t}
	if mode != "MOCK" {
		c.net = harness.StartBacking(t, harness.Options{})
	}
	dir := t.TempDir()
	c.pki = filepath.Join(dir, "pki")
	var initial []string
	releases := map[*node][]func(){}
	for i := 1; i <= size; i++ {
		httpAddr, releaseHTTP := reserveAddr(t)
		peerAddr, releasePeer := reserveAddr(t)
		n := &node{id: uint64(i), httpAddr: httpAddr, peerAddr: peerAddr, dataDir: filepath.Join(dir, "v"+strconv.Itoa(i)),
			logPath: filepath.Join(dir, "v"+strconv.Itoa(i)+".log")}
		releases[n] = []func(){releaseHTTP, releasePeer}
		t.Cleanup(func() { releaseHTTP(); releasePeer() }) // if the test stops before the node starts
		initial = append(initial, fmt.Sprintf("%d=%s=%s", n.id, n.peerAddr, n.url()))
		c.nodes = append(c.nodes, n)
	}
	for _, n := range c.nodes {
		n.env = append(os.Environ(),
			"SVC_VALIDATOR_MODE="+mode,
			"SVC_VALIDATOR_OPERATOR_TOKENS="+operatorToken,
			"SVC_VALIDATOR_NODE_ID="+strconv.FormatUint(n.id, 10),
			"SVC_VALIDATOR_DATA_DIR="+n.dataDir,
			"SVC_VALIDATOR_HTTP_ADDR="+n.httpAddr,
			"SVC_VALIDATOR_PEER_ADDR="+n.peerAddr,
			"SVC_VALIDATOR_PAYMENT_WAIT=10s",
			"SVC_VALIDATOR_TICK_INTERVAL=100ms",
		)
		n.env = append(n.env, c.peerTLSEnv(n.id)...)
		n.env = append(n.env, extraEnv...)
		if size > 1 {
			n.env = append(n.env, "SVC_VALIDATOR_INITIAL_CLUSTER="+strings.Join(initial, ","))
		}
		if c.net != nil {
			n.env = append(n.env,
				"SVC_VALIDATOR_CHAIN_ID=1337",
				"SVC_VALIDATOR_CONTRACT_ADDRESS="+c.net.Chain.PaymentLedger.Hex(),
				"SVC_VALIDATOR_CONFIRMATIONS=1",
			)
			n.env = append(n.env, c.net.ValidatorNATSEnv()...)
		}
		if nodeEnv != nil {
			n.env = append(n.env, nodeEnv(n, c.nodes)...)
		}
		for _, release := range releases[n] {
			release()
		}
		c.start(n)
	}
	t.Cleanup(func() {
		for _, n := range c.nodes {
			c.kill(n)
		}
		if t.Failed() {
			for _, n := range c.nodes {
				if b, err := os.ReadFile(n.logPath); err == nil {
					t.Logf("log of validator %d (last 4 KiB):\n%s", n.id, tail(b, 4096))
				}
			}
		}
	})
	return c
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

func (c *cluster) start(n *node) {
	c.t.Helper()
	logf, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		c.t.Fatal(err)
	}
	n.cmd = exec.Command(validatorBin)
	n.cmd.Env, n.cmd.Stdout, n.cmd.Stderr = n.env, logf, logf
	// A validator dies with the test process, also when the test binary is
	// killed (a timeout, Ctrl-C) before its cleanups run.
	n.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := n.cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	n.exited = make(chan struct{})
	go func() {
		_ = n.cmd.Wait()
		logf.Close()
		close(n.exited)
	}()
}

// kill sends SIGKILL and waits for the process to be gone.
func (c *cluster) kill(n *node) {
	if n.cmd == nil || n.cmd.Process == nil {
		return
	}
	select {
	case <-n.exited:
		return
	default:
	}
	_ = n.cmd.Process.Signal(syscall.SIGKILL)
	<-n.exited
}

// client returns a client of node n.
func (c *cluster) client(n *node) *ledgerclient.Client {
	return &ledgerclient.Client{BaseURL: n.url(), HTTP: &http.Client{Timeout: 10 * time.Second}}
}

// waitLeader waits until some node reports itself leader and returns it.
func (c *cluster) waitLeader() *node { return c.waitLeaderAmong(c.nodes) }

func get(u string, out any) error { return harness.GetJSON(nil, 2*time.Second, u, out) }
