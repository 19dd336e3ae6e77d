//! The Internet checksum (RFC 1071): the ones' complement of the ones' complement sum of 16-bit
//! big-endian words, an odd last byte padded with zero. IPv4 covers its header with it
//! ([RFC 791]); UDP ([RFC 768]) and TCP cover a pseudo-header (addresses, protocol, length) and
//! the whole segment.

/// The ones' complement sum of `data` added to `sum`, not yet folded or complemented. Chain calls
/// to checksum data in pieces; every piece but the last must have an even length.
pub fn sum(mut sum: u32, data: &[u8]) -> u32 {
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        sum = sum.wrapping_add(u32::from(u16::from_be_bytes([c[0], c[1]])));
        // Fold early so a long input never overflows.
        if sum >= 0x8000_0000 {
            sum = (sum & 0xffff) + (sum >> 16);
        }
    }
    if let [b] = chunks.remainder() {
        sum = sum.wrapping_add(u32::from(*b) << 8);
    }
    sum
}

/// Fold a sum to 16 bits and complement it.
pub fn finish(mut sum: u32) -> u16 {
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// The Internet checksum of `data`. Over data that carries its own correct checksum it is 0.
pub fn checksum(data: &[u8]) -> u16 {
    finish(sum(0, data))
}

/// The sum of the IPv4 pseudo-header of UDP/TCP: source, destination, protocol, length.
pub fn pseudo_header_v4(src: [u8; 4], dst: [u8; 4], protocol: u8, len: u16) -> u32 {
    let s = sum(sum(0, &src), &dst);
    s + u32::from(protocol) + u32::from(len)
}

/// The sum of the IPv6 pseudo-header of UDP/TCP (RFC 8200 §8.1): source, destination,
/// upper-layer length (32 bits), next header.
pub fn pseudo_header_v6(src: [u8; 16], dst: [u8; 16], next_header: u8, len: u32) -> u32 {
    let s = sum(sum(0, &src), &dst);
    sum(s, &len.to_be_bytes()) + u32::from(next_header)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc1071_numerical_example() {
        // RFC 1071 §3: the words 0001 f203 f4f5 f6f7 sum to 0x2ddf0, folded 0xddf2.
        let d = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(sum(0, &d), 0x2_ddf0);
        assert_eq!(checksum(&d), !0xddf2);
        // Byte-order independence (RFC 1071 §2 (B)): swapped input, swapped sum.
        let swapped = [0x01, 0x00, 0x03, 0xf2, 0xf5, 0xf4, 0xf7, 0xf6];
        assert_eq!(checksum(&swapped), (!0xddf2u16).swap_bytes());
        // Data with its checksum appended verifies to 0.
        let mut with = d.to_vec();
        with.extend_from_slice(&checksum(&d).to_be_bytes());
        assert_eq!(checksum(&with), 0);
    }

    #[test]
    fn odd_length_pads_with_zero_and_pieces_chain() {
        assert_eq!(checksum(&[0xab]), checksum(&[0xab, 0x00]));
        assert_eq!(checksum(&[]), 0xffff);
        let d = [1u8, 2, 3, 4, 5, 6, 7];
        assert_eq!(finish(sum(sum(0, &d[..4]), &d[4..])), checksum(&d));
        // A long run of 0xffff words never overflows.
        assert_eq!(checksum(&vec![0xff; 1 << 20]), 0);
    }

    #[test]
    fn pseudo_headers() {
        // 10.0.0.1 -> 10.0.0.2, UDP, length 12: 0a00+0001+0a00+0002+0011+000c.
        assert_eq!(
            finish(pseudo_header_v4([10, 0, 0, 1], [10, 0, 0, 2], 17, 12)),
            !0x1420
        );
        let mut a = [0u8; 16];
        a[15] = 1;
        let mut b = [0u8; 16];
        b[15] = 2;
        // ::1 -> ::2, UDP, length 12: 1 + 2 + 12 + 17.
        assert_eq!(finish(pseudo_header_v6(a, b, 17, 12)), !32);
    }
}
