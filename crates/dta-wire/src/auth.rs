//! Authenticated control messages, translator to reporter (docs/protocol.md "Authenticated
//! NACKs and notices", docs/security.md): a native NACK or congestion notice may carry a
//! 16-byte trailer, the translator's message counter and a keyed MAC of the message and the
//! counter, flagged by the `A` bit of the header's flags byte. With a key configured on both
//! ends, a reporter obeys only messages whose MAC it verifies and whose counter is above the
//! last one it accepted from that translator: a forged message fails the MAC, a recorded one
//! fails the counter.
//!
//! The MAC is SipHash-2-4 ([SipHash §2]; the `siphasher` crate) with the 128-bit key over the
//! message (the `A` bit set) followed by the counter, big-endian: a PRF built for short inputs,
//! small enough for the header-only C reporter to carry. Its 64-bit tag makes a blind forgery
//! succeed with probability 2^-64 per try.

use siphasher::sip::SipHasher24;
use std::hash::Hasher;

/// The trailer: counter (u64) then tag (u64), big-endian.
pub const TRAILER_LEN: usize = 16;
/// The `A` bit of byte 1 (flags) of a native header: a trailer follows the message.
pub const FLAG_AUTH: u8 = 0x10;
/// Length of a control key, bytes.
pub const KEY_LEN: usize = 16;

/// A control key: 16 bytes, written as 32 hexadecimal digits in a key file.
#[derive(Clone, PartialEq, Eq)]
pub struct ControlKey([u8; KEY_LEN]);

impl std::fmt::Debug for ControlKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ControlKey(..)")
    }
}

/// Why an authenticated message is not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// The message carries no trailer (its `A` bit is clear) while a key is configured.
    #[error("unauthenticated")]
    Unauthenticated,
    /// Shorter than a header and a trailer.
    #[error("truncated")]
    Truncated,
    /// The MAC does not verify.
    #[error("bad_authenticator")]
    BadTag,
    /// The counter is not above the last one accepted.
    #[error("replayed")]
    Replayed,
}

impl AuthError {
    /// The counter name of the reason (`control_rejected{reason}`).
    pub fn reason(self) -> &'static str {
        match self {
            AuthError::Unauthenticated => "unauthenticated",
            AuthError::Truncated => "truncated",
            AuthError::BadTag => "bad_authenticator",
            AuthError::Replayed => "replayed",
        }
    }
}

impl ControlKey {
    /// The key of these 16 bytes.
    pub fn new(bytes: [u8; KEY_LEN]) -> ControlKey {
        ControlKey(bytes)
    }

    /// The key written as 32 hexadecimal digits (surrounding whitespace ignored).
    pub fn from_hex(text: &str) -> Result<ControlKey, String> {
        let t = text.trim();
        if t.len() != 2 * KEY_LEN || !t.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(format!(
                "a control key is {} hexadecimal digits, got {} characters",
                2 * KEY_LEN,
                t.len()
            ));
        }
        let mut k = [0u8; KEY_LEN];
        for (i, b) in k.iter_mut().enumerate() {
            *b = u8::from_str_radix(&t[2 * i..2 * i + 2], 16).map_err(|e| e.to_string())?;
        }
        if k == [0; KEY_LEN] {
            // A placeholder, never a key: whoever has read the docs can forge with it.
            return Err(
                "the key is all zero: write a random one (head -c 16 /dev/urandom | \
                        od -An -tx1 | tr -d ' \\n' > FILE)"
                    .into(),
            );
        }
        Ok(ControlKey(k))
    }

    /// The tag of `data` under this key.
    pub fn tag(&self, data: &[u8]) -> u64 {
        let mut h = SipHasher24::new_with_key(&self.0);
        h.write(data);
        h.finish()
    }
}

/// Authenticate the control message `buf[..len]` in place: set its `A` bit, append the
/// counter and the tag. `buf` holds at least `len + TRAILER_LEN` bytes; the new length.
pub fn seal(buf: &mut [u8], len: usize, key: &ControlKey, counter: u64) -> usize {
    buf[crate::native::field::FLAGS] |= FLAG_AUTH;
    buf[len..len + 8].copy_from_slice(&counter.to_be_bytes());
    let tag = key.tag(&buf[..len + 8]);
    buf[len + 8..len + TRAILER_LEN].copy_from_slice(&tag.to_be_bytes());
    len + TRAILER_LEN
}

/// Whether `msg` (a native control message) carries a trailer.
pub fn is_sealed(msg: &[u8]) -> bool {
    msg.get(crate::native::field::FLAGS)
        .is_some_and(|f| f & FLAG_AUTH != 0)
}

/// Verify a control message against `key` and the last counter accepted (`last`): the message
/// with its `A` bit cleared and trailer removed (written to `out`, its length returned) and its
/// counter. Without a trailer the message is [`AuthError::Unauthenticated`].
pub fn open(
    msg: &[u8],
    key: &ControlKey,
    last: Option<u64>,
    out: &mut [u8; 64],
) -> Result<(usize, u64), AuthError> {
    if !is_sealed(msg) {
        return Err(AuthError::Unauthenticated);
    }
    if msg.len() < crate::native::HEADER_LEN + TRAILER_LEN || msg.len() > out.len() {
        return Err(AuthError::Truncated);
    }
    let body = msg.len() - TRAILER_LEN;
    let counter = u64::from_be_bytes(msg[body..body + 8].try_into().expect("8 bytes"));
    let tag = u64::from_be_bytes(msg[body + 8..].try_into().expect("8 bytes"));
    if key.tag(&msg[..body + 8]) != tag {
        return Err(AuthError::BadTag);
    }
    if last.is_some_and(|l| counter <= l) {
        return Err(AuthError::Replayed);
    }
    out[..body].copy_from_slice(&msg[..body]);
    out[crate::native::field::FLAGS] &= !FLAG_AUTH;
    Ok((body, counter))
}

/// A sealed message without verifying it (a reporter with no key: the translator signs, the
/// reporter does not check): the message with its `A` bit cleared, trailer removed.
pub fn strip(msg: &[u8], out: &mut [u8; 64]) -> Option<usize> {
    let body = msg.len().checked_sub(TRAILER_LEN)?;
    if body < crate::native::HEADER_LEN || body > out.len() {
        return None;
    }
    out[..body].copy_from_slice(&msg[..body]);
    out[crate::native::field::FLAGS] &= !FLAG_AUTH;
    Some(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn siphash24_matches_the_reference_vector() {
        // [SipHash] Appendix A: key 00..0f, message 00..0e: the 64-bit value a129ca6149be45e5
        // (bytes e5 45 be 49 .. little-endian in the reference code's vectors).
        let key: [u8; 16] = std::array::from_fn(|i| i as u8);
        let msg: Vec<u8> = (0..15u8).collect();
        assert_eq!(ControlKey::new(key).tag(&msg), 0xa129_ca61_49be_45e5);
    }

    #[test]
    fn a_sealed_message_opens_once_and_a_forged_one_never() {
        let key = ControlKey::from_hex("000102030405060708090a0b0c0d0e0f").unwrap();
        let notice = crate::native::NoticeRepr {
            reporter_id: 1,
            hold_ms: 60_000,
            low_rate: 0,
            medium_rate: 0,
        };
        let mut b = [0u8; 64];
        let n = notice.emit(&mut b).unwrap();
        let plain = b[..n].to_vec();
        let sealed = seal(&mut b, n, &key, 7);
        let mut out = [0u8; 64];
        let (len, c) = open(&b[..sealed], &key, Some(6), &mut out).unwrap();
        assert_eq!((&out[..len], c), (&plain[..], 7));
        assert_eq!(
            open(&b[..sealed], &key, Some(7), &mut out),
            Err(AuthError::Replayed)
        );
        let other = ControlKey::new([9; 16]);
        assert_eq!(
            open(&b[..sealed], &other, None, &mut out),
            Err(AuthError::BadTag)
        );
        let mut flipped = b;
        flipped[8] ^= 1;
        assert_eq!(
            open(&flipped[..sealed], &key, None, &mut out),
            Err(AuthError::BadTag)
        );
        assert_eq!(
            open(&plain, &key, None, &mut out),
            Err(AuthError::Unauthenticated)
        );
        assert_eq!(strip(&b[..sealed], &mut out), Some(plain.len()));
        assert_eq!(&out[..plain.len()], &plain[..]);
        assert!(ControlKey::from_hex("0011").is_err());
        let zero = ControlKey::from_hex(&"0".repeat(32)).unwrap_err();
        assert!(zero.contains("all zero"), "{zero}");
    }
}
