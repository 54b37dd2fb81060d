//! What one idle engine holds, in bytes: a desk of a `MultiDesk`, a served channel of a
//! `MultiRemote`, and a one-channel `Desk` and `Remote`, each registered and in its channel on
//! the simulated server, measured by a counting allocator (the heap the engine keeps, not the
//! struct itself). Printed for docs/oa1.md; the bound asserted is loose (a regression that made
//! an idle desk keep buffers of a message's size would pass 64 KiB).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

use deskwire::oa1::{ConnectionConfig, Desk, MultiDesk, MultiOutput, MultiRemote, Pacing, Remote};
use deskwire::sim::{ClientId, Network};

struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn live() -> isize {
    LIVE.load(Ordering::Relaxed)
}

fn drain_multi(
    engine: &mut impl FnMut(u64) -> MultiOutput,
    net: &mut Network,
    id: ClientId,
    now: u64,
) {
    loop {
        match engine(now) {
            MultiOutput::Transmit(bytes) => net.handle_bytes(id, &bytes),
            MultiOutput::Timeout(_) => return,
            _ => {}
        }
    }
}

fn config(nick: &str, channel: &str) -> ConnectionConfig {
    let mut config = ConnectionConfig::new(nick, channel);
    config.oa1.pacing = Pacing::UNLIMITED;
    config
}

#[test]
fn an_idle_desk_and_an_idle_remote_hold_a_few_kilobytes() {
    const CHANNELS: usize = 20;
    let mut net = Network::new(1);
    let (d, r) = (net.connect("h1"), net.connect("h2"));
    let mut remote = MultiRemote::new(config("rexd", ""), 0).unwrap();
    let mut desks = MultiDesk::new(config("npcs", ""), 0, 5).unwrap();
    let step = |remote: &mut MultiRemote, desks: &mut MultiDesk, net: &mut Network, now| {
        let bytes = net.take_bytes(r);
        remote.handle_bytes(now, &bytes);
        drain_multi(&mut |t| remote.poll_output(t), net, r, now);
        let bytes = net.take_bytes(d);
        desks.handle_bytes(now, &bytes);
        drain_multi(&mut |t| desks.poll_output(t), net, d, now);
    };
    for now in 0..5 {
        step(&mut remote, &mut desks, &mut net, now);
    }
    let start = live();
    for i in 0..CHANNELS {
        remote.add_channel(10, &format!("#desk-{i}")).unwrap();
    }
    for now in 10..15 {
        step(&mut remote, &mut desks, &mut net, now);
    }
    let remote_grew = live() - start;
    let start = live();
    for i in 0..CHANNELS {
        desks.add_desk(20, &format!("#desk-{i}"), "rexd").unwrap();
    }
    for now in 20..25 {
        step(&mut remote, &mut desks, &mut net, now);
    }
    let desks_grew = live() - start;
    let per_desk = desks_grew / CHANNELS as isize;
    let per_channel = remote_grew / CHANNELS as isize;

    // One-channel engines, whole: session, decoder, endpoint.
    let start = live();
    let mut one_remote = Remote::new(config("rexd2", "#solo"), 0).unwrap();
    let one_remote_bytes = live() - start;
    let start = live();
    let mut one_desk = Desk::new(config("desk2", "#solo").with_peer("rexd2"), 0, 9).unwrap();
    let one_desk_bytes = live() - start;
    println!(
        "idle heap: a MultiDesk desk {per_desk} B, a MultiRemote channel {per_channel} B; \
         a Desk {one_desk_bytes} B, a Remote {one_remote_bytes} B (new, before connecting)"
    );
    assert!(per_desk > 0 && per_desk < 64 * 1024, "{per_desk}");
    assert!(per_channel > 0 && per_channel < 64 * 1024, "{per_channel}");
    one_desk.quit(0, "done");
    one_remote.quit(0, "done");
}
