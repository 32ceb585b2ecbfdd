package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/contentledger/contentledger/tests/harness"
)

// errNoEtcd marks an etcd that cannot be found or installed: the etcd
// sub-benchmarks are skipped, not failed.
var errNoEtcd = errors.New("etcd is not available")

// etcdBinary finds etcd: $ETCD_BIN, then etcd on PATH, then installs
// Debian's etcd-server when running as root with apt-get.
func etcdBinary() (string, error) {
	if bin := os.Getenv("ETCD_BIN"); bin != "" {
		return bin, nil
	}
	if bin, err := exec.LookPath("etcd"); err == nil {
		return bin, nil
	}
	if _, err := exec.LookPath("apt-get"); err != nil || os.Geteuid() != 0 {
		return "", fmt.Errorf("%w: no etcd on PATH and no apt-get as root to install it; install Debian's etcd-server or set ETCD_BIN", errNoEtcd)
	}
	install := func(args ...string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("apt-get %s: %v: %s", strings.Join(args, " "), err, tailOf(out, 512))
		}
		return nil
	}
	err := install("install", "-y", "etcd-server")
	if err != nil {
		if err = install("update"); err == nil {
			err = install("install", "-y", "etcd-server")
		}
	}
	if err != nil {
		return "", fmt.Errorf("%w: installing etcd-server: %v", errNoEtcd, err)
	}
	bin, err := exec.LookPath("etcd")
	if err != nil {
		return "", fmt.Errorf("%w: etcd-server is installed but etcd is not on PATH", errNoEtcd)
	}
	return bin, nil
}

func tailOf(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return strings.TrimSpace(string(b))
}

// etcdCluster is three etcd members on loopback with their default
// durability (fsync of the WAL on every Ready). Clients talk to the leader,
// as they do to the validators, over one shared gRPC connection (the
// client's normal use; HTTP/2 multiplexes the concurrent calls).
type etcdCluster struct {
	members []*etcdMember
	leader  *etcdMember
	cli     *clientv3.Client
	value   string
	run     atomic.Int64
}

type etcdMember struct {
	*proc
	clientURL string
}

func startEtcd(cleanup func(func()), dir string) (*etcdCluster, error) {
	bin, err := etcdBinary()
	if err != nil {
		return nil, err
	}
	type urls struct{ client, peer string }
	var us []urls
	var initial []string
	for i := 1; i <= 3; i++ {
		c, err1 := harness.FreeAddr()
		p, err2 := harness.FreeAddr()
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("free ports: %v %v", err1, err2)
		}
		us = append(us, urls{"http://" + c, "http://" + p})
		initial = append(initial, fmt.Sprintf("e%d=http://%s", i, p))
	}
	e := &etcdCluster{value: string(message1KiB())}
	var endpoints []string
	for i, u := range us {
		name := fmt.Sprintf("e%d", i+1)
		args := []string{
			"--name", name, "--data-dir", filepath.Join(dir, name),
			"--listen-client-urls", u.client, "--advertise-client-urls", u.client,
			"--listen-peer-urls", u.peer, "--initial-advertise-peer-urls", u.peer,
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new",
			"--initial-cluster-token", "contentledger-bench", "--logger", "zap", "--log-level", "warn",
		}
		p, err := startProc(cleanup, "etcd "+name, bin, args, nil, filepath.Join(dir, name+".log"))
		if err != nil {
			return nil, err
		}
		e.members = append(e.members, &etcdMember{proc: p, clientURL: u.client})
		endpoints = append(endpoints, u.client)
	}
	probe, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, err
	}
	defer probe.Close()
	deadline := time.Now().Add(60 * time.Second)
	for e.leader == nil {
		for _, m := range e.members {
			if err := m.alive(); err != nil {
				return nil, err
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			st, err := probe.Status(ctx, m.clientURL)
			cancel()
			if err == nil && st.Leader != 0 && st.Leader == st.Header.MemberId {
				e.leader = m
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no etcd member became leader in 60s (logs in %s)", dir)
		}
		time.Sleep(100 * time.Millisecond)
	}
	e.cli, err = clientv3.New(clientv3.Config{Endpoints: []string{e.leader.clientURL}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, err
	}
	cleanup(func() { e.cli.Close() })
	return e, nil
}

// prepare builds n unique keys before the timer; each operation puts the
// 1 KiB value under one of them. A Put returns once the entry is committed
// and applied.
func (e *etcdCluster) prepare(_ *testing.B, n int) func(ctx context.Context, i int) error {
	prefix := fmt.Sprintf("bench/%06d/", e.run.Add(1))
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s%09d", prefix, i)
	}
	return func(ctx context.Context, i int) error {
		_, err := e.cli.Put(ctx, keys[i], e.value)
		return err
	}
}

func (e *etcdCluster) commitIndex(ctx context.Context) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	st, err := e.cli.Status(ctx, e.leader.clientURL)
	if err != nil {
		return 0, err
	}
	return st.RaftIndex, nil
}

func (e *etcdCluster) servers() (*proc, []*proc) {
	all := make([]*proc, len(e.members))
	for i, m := range e.members {
		all[i] = m.proc
	}
	return e.leader.proc, all
}
