//! Secret material (pairing codes, bearer tokens, approval ids) from the host's entropy.
//!
//! The core does no I/O, so it cannot read the operating system's random source. An engine
//! that makes secrets takes [`ENTROPY_LEN`] bytes of entropy at construction instead, which the
//! host reads from its secure source (Rust `getrandom::fill`, Python `secrets.token_bytes(32)`,
//! Kotlin `SecureRandom().nextBytes`, Godot `Crypto.generate_random_bytes(32)`), and expands
//! them with ChaCha20 (the `chacha20` crate's RNG, the one `rand`'s `StdRng` uses). A seed from
//! the clock, a process id or a counter makes every secret guessable: never pass one.
//!
//! The same entropy gives the same secrets, so tests replay exactly. Ids that need not be
//! secret (OA1 request ids, permission ids, JSON-RPC ids) stay on the faster
//! [`crate::ids::IdGenerator`]; an engine that needs both seeds that from [`SecretRng::next_u64`],
//! so its ids say nothing about its secrets.
//!
//! ```
//! use deskwire::entropy::{ENTROPY_LEN, SecretRng};
//!
//! let mut entropy = [0u8; ENTROPY_LEN];
//! getrandom::fill(&mut entropy).expect("the OS random source");
//! let mut secrets = SecretRng::new(entropy);
//! let token = secrets.hex_token(32); // 256 bits, 64 hex digits
//! assert_eq!(token.len(), 64);
//! let code = secrets.digits(6); // a pairing code, each digit uniform
//! assert!(code.bytes().all(|b| b.is_ascii_digit()));
//! ```

use std::fmt;

use chacha20::ChaCha20Rng;
use rand_core::{CryptoRng, Rng, SeedableRng};

/// Bytes of entropy an engine that makes secrets takes (256 bits).
pub const ENTROPY_LEN: usize = 32;

/// Entropy from the host's secure random source.
pub type Entropy = [u8; ENTROPY_LEN];

/// A cryptographically secure generator of secrets, expanded from the host's entropy.
/// `Debug` prints no state.
pub struct SecretRng(ChaCha20Rng);

impl fmt::Debug for SecretRng {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretRng(..)")
    }
}

impl SecretRng {
    /// A generator expanding `entropy`.
    pub fn new(entropy: Entropy) -> Self {
        SecretRng(ChaCha20Rng::from_seed(entropy))
    }

    /// A generator seeded from a CSPRNG the host already has.
    pub fn from_rng<R: CryptoRng + ?Sized>(rng: &mut R) -> Self {
        let mut entropy = [0u8; ENTROPY_LEN];
        rng.fill_bytes(&mut entropy);
        SecretRng::new(entropy)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// Fills `out` with random bytes.
    pub fn fill(&mut self, out: &mut [u8]) {
        self.0.fill_bytes(out);
    }

    /// `bytes` random bytes as lowercase hex (`2 * bytes` characters).
    pub fn hex_token(&mut self, bytes: usize) -> String {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut raw = vec![0u8; bytes];
        self.fill(&mut raw);
        let mut text = String::with_capacity(bytes * 2);
        for b in raw {
            text.push(char::from(HEX[usize::from(b >> 4)]));
            text.push(char::from(HEX[usize::from(b & 15)]));
        }
        text
    }

    /// `len` decimal digits, each uniform (bytes of 250 and above are drawn again, so no digit
    /// is likelier than another).
    pub fn digits(&mut self, len: usize) -> String {
        self.chars(b"0123456789", len)
    }

    /// `len` characters, each uniform over `alphabet` (1 to 256 ASCII characters).
    pub(crate) fn chars(&mut self, alphabet: &[u8], len: usize) -> String {
        debug_assert!(!alphabet.is_empty() && alphabet.len() <= 256 && alphabet.is_ascii());
        // The largest multiple of the alphabet's size that fits a byte: draws at or above it
        // are refused, so every character is equally likely.
        let n = alphabet.len();
        let limit = 256 - 256 % n;
        let mut text = String::with_capacity(len);
        let mut byte = [0u8; 1];
        while text.len() < len {
            self.fill(&mut byte);
            let b = usize::from(byte[0]);
            if b < limit {
                text.push(char::from(alphabet[b % n]));
            }
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_entropy_replays_and_every_byte_of_it_counts() {
        let mut a = SecretRng::new([7; ENTROPY_LEN]);
        let mut b = SecretRng::new([7; ENTROPY_LEN]);
        assert_eq!(a.hex_token(32), b.hex_token(32));
        assert_eq!(a.digits(6), b.digits(6));
        // Entropy differing in its last byte only: a generator keyed by a u64 would not see it.
        let mut last = [7; ENTROPY_LEN];
        last[ENTROPY_LEN - 1] = 8;
        assert_ne!(
            SecretRng::new([7; ENTROPY_LEN]).hex_token(32),
            SecretRng::new(last).hex_token(32)
        );
    }

    #[test]
    fn tokens_are_hex_and_digits_are_uniform() {
        let mut g = SecretRng::new([1; ENTROPY_LEN]);
        let t = g.hex_token(32);
        assert_eq!(t.len(), 64);
        assert!(
            t.bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        );
        let mut counts = [0u32; 10];
        for b in g.digits(100_000).bytes() {
            counts[usize::from(b - b'0')] += 1;
        }
        // 10 000 expected each; a fair source stays within ±5 % (over 15 standard deviations).
        assert!(
            counts.iter().all(|&c| (9_500..=10_500).contains(&c)),
            "{counts:?}"
        );
        let ids = g.chars(b"0123456789ABCDEFGHJKMNPQRSTVWXYZ", 26);
        assert_eq!(ids.len(), 26);
    }

    #[test]
    fn debug_hides_the_state() {
        assert_eq!(
            format!("{:?}", SecretRng::new([3; ENTROPY_LEN])),
            "SecretRng(..)"
        );
    }
}
