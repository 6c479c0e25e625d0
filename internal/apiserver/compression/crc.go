package compression

// The CRC-32 (IEEE) of a concatenation from the CRCs of its parts, so a gzip trailer
// can be written for a body made of segments compressed earlier without reading
// their bytes again. The CRC of A‖B is CRC(A)·x^(8·len(B)) + CRC(B) over GF(2)
// modulo the CRC polynomial; the powers of x are built by squaring.

// crcPoly is the IEEE polynomial in the reflected bit order hash/crc32 uses.
const crcPoly = 0xedb88320

// crcMulMod returns a·b modulo crcPoly, both in reflected order (bit 31 is x^0).
func crcMulMod(a, b uint32) uint32 {
	var p uint32
	for m := uint32(1) << 31; m != 0; m >>= 1 {
		if a&m != 0 {
			p ^= b
		}
		// b·x: a shift towards the high powers, reduced when x^32 appears.
		if b&1 != 0 {
			b = b>>1 ^ crcPoly
		} else {
			b >>= 1
		}
	}
	return p
}

// crcX2n[k] is x^(2^k) modulo crcPoly.
var crcX2n = func() (t [32]uint32) {
	t[0] = 1 << 30 // x^1
	for k := 1; k < len(t); k++ {
		t[k] = crcMulMod(t[k-1], t[k-1])
	}
	return t
}()

// crcShift returns x^(8·n) modulo crcPoly: the factor that moves a CRC past n bytes.
func crcShift(n uint64) uint32 {
	p := uint32(1) << 31 // x^0
	for k := 3; n != 0; n, k = n>>1, k+1 {
		if n&1 != 0 {
			p = crcMulMod(crcX2n[k&31], p)
		}
	}
	return p
}

// crcCombine returns the CRC-32 of A‖B given crcA, crcB and the length of B.
func crcCombine(crcA, crcB uint32, lenB uint64) uint32 {
	if lenB == 0 {
		return crcA
	}
	return crcMulMod(crcShift(lenB), crcA) ^ crcB
}
