package access

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const (
	opsToken      = "ops-read-token-0123456789"
	operatorToken = "operator-token-0123456789"
	allToken      = "all-lanes-token-0123456789"
)

func TestCheck(t *testing.T) {
	var tk Tokens
	tk.Add(OpsRead, opsToken)
	tk.Add(Operator, operatorToken)
	tk.Add(OpsRead, allToken)
	tk.Add(Operator, allToken)
	for _, tc := range []struct {
		lane  Lane
		token string
		want  Decision
	}{
		{Submit, "", Open},
		{Submit, "anything", Open},
		{OpsRead, "", Missing},
		{OpsRead, opsToken, Granted},
		{OpsRead, allToken, Granted},
		{OpsRead, operatorToken, Denied},
		{Operator, opsToken, Denied},
		{Operator, operatorToken, Granted},
		{Operator, operatorToken + "x", Denied},
		{Operator, operatorToken[:len(operatorToken)-1], Denied},
	} {
		if got := tk.Check(tc.lane, tc.token); got != tc.want {
			t.Errorf("Check(%s, %q) = %d, want %d", tc.lane, tc.token, got, tc.want)
		}
	}
	if tk.First(Submit) != "" || tk.First(OpsRead) != opsToken {
		t.Fatalf("First: %q %q", tk.First(Submit), tk.First(OpsRead))
	}
}

func TestParseFile(t *testing.T) {
	tk, err := ParseFile([]byte("# comment\n\nops-read "+opsToken+"\noperator,ops-read "+operatorToken+"\nall  "+allToken+"\n"), StrongToken)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		lane  Lane
		token string
		want  Decision
	}{
		{OpsRead, opsToken, Granted}, {Operator, opsToken, Denied},
		{Operator, operatorToken, Granted}, {OpsRead, operatorToken, Granted}, {Submit, operatorToken, Denied},
		{Submit, allToken, Granted}, {Mock, allToken, Granted},
	} {
		if got := tk.Check(tc.lane, tc.token); got != tc.want {
			t.Errorf("Check(%s, %q) = %d, want %d", tc.lane, tc.token, got, tc.want)
		}
	}
	for _, bad := range []string{
		"operator", "admin " + opsToken, "operator short", "operator " + opsToken + " extra", "operator,,ops-read " + opsToken,
	} {
		_, err := ParseFile([]byte(bad), StrongToken)
		if err == nil {
			t.Errorf("%q: no error", bad)
			continue
		}
		if strings.Contains(err.Error(), opsToken) || strings.Contains(err.Error(), "short") {
			t.Errorf("%q: the error names the token: %v", bad, err)
		}
	}
}

func TestParseList(t *testing.T) {
	tk, err := ParseList(Operator, " "+operatorToken+", ,"+allToken, StrongToken)
	if err != nil || tk.Check(Operator, allToken) != Granted || tk.Check(Operator, operatorToken) != Granted || tk.Guarded(OpsRead) {
		t.Fatalf("%v %+v", err, tk)
	}
	if _, err := ParseList(Operator, "s3cret", StrongToken); err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("a weak token: %v", err)
	}
	if _, err := ParseList(Operator, "s3cret", PrintableToken); err != nil {
		t.Fatalf("MOCK accepts a short token: %v", err)
	}
}

// TestReload: a changed file is put in force; one that would open a
// guarded lane, or does not parse, is refused and the tokens stay.
func TestReload(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tokens")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("operator " + operatorToken + "\n")
	var static Tokens
	static.Add(OpsRead, opsToken)
	g, err := NewGate(Config{Static: static, File: file, Check: StrongToken, FileCheck: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if g.Check(Operator, operatorToken) != Granted || g.Check(OpsRead, opsToken) != Granted {
		t.Fatal("initial tokens")
	}

	// Rotation: the new token is in, the old one out, the static one stays.
	write("operator " + allToken + "\n")
	if err := g.Reload(); err != nil {
		t.Fatal(err)
	}
	if g.Check(Operator, allToken) != Granted || g.Check(Operator, operatorToken) != Denied || g.Check(OpsRead, opsToken) != Granted {
		t.Fatal("rotated tokens")
	}

	for _, bad := range []string{"", "# emptied\n", "operator short\n", "nonsense"} {
		write(bad)
		err := g.Reload()
		if err == nil {
			t.Fatalf("%q: reloaded", bad)
		}
		if bad == "" && !errors.Is(err, ErrWouldOpen) {
			t.Fatalf("emptied file: %v", err)
		}
		if g.Check(Operator, allToken) != Granted {
			t.Fatalf("%q: the tokens in force changed", bad)
		}
	}

	// Run picks a change up by itself.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); g.Run(ctx, nil) }()
	defer func() { cancel(); <-done }()
	write("operator " + operatorToken + "\n")
	deadline := time.Now().Add(10 * time.Second)
	for g.Check(Operator, operatorToken) != Granted {
		if time.Now().After(deadline) {
			t.Fatal("the changed file was not picked up")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestNewGateRefusesBadFile(t *testing.T) {
	if _, err := NewGate(Config{File: filepath.Join(t.TempDir(), "missing")}); err == nil {
		t.Fatal("a missing file was accepted")
	}
}

func FuzzParseFile(f *testing.F) {
	f.Add([]byte("ops-read " + opsToken + "\nall " + allToken))
	f.Add([]byte("operator,submit x\n# c\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		tk, err := ParseFile(data, PrintableToken)
		if err != nil {
			return
		}
		for _, l := range Lanes() {
			if tk.Guarded(l) && tk.Check(l, tk.First(l)) != Granted {
				t.Fatalf("lane %s: its own first token is not granted", l)
			}
		}
	})
}
