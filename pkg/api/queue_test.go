package api

import "testing"

func TestDebtAmounts(t *testing.T) {
	for micros, want := range map[uint64]string{
		0: "0.00", 1: "0.000001", 100_000: "0.10", 1_500_000: "1.50", 1_234_567: "1.234567", 100_000_000: "100.00", 120_000: "0.12",
	} {
		if got := DebtString(micros); got != want {
			t.Errorf("DebtString(%d) = %q, want %q", micros, got, want)
		}
		if back, ok := ParseDebt(want); !ok || back != micros {
			t.Errorf("ParseDebt(%q) = %d, %t", want, back, ok)
		}
	}
	for s, want := range map[string]uint64{"5": 5_000_000, "5.": 5_000_000, "0.5": 500_000, "12.345": 12_345_000} {
		if got, ok := ParseDebt(s); !ok || got != want {
			t.Errorf("ParseDebt(%q) = %d, %t; want %d", s, got, ok, want)
		}
	}
	for _, s := range []string{"", ".5", "-1", "+1", "1.0000001", "x", "1.x", "1e3", "99999999999999999999"} {
		if got, ok := ParseDebt(s); ok {
			t.Errorf("ParseDebt(%q) = %d, accepted", s, got)
		}
	}
}

func FuzzParseDebt(f *testing.F) {
	for _, s := range []string{"0", "1.50", "100.00", "0.000001", "-1", "1.0000001", "99999999999999999999", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, ok := ParseDebt(s)
		if !ok {
			return
		}
		if back, ok := ParseDebt(DebtString(v)); !ok || back != v {
			t.Fatalf("%q parses to %d, formatted %q parses back to %d, %t", s, v, DebtString(v), back, ok)
		}
	})
}
