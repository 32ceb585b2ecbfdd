package payment

import (
	"errors"
	"testing"
)

func TestEpochUpdateWireForm(t *testing.T) {
	u := EpochUpdate{ChainID: 1337, Current: 10, Finalized: 8, Source: EpochSourceBlockTime, BlockNumber: 77, ObservedAtMs: 1_700_000_000_123}
	b, err := u.Encode()
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"chainId":1337,"current":10,"finalized":8,"source":"block-time","blockNumber":77,"observedAtMs":1700000000123}`
	if string(b) != want {
		t.Fatalf("wire form\n got %s\nwant %s", b, want)
	}
	back, err := DecodeEpochUpdate(b)
	if err != nil || back != u {
		t.Fatalf("decoded %+v, %v", back, err)
	}
	if got := u.MsgID(); got != "1337:epochs:block-time:10:8" {
		t.Fatalf("message id %q", got)
	}
	if EpochSubject(1337) != "chain.1337.epochs" {
		t.Fatalf("subject %q", EpochSubject(1337))
	}
	// A field a newer watcher adds is ignored.
	if got, err := DecodeEpochUpdate([]byte(`{"chainId":1,"current":3,"finalized":3,"source":"beacon","slot":96,"root":"0x01"}`)); err != nil || got.Slot != 96 {
		t.Fatalf("with an unknown field: %+v, %v", got, err)
	}

	for name, data := range map[string]string{
		"finalized after current": `{"chainId":1,"current":3,"finalized":4,"source":"beacon"}`,
		"no chain":                `{"current":3,"finalized":1,"source":"beacon"}`,
		"no source":               `{"chainId":1,"current":3,"finalized":1}`,
		"source with a space":     `{"chainId":1,"current":3,"finalized":1,"source":"a b"}`,
		"negative epoch":          `{"chainId":1,"current":-3,"finalized":1,"source":"beacon"}`,
		"epoch beyond 64 bits":    `{"chainId":1,"current":18446744073709551616,"finalized":1,"source":"beacon"}`,
		"epoch as a string":       `{"chainId":1,"current":"3","finalized":1,"source":"beacon"}`,
		"not JSON":                `chain 1 epoch 3`,
		"trailing data":           `{"chainId":1,"current":3,"finalized":1,"source":"beacon"}x`,
	} {
		if u, err := DecodeEpochUpdate([]byte(data)); !errors.Is(err, ErrMalformedEpochUpdate) {
			t.Errorf("%s: decoded %+v, %v", name, u, err)
		}
	}
	if _, err := (EpochUpdate{ChainID: 1, Current: 1, Finalized: 2, Source: EpochSourceBeacon}).Encode(); !errors.Is(err, ErrMalformedEpochUpdate) {
		t.Errorf("an invalid update was encoded: %v", err)
	}
}
