//! Secrets must not be predictable from what a peer sees.
//!
//! The attacker here knows the engines' code: ids that are not secret come from SplitMix64,
//! whose output function can be inverted, so one id seen gives the generator's state. Secrets
//! drawn from that same generator (as pairing codes and tokens once were) then follow; drawn
//! from the host's entropy through ChaCha20 they do not.

use deskwire::gateway::{self, Gateway, Token};
use deskwire::mobile::server::{self, ConnId, Event, NewPermission, Output, Server};
use serde_json::json;

/// An attacker's model of SplitMix64 (`deskwire::ids::IdGenerator`).
mod splitmix {
    pub const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;
    const M1: u64 = 0xBF58_476D_1CE4_E5B9;
    const M2: u64 = 0x94D0_49BB_1331_11EB;

    /// The output for generator state `state` (after its increment).
    pub fn mix(mut z: u64) -> u64 {
        z = (z ^ (z >> 30)).wrapping_mul(M1);
        z = (z ^ (z >> 27)).wrapping_mul(M2);
        z ^ (z >> 31)
    }

    fn unshift(y: u64, s: u32) -> u64 {
        let mut x = y;
        for _ in 0..64 / s + 1 {
            x = y ^ (x >> s);
        }
        x
    }

    fn inverse(c: u64) -> u64 {
        // Newton's iteration for the inverse of an odd number modulo 2^64.
        let mut x = c;
        for _ in 0..6 {
            x = x.wrapping_mul(2u64.wrapping_sub(c.wrapping_mul(x)));
        }
        x
    }

    /// The state that produced `output`.
    pub fn unmix(output: u64) -> u64 {
        let mut z = unshift(output, 31);
        z = z.wrapping_mul(inverse(M2));
        z = unshift(z, 27);
        z = z.wrapping_mul(inverse(M1));
        unshift(z, 30)
    }

    #[test]
    fn the_model_inverts() {
        for s in [0, 1, GOLDEN, u64::MAX, 0x0123_4567_89ab_cdef] {
            assert_eq!(unmix(mix(s)), s);
        }
    }
}

/// From a UUID v4 made by `next_uuid_v4` (two outputs, 6 bits overwritten), the generator's
/// state after it.
fn state_after_uuid(uuid: &str) -> Option<u64> {
    let hex: String = uuid.chars().filter(|c| *c != '-').collect();
    let hi = u64::from_str_radix(&hex[..16], 16).ok()?;
    let lo = u64::from_str_radix(&hex[16..], 16).ok()?;
    (0..4u64).find_map(|top| {
        let state = splitmix::unmix((lo & !(0b11 << 62)) | (top << 62));
        let before = splitmix::mix(state.wrapping_sub(splitmix::GOLDEN));
        ((before & !0xF000) | 0x4000 == hi).then_some(state)
    })
}

fn drain(server: &mut Server, now: u64) -> Vec<Output> {
    let mut out = Vec::new();
    loop {
        match server.poll_output(now) {
            Output::Timeout(_) => return out,
            o => out.push(o),
        }
    }
}

/// Pairs `conn` with `code`; whether the server accepted it.
fn pair(server: &mut Server, now: u64, conn: ConnId, code: &str) -> bool {
    server.open(now, conn, None).unwrap();
    let auth = json!({"type": "auth", "payload": {"code": code}}).to_string();
    server.handle_text(now, conn, &auth);
    drain(server, now)
        .iter()
        .any(|o| matches!(o, Output::Event(Event::Paired { conn: c, .. }) if *c == conn))
}

fn permission() -> NewPermission {
    NewPermission {
        tool_name: "RemoteBash".into(),
        command: "ls".into(),
        description: "list".into(),
        tier: "low".into(),
    }
}

/// A paired phone sees permission ids; it must not learn the next phone's pairing code.
#[test]
fn a_permission_id_does_not_give_away_the_next_pairing_code() {
    let mut entropy = [0u8; 32];
    entropy[0] = 42;
    let mut desk = Server::new(server::Config::default(), entropy);
    let code = desk.start_pairing(0).unwrap();
    assert!(pair(&mut desk, 0, ConnId(1), &code));
    let seen = desk.request_permission(0, permission()).unwrap();

    // The attacker recovers the id generator and takes its next output as the next code.
    let state = state_after_uuid(&seen).expect("permission ids are UUIDs from SplitMix64");
    let guess = format!(
        "{:06}",
        splitmix::mix(state.wrapping_add(splitmix::GOLDEN)) % 1_000_000
    );
    desk.start_pairing(1).unwrap();
    assert!(
        !pair(&mut desk, 1, ConnId(2), &guess),
        "the pairing code {guess} followed from the permission id {seen}"
    );

    // The attacker's model is right about what is not secret: the next id does follow.
    let next = desk.request_permission(2, permission()).unwrap();
    assert!(state_after_uuid(&next).is_some());
    let predicted_hi = splitmix::mix(state.wrapping_add(splitmix::GOLDEN));
    let hex: String = next.chars().filter(|c| *c != '-').collect();
    assert_eq!(
        u64::from_str_radix(&hex[..16], 16).unwrap(),
        (predicted_hi & !0xF000) | 0x4000,
        "ids may stay on the seeded generator; this test would not show anything otherwise"
    );
}

/// Approval ids decide which dangerous step a decision applies to: one seen must not tell the
/// next.
#[test]
fn an_approval_id_does_not_give_away_the_next() {
    const CROCKFORD: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";
    let mut entropy = [0u8; 32];
    entropy[31] = 9;
    let mut gw = Gateway::new(gateway::Config::new(Token::new("s3cret")), 0, entropy).unwrap();
    for (op, payload) in [
        (
            "jobs.create",
            json!({"job": {"jobId": "j", "repo": "org/repo"}}),
        ),
        ("jobs.start", json!({"jobId": "j"})),
    ] {
        let message = json!({"v": "1.0", "id": op, "type": "request",
            "ts": "2026-02-18T12:00:00Z", "op": op, "auth": {"token": "s3cret"},
            "payload": payload});
        gw.handle_message(0, gateway::ConnId(1), message.to_string().as_bytes())
            .unwrap();
    }
    while !matches!(gw.poll_output(0), gateway::Output::Timeout(_)) {}
    let seen = gw
        .request_approval("j", None, "shell", "rm -rf build")
        .unwrap()
        .approval_id;

    // 26 characters of 5 bits: 12 from each of two outputs (60 low bits), 2 from a third.
    let value = |c: u8| CROCKFORD.iter().position(|&x| x == c).unwrap() as u64;
    let body = seen.strip_prefix("appr_").unwrap().as_bytes();
    let low60 = |chars: &[u8]| {
        chars
            .iter()
            .enumerate()
            .fold(0u64, |acc, (i, &c)| acc | (value(c) << (5 * i)))
    };
    let (first, second) = (low60(&body[..12]), low60(&body[12..24]));
    let third = value(body[24]) | (value(body[25]) << 5);
    let mask60 = (1u64 << 60) - 1;
    let state = (0..16u64).find_map(|top| {
        let state = splitmix::unmix(second | (top << 60));
        let before = splitmix::mix(state.wrapping_sub(splitmix::GOLDEN));
        let after = splitmix::mix(state.wrapping_add(splitmix::GOLDEN));
        (before & mask60 == first && after & 1023 == third).then_some(state)
    });
    let Some(state) = state else {
        return; // not SplitMix64 at all: nothing to predict from
    };
    let mut guess = String::from("appr_");
    for k in 2..5u64 {
        let mut bits = splitmix::mix(state.wrapping_add(splitmix::GOLDEN.wrapping_mul(k)));
        let n = if k < 4 { 12 } else { 2 };
        for _ in 0..n {
            guess.push(char::from(CROCKFORD[(bits & 31) as usize]));
            bits >>= 5;
        }
    }
    let next = gw
        .request_approval("j", None, "shell", "make deploy")
        .unwrap()
        .approval_id;
    assert_ne!(next, guess, "the approval id {next} followed from {seen}");
}
