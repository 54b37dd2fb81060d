//! Deterministic ids from a seeded generator, so runs replay exactly: OA1 request ids (12 base36
//! characters) and UUID v4 strings (the sidecar's correlation ids).

const ALPHABET: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
/// Characters per id: 36^12 ≈ 2^62, so random ids practically never collide.
pub const ID_LEN: usize = 12;

/// A deterministic id source (SplitMix64 over the seed).
#[derive(Debug, Clone)]
pub struct IdGenerator {
    state: u64,
}

impl IdGenerator {
    /// A generator whose sequence is fixed by `seed`.
    pub fn new(seed: u64) -> Self {
        IdGenerator { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// The next id.
    pub fn next_id(&mut self) -> String {
        let mut n = self.next_u64();
        let mut id = [0u8; ID_LEN];
        for slot in id.iter_mut().rev() {
            *slot = ALPHABET[(n % 36) as usize];
            n /= 36;
        }
        String::from_utf8(id.to_vec()).expect("ASCII alphabet")
    }

    /// The next UUID, version 4 (random) layout: `xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx`.
    pub fn next_uuid_v4(&mut self) -> String {
        let hi = (self.next_u64() & !0xF000) | 0x4000;
        let lo = (self.next_u64() & !(0b11 << 62)) | (0b10 << 62);
        format!(
            "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
            hi >> 32,
            (hi >> 16) & 0xFFFF,
            hi & 0xFFFF,
            lo >> 48,
            lo & 0xFFFF_FFFF_FFFF
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oa1::frame::is_valid_id;

    #[test]
    fn uuids_are_version_4() {
        let mut g = IdGenerator::new(3);
        for _ in 0..100 {
            let u = g.next_uuid_v4();
            let b = u.as_bytes();
            assert_eq!(u.len(), 36);
            assert_eq!([b[8], b[13], b[18], b[23]], [b'-'; 4]);
            assert_eq!(b[14], b'4');
            assert!(matches!(b[19], b'8' | b'9' | b'a' | b'b'), "{u}");
        }
        assert_ne!(g.next_uuid_v4(), g.next_uuid_v4());
    }

    #[test]
    fn deterministic_valid_and_distinct() {
        let a: Vec<String> = (0..100)
            .scan(IdGenerator::new(7), |g, _| Some(g.next_id()))
            .collect();
        let b: Vec<String> = (0..100)
            .scan(IdGenerator::new(7), |g, _| Some(g.next_id()))
            .collect();
        assert_eq!(a, b);
        assert!(a.iter().all(|id| id.len() == ID_LEN && is_valid_id(id)));
        let unique: std::collections::HashSet<_> = a.iter().collect();
        assert_eq!(unique.len(), 100);
        assert_ne!(IdGenerator::new(8).next_id(), a[0]);
    }
}
