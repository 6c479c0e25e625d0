package compression

import (
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

func TestCRCCombineIsTheCRCOfTheConcatenation(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 2, 3, 7, 8, 255, 4096, 65537, 1 << 20} {
		for range 4 {
			a := make([]byte, r.IntN(3000))
			b := make([]byte, n)
			for i := range a {
				a[i] = byte(r.Uint32())
			}
			for i := range b {
				b[i] = byte(r.Uint32())
			}
			want := crc32.ChecksumIEEE(append(append([]byte(nil), a...), b...))
			got := crcCombine(crc32.ChecksumIEEE(a), crc32.ChecksumIEEE(b), uint64(len(b)))
			if got != want {
				t.Fatalf("len(a)=%d len(b)=%d: combined %08x, CRC of the concatenation %08x", len(a), len(b), got, want)
			}
		}
	}
}
