//! The partition key `pk` a server sends: a keyed hash of the limiter key, never
//! the key itself.
//!
//! The hash is SipHash-2-4 (Aumasson and Bernstein), keyed with a 128-bit secret
//! the application chooses, giving 8 bytes sent as an sf-binary (`:base64:`).
//!
//! * **Keyed**, so that the value reveals nothing of the key: an IPv4 address has
//!   only 2³² values, so an unkeyed hash of one could be inverted by trying them
//!   all. SipHash is a pseudorandom function built for exactly this (short inputs,
//!   a secret key): without the secret, the hash of one key says nothing of any
//!   other.
//! * **Stable**, so that clients and every replica of a service see one partition
//!   as one value across restarts: the algorithm is fixed here and its input is
//!   written in one byte order on every platform (integers little-endian, `usize`
//!   and `isize` as 8 bytes). `std`'s `DefaultHasher` promises no stable output
//!   across Rust releases and `RandomState` is seeded per process, so neither
//!   would do; a new dependency would add nothing this page does not.
//!
//! The key is fed through its [`Hash`] implementation, so a key type hashes as its
//! `Hash` writes it (for `std`'s types that has not changed across releases).

use std::hash::{Hash, Hasher};

/// A 128-bit SipHash key, from the 16 bytes an application keeps secret.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) struct Secret {
    k0: u64,
    k1: u64,
}

impl Secret {
    pub(super) fn new(bytes: [u8; 16]) -> Self {
        let [a, b, c, d, e, f, g, h, i, j, k, l, m, n, o, p] = bytes;
        Secret {
            k0: u64::from_le_bytes([a, b, c, d, e, f, g, h]),
            k1: u64::from_le_bytes([i, j, k, l, m, n, o, p]),
        }
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

/// How a layer turns a limiter key into its partition key: the secret, and the
/// key type's hash (a plain function, so that the layer needs no `Hash` bound
/// unless partition keys are asked for).
pub(super) struct Partition<K> {
    secret: Secret,
    hash: fn(&K, &Secret) -> [u8; 8],
}

impl<K: Hash> Partition<K> {
    pub(super) fn new(secret: [u8; 16]) -> Self {
        Partition {
            secret: Secret::new(secret),
            hash: |key, secret| partition_key(key, secret),
        }
    }
}

impl<K> Partition<K> {
    /// The partition key of `key`.
    pub(super) fn of(&self, key: &K) -> [u8; 8] {
        (self.hash)(key, &self.secret)
    }
}

impl<K> Clone for Partition<K> {
    fn clone(&self) -> Self {
        Partition {
            secret: self.secret,
            hash: self.hash,
        }
    }
}

impl<K> std::fmt::Debug for Partition<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Partition(SipHash-2-4, ..)")
    }
}

/// SipHash-2-4 of `key` as its `Hash` writes it, little-endian bytes.
pub(super) fn partition_key<K: Hash + ?Sized>(key: &K, secret: &Secret) -> [u8; 8] {
    let mut hasher = SipHasher24::new(secret);
    key.hash(&mut hasher);
    hasher.finish().to_le_bytes()
}

/// SipHash-2-4 over a stream of bytes, the integer writes in one byte order on
/// every platform.
struct SipHasher24 {
    v: [u64; 4],
    /// Bytes not yet compressed (fewer than 8), in the low bytes, little-endian.
    tail: u64,
    tail_len: usize,
    /// Bytes written so far (only its low byte enters the hash).
    len: u64,
}

impl SipHasher24 {
    fn new(secret: &Secret) -> Self {
        SipHasher24 {
            v: [
                secret.k0 ^ 0x736f_6d65_7073_6575,
                secret.k1 ^ 0x646f_7261_6e64_6f6d,
                secret.k0 ^ 0x6c79_6765_6e65_7261,
                secret.k1 ^ 0x7465_6462_7974_6573,
            ],
            tail: 0,
            tail_len: 0,
            len: 0,
        }
    }

    fn round(&mut self) {
        let [v0, v1, v2, v3] = &mut self.v;
        *v0 = v0.wrapping_add(*v1);
        *v1 = v1.rotate_left(13) ^ *v0;
        *v0 = v0.rotate_left(32);
        *v2 = v2.wrapping_add(*v3);
        *v3 = v3.rotate_left(16) ^ *v2;
        *v0 = v0.wrapping_add(*v3);
        *v3 = v3.rotate_left(21) ^ *v0;
        *v2 = v2.wrapping_add(*v1);
        *v1 = v1.rotate_left(17) ^ *v2;
        *v2 = v2.rotate_left(32);
    }

    fn compress(&mut self, block: u64) {
        self.v[3] ^= block;
        self.round();
        self.round();
        self.v[0] ^= block;
    }
}

impl Hasher for SipHasher24 {
    fn write(&mut self, bytes: &[u8]) {
        self.len = self.len.wrapping_add(bytes.len() as u64);
        for &byte in bytes {
            self.tail |= u64::from(byte) << (8 * self.tail_len);
            self.tail_len += 1;
            if self.tail_len == 8 {
                let block = self.tail;
                self.compress(block);
                self.tail = 0;
                self.tail_len = 0;
            }
        }
    }

    fn write_u16(&mut self, i: u16) {
        self.write(&i.to_le_bytes());
    }

    fn write_u32(&mut self, i: u32) {
        self.write(&i.to_le_bytes());
    }

    fn write_u64(&mut self, i: u64) {
        self.write(&i.to_le_bytes());
    }

    fn write_u128(&mut self, i: u128) {
        self.write(&i.to_le_bytes());
    }

    fn write_usize(&mut self, i: usize) {
        self.write_u64(i as u64);
    }

    fn write_i16(&mut self, i: i16) {
        self.write_u16(i as u16);
    }

    fn write_i32(&mut self, i: i32) {
        self.write_u32(i as u32);
    }

    fn write_i64(&mut self, i: i64) {
        self.write_u64(i as u64);
    }

    fn write_i128(&mut self, i: i128) {
        self.write_u128(i as u128);
    }

    fn write_isize(&mut self, i: isize) {
        self.write_u64(i as i64 as u64);
    }

    fn finish(&self) -> u64 {
        let mut last = SipHasher24 {
            v: self.v,
            tail: 0,
            tail_len: 0,
            len: 0,
        };
        last.compress(self.tail | ((self.len & 0xff) << 56));
        last.v[2] ^= 0xff;
        for _ in 0..4 {
            last.round();
        }
        let [v0, v1, v2, v3] = last.v;
        v0 ^ v1 ^ v2 ^ v3
    }
}

/// Appends `bytes` as an sf-binary: `:`, standard base64 with padding, `:`.
pub(super) fn push_binary(out: &mut String, bytes: &[u8]) {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    out.push(':');
    for chunk in bytes.chunks(3) {
        let word = chunk
            .iter()
            .enumerate()
            .fold(0u32, |w, (i, &b)| w | u32::from(b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(word >> (18 - 6 * i)) as usize & 63]));
            } else {
                out.push('=');
            }
        }
    }
    out.push(':');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference_key() -> Secret {
        Secret::new(std::array::from_fn(|i| i as u8))
    }

    fn sip(bytes: &[u8]) -> u64 {
        let mut hasher = SipHasher24::new(&reference_key());
        hasher.write(bytes);
        hasher.finish()
    }

    #[test]
    fn siphash_2_4_answers_the_papers_vectors() {
        // Key 00..0f; the paper's example message 00..0e, and the empty one.
        let message: Vec<u8> = (0..15).collect();
        assert_eq!(sip(&message), 0xa129_ca61_49be_45e5);
        assert_eq!(sip(&[]), 0x726f_db47_dd0e_0e31);
    }

    #[test]
    fn bytes_may_arrive_in_any_pieces() {
        let message: Vec<u8> = (0..40).collect();
        let whole = sip(&message);
        for split in 0..message.len() {
            let mut hasher = SipHasher24::new(&reference_key());
            hasher.write(&message[..split]);
            hasher.write(&message[split..]);
            assert_eq!(hasher.finish(), whole, "split at {split}");
        }
    }

    #[test]
    fn integers_hash_as_their_little_endian_bytes() {
        let mut by_int = SipHasher24::new(&reference_key());
        by_int.write_u32(0x0403_0201);
        by_int.write_usize(5);
        assert_eq!(by_int.finish(), sip(&[1, 2, 3, 4, 5, 0, 0, 0, 0, 0, 0, 0]));
    }

    #[test]
    fn another_secret_gives_another_key() {
        let ip: std::net::IpAddr = "192.0.2.7".parse().unwrap();
        let one = partition_key(&ip, &reference_key());
        assert_eq!(one, partition_key(&ip, &reference_key()));
        assert_ne!(one, partition_key(&ip, &Secret::new([7; 16])));
    }

    #[test]
    fn binary_is_padded_base64() {
        let encode = |bytes: &[u8]| {
            let mut out = String::new();
            push_binary(&mut out, bytes);
            out
        };
        assert_eq!(encode(b""), "::");
        assert_eq!(encode(b"f"), ":Zg==:");
        assert_eq!(encode(b"fo"), ":Zm8=:");
        assert_eq!(encode(b"foo"), ":Zm9v:");
        assert_eq!(encode(b"foobar"), ":Zm9vYmFy:");
        assert_eq!(encode(&[0xff; 8]), "://////////8=:");
    }
}
