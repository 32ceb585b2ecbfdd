package epochs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/contentledger/contentledger/pkg/payment"
)

// SlotsPerEpoch is the beacon chain's epoch in slots.
const SlotsPerEpoch = 32

// maxBeaconAnswer bounds a beacon API answer read into memory: the two
// answers asked for are well under a kilobyte.
const maxBeaconAnswer = 1 << 20

// Beacon reads the epochs from a beacon node's standard API: the current
// epoch is the head slot / 32 (/eth/v1/beacon/headers/head), the finalized
// one the epoch of the head state's finalized checkpoint
// (/eth/v1/beacon/states/head/finality_checkpoints), as the beacon chain
// names it.
//
// These are beacon epochs, counted from the beacon chain's genesis: not
// the block-time numbering (unix time / length). A deployment uses one
// source for good; see DESIGN.md.
type Beacon struct {
	base   string
	name   string // the URL shown in errors: scheme and host only
	client *http.Client
}

// NewBeacon returns a beacon source for the node at rawURL (http or https,
// optionally with a path prefix); each request is bounded by timeout.
func NewBeacon(rawURL string, timeout time.Duration) (*Beacon, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		// Not quoted: providers put API keys in the URL.
		return nil, errors.New("epochs: the beacon URL is not an http(s) URL with a host")
	}
	if timeout <= 0 {
		return nil, fmt.Errorf("epochs: beacon timeout %s must be positive", timeout)
	}
	return &Beacon{base: rawURL, name: u.Scheme + "://" + u.Host, client: &http.Client{Timeout: timeout}}, nil
}

// Read asks for the finality checkpoints first and the head second, so
// that the head is the newer of the two answers and the finalized epoch
// cannot be after it; an answer where it is anyway is refused.
func (b *Beacon) Read(ctx context.Context) (payment.EpochUpdate, error) {
	var checkpoints struct {
		Data struct {
			Finalized struct {
				Epoch *quotedUint `json:"epoch"`
			} `json:"finalized"`
		} `json:"data"`
	}
	if err := b.get(ctx, "eth/v1/beacon/states/head/finality_checkpoints", &checkpoints); err != nil {
		return payment.EpochUpdate{}, err
	}
	var header struct {
		Data struct {
			Header struct {
				Message struct {
					Slot *quotedUint `json:"slot"`
				} `json:"message"`
			} `json:"header"`
		} `json:"data"`
	}
	if err := b.get(ctx, "eth/v1/beacon/headers/head", &header); err != nil {
		return payment.EpochUpdate{}, err
	}
	fin, slot := checkpoints.Data.Finalized.Epoch, header.Data.Header.Message.Slot
	if fin == nil || slot == nil {
		return payment.EpochUpdate{}, fmt.Errorf("epochs: beacon %s: answer without the finalized epoch or the head slot", b.name)
	}
	u := payment.EpochUpdate{Current: uint64(*slot) / SlotsPerEpoch, Finalized: uint64(*fin), Source: payment.EpochSourceBeacon, Slot: uint64(*slot)}
	if u.Finalized > u.Current {
		return payment.EpochUpdate{}, fmt.Errorf("epochs: beacon %s: finalized epoch %d after the head's epoch %d", b.name, u.Finalized, u.Current)
	}
	return u, nil
}

// get fetches path under the base URL and decodes its JSON answer into v.
func (b *Beacon) get(ctx context.Context, path string, v any) error {
	target, err := url.JoinPath(b.base, path)
	if err != nil {
		return fmt.Errorf("epochs: beacon %s: %s: bad URL", b.name, path)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return fmt.Errorf("epochs: beacon %s: %s: bad URL", b.name, path)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := b.client.Do(req)
	if err != nil {
		// The URL error quotes the URL, which may hold a key: keep only
		// what went wrong.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("epochs: beacon %s: %s: %w", b.name, path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBeaconAnswer))
	if err != nil {
		return fmt.Errorf("epochs: beacon %s: %s: %w", b.name, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("epochs: beacon %s: %s: HTTP %d: %s", b.name, path, resp.StatusCode, bytes.TrimSpace(body[:min(len(body), 200)]))
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("epochs: beacon %s: %s: %w", b.name, path, err)
	}
	return nil
}

// quotedUint is a beacon API integer: a decimal string, as the API encodes
// every uint64; a bare JSON number is taken too.
type quotedUint uint64

func (q *quotedUint) UnmarshalJSON(data []byte) error {
	s := string(data)
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		s = s[1 : len(s)-1]
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return fmt.Errorf("not an unsigned integer: %s", data)
	}
	*q = quotedUint(n)
	return nil
}
