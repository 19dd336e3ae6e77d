//! Authenticated control messages (docs/protocol.md "Authenticated NACKs and notices",
//! docs/security.md): a native NACK or congestion notice may carry a trailer, the translator's
//! message counter and a keyed MAC of the message and the counter, flagged by the `A` bit of the
//! header's flags byte. With a key configured on both ends, a reporter obeys only messages whose
//! MAC it verifies and whose counter is above the last one it accepted from that translator: a
//! forged message fails the MAC, a recorded one fails the counter.
//!
//! The counter alone protects only a reporter that saw the originals: one started afterwards
//! (same id, same key) has accepted nothing yet. So a keyed reporter draws a random *life* when it
//! starts and announces it in a sealed hello ([`crate::native::HelloRepr`]); the translator then
//! binds what it sends that reporter to the life (the `L` bit: the trailer holds the life too, and
//! the MAC covers it, [`seal_bound`]), and the reporter obeys only messages bound to its own life
//! ([`open`] with `life`): a message recorded in an earlier life is `stale_life`.
//!
//! The MAC is SipHash-2-4 ([SipHash §2]; the `siphasher` crate) with the 128-bit key over the
//! message (the `A` bit set) followed by the counter (and the life), big-endian: a PRF built for
//! short inputs, small enough for the header-only C reporter to carry. Its 64-bit tag makes a
//! blind forgery succeed with probability 2^-64 per try.

use siphasher::sip::SipHasher24;
use std::hash::Hasher;

/// The trailer: counter (u64) then tag (u64), big-endian.
pub const TRAILER_LEN: usize = 16;
/// The `A` bit of byte 1 (flags) of a native header: a trailer follows the message.
pub const FLAG_AUTH: u8 = 0x10;
/// The `L` bit of byte 1 (flags), with `A`: the trailer holds the life of the reporter the
/// message is bound to, between the counter and the tag.
pub const FLAG_LIFE: u8 = 0x08;
/// The trailer of a message bound to a reporter's life: counter, life, tag (u64 each).
pub const BOUND_TRAILER_LEN: usize = 24;
/// A reporter with a key says hello at least this often (and at start), so a restarted
/// translator learns its life within a second.
pub const HELLO_INTERVAL_MS: u64 = 1000;
/// ... and again on a message bound to no life, at most this often.
pub const HELLO_RETRY_MS: u64 = 100;

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
    /// Sealed, but bound to no life, while the reporter announced one: the translator has not
    /// heard its hello yet, or the message was recorded before any hello.
    #[error("unbound")]
    Unbound,
    /// Bound to another life of the reporter: recorded before it (re)started.
    #[error("stale_life")]
    StaleLife,
}

impl AuthError {
    /// The counter name of the reason (`control_rejected{reason}`).
    pub fn reason(self) -> &'static str {
        match self {
            AuthError::Unauthenticated => "unauthenticated",
            AuthError::Truncated => "truncated",
            AuthError::BadTag => "bad_authenticator",
            AuthError::Replayed => "replayed",
            AuthError::Unbound => "unbound",
            AuthError::StaleLife => "stale_life",
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

/// Authenticate the control message `buf[..len]` for the reporter whose current life is `life`
/// (from its hello): set its `A` and `L` bits, append the counter, the life and the tag. `buf`
/// holds at least `len + BOUND_TRAILER_LEN` bytes; the new length.
pub fn seal_bound(buf: &mut [u8], len: usize, key: &ControlKey, counter: u64, life: u64) -> usize {
    buf[crate::native::field::FLAGS] |= FLAG_AUTH | FLAG_LIFE;
    buf[len..len + 8].copy_from_slice(&counter.to_be_bytes());
    buf[len + 8..len + 16].copy_from_slice(&life.to_be_bytes());
    let tag = key.tag(&buf[..len + 16]);
    buf[len + 16..len + BOUND_TRAILER_LEN].copy_from_slice(&tag.to_be_bytes());
    len + BOUND_TRAILER_LEN
}

/// Whether `msg` (a native control message) carries a trailer.
pub fn is_sealed(msg: &[u8]) -> bool {
    msg.get(crate::native::field::FLAGS)
        .is_some_and(|f| f & FLAG_AUTH != 0)
}

/// The length of `msg`'s trailer by its flags (a sealed message).
fn trailer_len(msg: &[u8]) -> usize {
    match msg.get(crate::native::field::FLAGS) {
        Some(f) if f & FLAG_LIFE != 0 => BOUND_TRAILER_LEN,
        _ => TRAILER_LEN,
    }
}

/// What [`open`] found in a message that verified.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Opened {
    /// The message's length without its trailer (written to `out`).
    pub len: usize,
    /// The translator's counter.
    pub counter: u64,
    /// The life the message is bound to, if any.
    pub life: Option<u64>,
}

/// Verify a control message against `key`, the life of the reporter opening it (`life`: one
/// that announced a life obeys only messages bound to it) and the last counter accepted
/// (`last`). On success the message with its `A` and `L` bits cleared and trailer removed is in
/// `out`. Checks in order: a trailer at all (`Unauthenticated`), its length (`Truncated`), the
/// MAC (`BadTag`), the life (`Unbound`, `StaleLife`), the counter (`Replayed`).
pub fn open(
    msg: &[u8],
    key: &ControlKey,
    life: Option<u64>,
    last: Option<u64>,
    out: &mut [u8; 64],
) -> Result<Opened, AuthError> {
    if !is_sealed(msg) {
        return Err(AuthError::Unauthenticated);
    }
    let t = trailer_len(msg);
    if msg.len() < crate::native::HEADER_LEN + t || msg.len() > out.len() {
        return Err(AuthError::Truncated);
    }
    let body = msg.len() - t;
    let at = |i: usize| u64::from_be_bytes(msg[i..i + 8].try_into().expect("8 bytes"));
    let counter = at(body);
    let bound = (t == BOUND_TRAILER_LEN).then(|| at(body + 8));
    let tag = at(msg.len() - 8);
    if key.tag(&msg[..msg.len() - 8]) != tag {
        return Err(AuthError::BadTag);
    }
    match (life, bound) {
        (Some(_), None) => return Err(AuthError::Unbound),
        (Some(mine), Some(theirs)) if mine != theirs => return Err(AuthError::StaleLife),
        _ => {}
    }
    if last.is_some_and(|l| counter <= l) {
        return Err(AuthError::Replayed);
    }
    out[..body].copy_from_slice(&msg[..body]);
    out[crate::native::field::FLAGS] &= !(FLAG_AUTH | FLAG_LIFE);
    Ok(Opened {
        len: body,
        counter,
        life: bound,
    })
}

/// A sealed message without verifying it (a reporter with no key: the translator signs, the
/// reporter does not check): the message with its `A` and `L` bits cleared, trailer removed.
pub fn strip(msg: &[u8], out: &mut [u8; 64]) -> Option<usize> {
    let body = msg.len().checked_sub(trailer_len(msg))?;
    if body < crate::native::HEADER_LEN || body > out.len() {
        return None;
    }
    out[..body].copy_from_slice(&msg[..body]);
    out[crate::native::field::FLAGS] &= !(FLAG_AUTH | FLAG_LIFE);
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
        let o = open(&b[..sealed], &key, None, Some(6), &mut out).unwrap();
        assert_eq!((&out[..o.len], o.counter, o.life), (&plain[..], 7, None));
        assert_eq!(
            open(&b[..sealed], &key, None, Some(7), &mut out),
            Err(AuthError::Replayed)
        );
        let other = ControlKey::new([9; 16]);
        assert_eq!(
            open(&b[..sealed], &other, None, None, &mut out),
            Err(AuthError::BadTag)
        );
        let mut flipped = b;
        flipped[8] ^= 1;
        assert_eq!(
            open(&flipped[..sealed], &key, None, None, &mut out),
            Err(AuthError::BadTag)
        );
        assert_eq!(
            open(&plain, &key, None, None, &mut out),
            Err(AuthError::Unauthenticated)
        );
        // A reporter that announced a life obeys no message bound to none.
        assert_eq!(
            open(&b[..sealed], &key, Some(5), None, &mut out),
            Err(AuthError::Unbound)
        );
        assert_eq!(strip(&b[..sealed], &mut out), Some(plain.len()));
        assert_eq!(&out[..plain.len()], &plain[..]);
        assert!(ControlKey::from_hex("0011").is_err());

        // Bound to a life: obeyed in that life only, whatever the counter.
        let mut b = [0u8; 64];
        let n = notice.emit(&mut b).unwrap();
        let bound = seal_bound(&mut b, n, &key, 8, 0xfeed);
        assert_eq!(bound, n + BOUND_TRAILER_LEN);
        let o = open(&b[..bound], &key, Some(0xfeed), None, &mut out).unwrap();
        assert_eq!(
            (&out[..o.len], o.counter, o.life),
            (&plain[..], 8, Some(0xfeed))
        );
        assert_eq!(
            open(&b[..bound], &key, Some(0xbeef), None, &mut out),
            Err(AuthError::StaleLife)
        );
        // The life is under the MAC: rewriting it to the new one breaks the tag.
        let mut moved = b;
        moved[n + 8..n + 16].copy_from_slice(&0xbeefu64.to_be_bytes());
        assert_eq!(
            open(&moved[..bound], &key, Some(0xbeef), None, &mut out),
            Err(AuthError::BadTag)
        );
        // So is the L bit: cleared, the trailer reads as a 16-byte one and fails.
        let mut unflagged = b;
        unflagged[crate::native::field::FLAGS] &= !FLAG_LIFE;
        assert_eq!(
            open(&unflagged[..bound], &key, Some(0xfeed), None, &mut out),
            Err(AuthError::BadTag)
        );
        assert_eq!(strip(&b[..bound], &mut out), Some(plain.len()));
        assert_eq!(&out[..plain.len()], &plain[..]);
        let zero = ControlKey::from_hex(&"0".repeat(32)).unwrap_err();
        assert!(zero.contains("all zero"), "{zero}");
    }
}
