// Package crc32c computes CRC-32C (Castagnoli), the checksum GCS keeps for
// every object, and combines the checksums of consecutive pieces into the
// checksum of their concatenation.
//
// Combining is what lets bucketfs check a whole object whose chunks were
// fetched in parallel, out of order: each chunk's checksum is computed as
// its bytes stream in, and the object's is combined from them at the end,
// without reading the bytes again.
package crc32c

import "hash/crc32"

// Table is the Castagnoli table (hardware-accelerated where the CPU has it).
var Table = crc32.MakeTable(crc32.Castagnoli)

// Checksum returns the CRC-32C of p.
func Checksum(p []byte) uint32 { return crc32.Checksum(p, Table) }

// Update returns the CRC-32C of the bytes summed in crc followed by p.
func Update(crc uint32, p []byte) uint32 { return crc32.Update(crc, Table, p) }

// Combine returns the CRC-32C of A followed by B, given crcA = CRC(A),
// crcB = CRC(B) and lenB = len(B). It costs O(log lenB) small matrix
// products, whatever the sizes.
//
// How: appending a zero byte to a message multiplies its (pre- and
// post-conditioned) CRC register by a fixed linear operator over GF(2);
// appending lenB zero bytes applies that operator lenB times, which is
// computed by repeated squaring. CRC(A || B) = shift(CRC(A), lenB) xor
// CRC(B), where the conditioning constants cancel out because CRC(B)
// already carries them.
func Combine(crcA, crcB uint32, lenB int64) uint32 {
	if lenB <= 0 {
		return crcA
	}
	// odd is the operator for one zero bit: a shift right, and the
	// reversed polynomial xored in when the low bit falls out.
	var odd, even [32]uint32
	odd[0] = 0x82f63b78 // CRC-32C polynomial, reversed
	row := uint32(1)
	for i := 1; i < 32; i++ {
		odd[i] = row
		row <<= 1
	}
	square(&even, &odd) // two zero bits
	square(&odd, &even) // four zero bits
	// Each pass squares the operator again (8, 16, 32... zero bits, that
	// is 1, 2, 4... zero bytes) and applies it where lenB has a bit set.
	for {
		square(&even, &odd)
		if lenB&1 != 0 {
			crcA = times(&even, crcA)
		}
		lenB >>= 1
		if lenB == 0 {
			break
		}
		square(&odd, &even)
		if lenB&1 != 0 {
			crcA = times(&odd, crcA)
		}
		lenB >>= 1
		if lenB == 0 {
			break
		}
	}
	return crcA ^ crcB
}

// times multiplies the GF(2) 32x32 matrix m by the vector v.
func times(m *[32]uint32, v uint32) uint32 {
	var sum uint32
	for i := 0; v != 0; i, v = i+1, v>>1 {
		if v&1 != 0 {
			sum ^= m[i]
		}
	}
	return sum
}

// square sets dst to m*m.
func square(dst, m *[32]uint32) {
	for i := range 32 {
		dst[i] = times(m, m[i])
	}
}
