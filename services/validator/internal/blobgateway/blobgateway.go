// Package blobgateway is the validator's side of the IPFS gateway it is
// configured with. Validators keep only the CIDs of binaries; the bytes
// are read through the gateway, verified block by block against the CID
// (Reader, reader.go), to check an upload and to serve /api/blob
// (docs/adr/0037). Whether the gateway answers is a figure the operators'
// blob-store view needs, which the Checker keeps.
//
// A Checker asks the gateway now and then for one tiny well-known object
// and keeps the outcome of the last check. It runs beside the validator,
// never on the apply or request path: a view reads the last outcome without
// waiting, and a gateway that does not answer is reported, never fatal.
package blobgateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// ProbeCID is the object a check asks for: the empty UnixFS directory. Its
// block is 4 bytes and IPFS nodes hold it from their first start (it is the
// root of a new node's file system), so the answer measures the gateway, not
// a search of the network for content.
const ProbeCID = "bafybeiczsscdsbs7ffqz55asqdf3smv6klcw3gofszvwlyarci47bgf354"

// Defaults of Config.
const (
	DefaultInterval = time.Minute
	DefaultTimeout  = 10 * time.Second
)

// rawBlock asks for the block itself (the trustless gateway response
// format): a trustless gateway answers nothing else, and a full gateway
// then sends 4 bytes rather than a directory listing, or a redirect to one.
const rawBlock = "application/vnd.ipld.raw"

// maxProbeBody bounds what a check reads of an answer: enough for the block
// or a gateway's small listing page, which is read so the connection can be
// reused.
const maxProbeBody = 64 << 10

// redactedCredential replaces a credential in a published URL, as net/url's
// URL.Redacted does.
const redactedCredential = "xxxxx"

// ParseBase checks a gateway's base URL: http or https, with a host, and
// neither query nor fragment, since the path /ipfs/<cid> is appended to it.
// A trailing slash is dropped. Its errors never repeat the URL, which may
// carry credentials.
func ParseBase(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("not a URL (%v); give the gateway's base, such as https://ipfs.example", err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("the scheme is %q; give an http or https URL, such as https://ipfs.example", u.Scheme)
	case u.Hostname() == "":
		return nil, errors.New("the URL names no host; give the gateway's base, such as https://ipfs.example")
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return nil, errors.New("the URL has a query or a fragment; give the base that /ipfs/<cid> is appended to")
	}
	u.Path, u.RawPath = strings.TrimRight(u.Path, "/"), strings.TrimRight(u.RawPath, "/")
	if strings.HasSuffix(u.Path, "/ipfs") {
		return nil, errors.New("the URL ends in /ipfs; give the gateway's base, which /ipfs/<cid> is appended to")
	}
	return u, nil
}

// Redacted is u as it may be published: its password, or its user name
// when that comes alone (a token), replaced.
func Redacted(u *url.URL) string {
	if u.User == nil {
		return u.String()
	}
	r := *u
	if _, ok := u.User.Password(); ok {
		r.User = url.UserPassword(u.User.Username(), redactedCredential)
	} else {
		r.User = url.User(redactedCredential)
	}
	return r.String()
}

// objectURL is the gateway's address of the object cid.
func objectURL(base *url.URL, cid string) string {
	return base.JoinPath("ipfs", cid).String()
}

// Check is the outcome of one check.
type Check struct {
	// At is when the check began.
	At time.Time
	// OK: the gateway answered 2xx within the timeout.
	OK bool
	// StatusCode is the gateway's HTTP status; 0 when no answer came.
	StatusCode int
	// Latency is the time from the request to the end of the answer's
	// body, or to the failure.
	Latency time.Duration
	// Err says why the check failed; "" when it did not.
	Err string
}

// Config is what a Checker needs. Client and Now are the caller's, so that
// tests and the validator decide the transport and the clock.
type Config struct {
	// BaseURL is the gateway's base URL, as ParseBase accepts it.
	BaseURL string
	// Interval is the time between checks; 0: DefaultInterval.
	Interval time.Duration
	// Timeout bounds one check; 0: DefaultTimeout, or Interval if shorter.
	Timeout time.Duration
	Client  *http.Client
	Now     func() time.Time
	// Log receives a line when the gateway starts or stops answering; nil:
	// none.
	Log *zap.Logger
}

// Checker checks one gateway. Its methods may be called concurrently.
type Checker struct {
	base     *url.URL
	probe    string
	interval time.Duration
	timeout  time.Duration
	client   *http.Client
	now      func() time.Time
	log      *zap.Logger
	last     atomic.Pointer[Check]
}

// New returns a Checker of cfg's gateway; it checks nothing until Run or
// CheckNow.
func New(cfg Config) (*Checker, error) {
	base, err := ParseBase(cfg.BaseURL)
	if err != nil {
		return nil, fmt.Errorf("blobgateway: %w", err)
	}
	if cfg.Client == nil || cfg.Now == nil {
		return nil, errors.New("blobgateway: Config.Client and Config.Now are required")
	}
	if cfg.Interval < 0 || cfg.Timeout < 0 {
		return nil, errors.New("blobgateway: Config.Interval and Config.Timeout must not be negative")
	}
	interval := cfg.Interval
	if interval == 0 {
		interval = DefaultInterval
	}
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = min(DefaultTimeout, interval)
	}
	log := cfg.Log
	if log == nil {
		log = zap.NewNop()
	}
	return &Checker{base: base, probe: objectURL(base, ProbeCID), interval: interval, timeout: timeout, client: cfg.Client,
		now: cfg.Now, log: log}, nil
}

// URL is the gateway's base URL as it may be published (Redacted).
func (c *Checker) URL() string { return Redacted(c.base) }

// Interval is the time between checks.
func (c *Checker) Interval() time.Duration { return c.interval }

// Last is the outcome of the newest check; false before the first ended.
func (c *Checker) Last() (Check, bool) {
	if p := c.last.Load(); p != nil {
		return *p, true
	}
	return Check{}, false
}

// Run checks the gateway at once and then every interval, until ctx ends.
func (c *Checker) Run(ctx context.Context) {
	tick := time.NewTicker(c.interval)
	defer tick.Stop()
	for {
		prev, checked := c.Last()
		cur := c.CheckNow(ctx)
		if ctx.Err() != nil {
			return
		}
		switch {
		case cur.OK && (!checked || !prev.OK):
			c.log.Info("IPFS gateway answers", zap.String("gateway", c.URL()), zap.Duration("latency", cur.Latency))
		case !cur.OK && (!checked || prev.OK):
			c.log.Warn("IPFS gateway check failed", zap.String("gateway", c.URL()), zap.Int("status", cur.StatusCode),
				zap.String("error", cur.Err))
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// CheckNow asks the gateway for ProbeCID once, within the timeout, and
// keeps the outcome as the last check, unless ctx ended meanwhile: a check
// cut short by the validator stopping says nothing of the gateway.
func (c *Checker) CheckNow(ctx context.Context) Check {
	start := c.now()
	out := Check{At: start}
	err := c.ask(ctx, &out)
	out.Latency = c.now().Sub(start)
	switch {
	case err != nil:
		out.Err = c.describe(err)
	case out.StatusCode < 200 || out.StatusCode > 299:
		out.Err = fmt.Sprintf("the gateway answered %d %s", out.StatusCode, http.StatusText(out.StatusCode))
	default:
		out.OK = true
	}
	if ctx.Err() == nil {
		c.last.Store(&out)
	}
	return out
}

// ask sends the request and reads the answer, recording its status.
func (c *Checker) ask(ctx context.Context, out *Check) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.probe, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", rawBlock)
	resp, err := c.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	out.StatusCode = resp.StatusCode
	_, err = io.Copy(io.Discard, io.LimitReader(resp.Body, maxProbeBody))
	return err
}

// describe is an error as a check reports it: without the URL, which the
// client's errors repeat and which may carry credentials.
func (c *Checker) describe(err error) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Sprintf("no answer within %s", c.timeout)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return err.Error()
}

// Probe checks the gateway now (CheckNow): the deep health check of the
// gateway clients fetch binaries from.
func (c *Checker) Probe(ctx context.Context) (string, error) {
	check := c.CheckNow(ctx)
	if !check.OK {
		return "", fmt.Errorf("IPFS gateway %s: %s", c.URL(), check.Err)
	}
	return fmt.Sprintf("IPFS gateway %s answered %d", c.URL(), check.StatusCode), nil
}
