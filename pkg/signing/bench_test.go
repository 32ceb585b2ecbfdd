package signing

import (
	"testing"

	"github.com/ethereum/go-ethereum/crypto"
)

// BenchmarkVerify measures signature checks as a validator does them:
// "Signer" with the domain separator cached (the hot path), "Func" through
// the package-level Verify that rebuilds it per call, and "SignerParallel"
// with one Signer shared by GOMAXPROCS goroutines.
func BenchmarkVerify(b *testing.B) {
	key := testKey(b, "alice")
	addr := crypto.PubkeyToAddress(key.PublicKey)
	p := sampleProposal(addr)
	sig, err := Sign(devDomain, p, key)
	if err != nil {
		b.Fatal(err)
	}
	s, err := NewSigner(devDomain)
	if err != nil {
		b.Fatal(err)
	}
	run := func(b *testing.B, verify func() error) {
		b.ReportAllocs()
		for b.Loop() {
			if err := verify(); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "verifies/s")
	}
	b.Run("Signer", func(b *testing.B) { run(b, func() error { return s.Verify(p, sig, addr) }) })
	b.Run("Func", func(b *testing.B) { run(b, func() error { return Verify(devDomain, p, sig, addr) }) })
	// One shared Signer on all cores: the node's throughput, not latency.
	b.Run("SignerParallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := s.Verify(p, sig, addr); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "verifies/s")
	})
}

// BenchmarkDigest isolates the EIP-712 hashing from the ECDSA recovery.
func BenchmarkDigest(b *testing.B) {
	s, err := NewSigner(devDomain)
	if err != nil {
		b.Fatal(err)
	}
	p := sampleProposal(crypto.PubkeyToAddress(testKey(b, "alice").PublicKey))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Digest(p); err != nil {
			b.Fatal(err)
		}
	}
}
