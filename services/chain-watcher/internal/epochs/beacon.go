package epochs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/contentledger/contentledger/pkg/payment"
)

// SlotsPerEpoch and SecondsPerSlot are Ethereum's beacon chain figures,
// for reference: the source reads the node's own (/eth/v1/config/spec), so
// a network with other figures converts correctly.
const (
	SlotsPerEpoch  = 32
	SecondsPerSlot = 12
)

// maxBeaconAnswer bounds a beacon API answer read into memory: the spec
// runs to some kilobytes, the other answers are under one.
const maxBeaconAnswer = 1 << 20

// Beacon reads the epochs from a beacon node's standard API and converts
// them to the block-time numbering (epoch = unix time / length, ADR 0018
// and 0022), so that a deployment may switch between the two sources: the
// validators never move an epoch back, so both must count alike.
//
//   - current: the epoch of the head slot's start time, genesis + slot ×
//     seconds per slot (/eth/v1/beacon/headers/head). That is the head
//     block's timestamp, so it equals the block-time source's figure.
//   - finalized: from the head state's finalized checkpoint
//     (/eth/v1/beacon/states/head/finality_checkpoints), beacon epoch f,
//     whose block is at the first slot of f, time t = genesis + f × slots
//     per epoch × seconds per slot: that block and its ancestors are final,
//     the later slots of f not yet. The finalized epoch is the newest one
//     no later block can fall in, (t + 1) / length − 1: the block-time
//     source's rule applied to the same block (the execution chain's
//     finalized block is that checkpoint's block).
//
// The genesis time (/eth/v1/beacon/genesis) and the slot figures
// (/eth/v1/config/spec) are read once, at the first reading that gets
// them. It is not safe for concurrent use.
type Beacon struct {
	base   string
	name   string // the URL shown in errors: scheme and host only
	client *http.Client
	length uint64 // seconds

	chain *beaconChain // nil until read
}

// beaconChain is the beacon chain's constant figures.
type beaconChain struct {
	genesis        uint64 // unix seconds
	secondsPerSlot uint64
	slotsPerEpoch  uint64
}

// BeaconOption configures NewBeacon.
type BeaconOption func(*beaconOptions)

type beaconOptions struct {
	length time.Duration
}

// WithEpochLength sets the length of the epochs the beacon's are converted
// to (EPOCH_LENGTH), whole seconds; DefaultLength otherwise.
func WithEpochLength(d time.Duration) BeaconOption {
	return func(o *beaconOptions) { o.length = d }
}

// NewBeacon returns a beacon source for the node at rawURL (http or https,
// optionally with a path prefix); each request is bounded by timeout.
func NewBeacon(rawURL string, timeout time.Duration, opts ...BeaconOption) (*Beacon, error) {
	o := beaconOptions{length: DefaultLength}
	for _, opt := range opts {
		opt(&o)
	}
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		// Not quoted: providers put API keys in the URL.
		return nil, errors.New("epochs: the beacon URL is not an http(s) URL with a host")
	}
	if timeout <= 0 {
		return nil, fmt.Errorf("epochs: beacon timeout %s must be positive", timeout)
	}
	if o.length < time.Second || o.length%time.Second != 0 {
		return nil, fmt.Errorf("epochs: epoch length %s is not a whole number of seconds", o.length)
	}
	return &Beacon{
		base: rawURL, name: u.Scheme + "://" + u.Host, client: &http.Client{Timeout: timeout},
		length: uint64(o.length / time.Second),
	}, nil
}

// Read asks for the finality checkpoints first and the head second, so
// that the head is the newer of the two answers and the finalized epoch
// cannot be after it; an answer where it is anyway is refused.
func (b *Beacon) Read(ctx context.Context) (payment.EpochUpdate, error) {
	chain, err := b.readChain(ctx)
	if err != nil {
		return payment.EpochUpdate{}, err
	}
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
	headEpoch := uint64(*slot) / chain.slotsPerEpoch
	if uint64(*fin) > headEpoch {
		return payment.EpochUpdate{}, fmt.Errorf("epochs: beacon %s: finalized epoch %d after the head's epoch %d", b.name, *fin, headEpoch)
	}
	headTime, ok := chain.slotTime(uint64(*slot))
	if !ok {
		return payment.EpochUpdate{}, fmt.Errorf("epochs: beacon %s: head slot %d is beyond any time", b.name, *slot)
	}
	// The checkpoint's slot is at most the head's (checked above), so its
	// time is too.
	finTime, _ := chain.slotTime(uint64(*fin) * chain.slotsPerEpoch)
	current := headTime / b.length
	return payment.EpochUpdate{
		Current:   current,
		Finalized: min(finalEpoch(finTime, b.length), current),
		Source:    payment.EpochSourceBeacon,
		Slot:      uint64(*slot),
	}, nil
}

// slotTime is the unix time slot starts at; ok is false when that does not
// fit in 64 bits (a node answering nonsense).
func (c *beaconChain) slotTime(slot uint64) (uint64, bool) {
	hi, offset := bits.Mul64(slot, c.secondsPerSlot)
	t, carry := bits.Add64(c.genesis, offset, 0)
	return t, hi == 0 && carry == 0
}

// readChain returns the beacon chain's genesis time and slot figures,
// asking the node until it has answered them once.
func (b *Beacon) readChain(ctx context.Context) (*beaconChain, error) {
	if b.chain != nil {
		return b.chain, nil
	}
	var genesis struct {
		Data struct {
			GenesisTime *quotedUint `json:"genesis_time"`
		} `json:"data"`
	}
	if err := b.get(ctx, "eth/v1/beacon/genesis", &genesis); err != nil {
		return nil, err
	}
	var spec struct {
		Data struct {
			SecondsPerSlot *quotedUint `json:"SECONDS_PER_SLOT"`
			SlotsPerEpoch  *quotedUint `json:"SLOTS_PER_EPOCH"`
		} `json:"data"`
	}
	if err := b.get(ctx, "eth/v1/config/spec", &spec); err != nil {
		return nil, err
	}
	g, sps, spe := genesis.Data.GenesisTime, spec.Data.SecondsPerSlot, spec.Data.SlotsPerEpoch
	switch {
	case g == nil:
		return nil, fmt.Errorf("epochs: beacon %s: genesis answer without genesis_time", b.name)
	case sps == nil || spe == nil || *sps == 0 || *spe == 0:
		return nil, fmt.Errorf("epochs: beacon %s: spec answer without positive SECONDS_PER_SLOT and SLOTS_PER_EPOCH", b.name)
	}
	b.chain = &beaconChain{genesis: uint64(*g), secondsPerSlot: uint64(*sps), slotsPerEpoch: uint64(*spe)}
	return b.chain, nil
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
