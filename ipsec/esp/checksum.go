package esp

import "encoding/binary"

// checksum adds b to the running one's complement sum (RFC 1071) and
// returns the folded 16-bit result, not yet complemented.
func checksum(b []byte, initial uint64) uint16 {
	sum := initial
	for len(b) >= 32 {
		sum += uint64(binary.BigEndian.Uint32(b[0:])) + uint64(binary.BigEndian.Uint32(b[4:])) +
			uint64(binary.BigEndian.Uint32(b[8:])) + uint64(binary.BigEndian.Uint32(b[12:])) +
			uint64(binary.BigEndian.Uint32(b[16:])) + uint64(binary.BigEndian.Uint32(b[20:])) +
			uint64(binary.BigEndian.Uint32(b[24:])) + uint64(binary.BigEndian.Uint32(b[28:]))
		b = b[32:]
	}
	for len(b) >= 4 {
		sum += uint64(binary.BigEndian.Uint32(b))
		b = b[4:]
	}
	if len(b) >= 2 {
		sum += uint64(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		sum += uint64(b[0]) << 8
	}
	for sum > 0xffff {
		sum = (sum >> 16) + (sum & 0xffff)
	}
	return uint16(sum)
}

// pseudoHeaderSum is the partial sum of the TCP/UDP pseudo-header.
func pseudoHeaderSum(src, dst []byte, proto byte, length int) uint64 {
	return uint64(checksum(src, 0)) + uint64(checksum(dst, 0)) + uint64(proto) + uint64(length)
}
