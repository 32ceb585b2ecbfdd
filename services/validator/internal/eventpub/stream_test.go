package eventpub_test

import (
	"strings"
	"testing"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/services/validator/internal/eventpub"
)

func TestSubject(t *testing.T) {
	for _, c := range []struct {
		typ, wallet, want string
	}{
		{"content", "0x70997970C51812dc3A010C7d01b50e0d17dc79C8", "ledger.events.content.0x70997970c51812dc3a010c7d01b50e0d17dc79c8"},
		{"delete", "0x70997970c51812dc3a010c7d01b50e0d17dc79c8", "ledger.events.delete.0x70997970c51812dc3a010c7d01b50e0d17dc79c8"},
		{"consensus", "", "ledger.events.consensus._"},
		{"binary", "0x1234", "ledger.events.binary._"},
		{"binary", "0x70997970c51812dc3a010c7d01b50e0d17dc79zz", "ledger.events.binary._"},
		{"a.b", "0x70997970c51812dc3a010c7d01b50e0d17dc79c8", "ledger.events._.0x70997970c51812dc3a010c7d01b50e0d17dc79c8"},
		{"", "", "ledger.events._._"},
		{"*", ">", "ledger.events._._"},
	} {
		if got := eventpub.Subject(&ledgerpb.Event{Type: c.typ, Wallet: c.wallet}); got != c.want {
			t.Errorf("Subject(%q, %q) = %q, want %q", c.typ, c.wallet, got, c.want)
		}
	}
}

func TestParseMsgID(t *testing.T) {
	for s, want := range map[string]uint64{"1": 1, "42": 42, "18446744073709551615": 1<<64 - 1} {
		if id, ok := eventpub.ParseMsgID(s); !ok || id != want {
			t.Errorf("ParseMsgID(%q) = %d, %t", s, id, ok)
		}
	}
	for _, s := range []string{"", "0", "01", "+1", "-1", " 1", "1.0", "18446744073709551616", "0x10", "1337:0xab:1"} {
		if id, ok := eventpub.ParseMsgID(s); ok {
			t.Errorf("ParseMsgID(%q) = %d, accepted", s, id)
		}
	}
}

// FuzzParseMsgID: message ids come from the stream, where anyone may
// publish; only the canonical form of a positive id is taken.
func FuzzParseMsgID(f *testing.F) {
	for _, s := range []string{"1", "0", "007", "18446744073709551615", "x", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, ok := eventpub.ParseMsgID(s)
		if ok && (id == 0 || eventpub.MsgID(id) != s) {
			t.Fatalf("ParseMsgID(%q) = %d, not canonical", s, id)
		}
		if !ok && id != 0 {
			t.Fatalf("ParseMsgID(%q) refused with id %d", s, id)
		}
	})
}

// FuzzSubject: whatever an event holds, its subject has exactly four
// tokens, none empty or a wildcard, under the stream's prefix.
func FuzzSubject(f *testing.F) {
	f.Add("content", "0x70997970c51812dc3a010c7d01b50e0d17dc79c8")
	f.Add("a.b", "0x7099 7970")
	f.Add("", "")
	f.Fuzz(func(t *testing.T, typ, wallet string) {
		s := eventpub.Subject(&ledgerpb.Event{Type: typ, Wallet: wallet})
		tokens := strings.Split(s, ".")
		if len(tokens) != 4 || tokens[0] != "ledger" || tokens[1] != "events" {
			t.Fatalf("subject %q", s)
		}
		for _, tok := range tokens {
			if tok == "" || tok == "*" || tok == ">" || strings.ContainsAny(tok, " \t\r\n*>") {
				t.Fatalf("subject %q has token %q", s, tok)
			}
		}
	})
}
