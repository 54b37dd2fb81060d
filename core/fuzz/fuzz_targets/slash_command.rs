//! Slash commands on arbitrary text: `slash::parse` never panics, and a parsed call names a
//! registered tool and carries an object of arguments.
#![no_main]

use deskwire::ids::IdGenerator;
use deskwire::tools::{Registry, slash};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let registry = Registry::with_builtins();
    if let Ok(call) = slash::parse(text, &registry, &mut IdGenerator::new(1)) {
        assert!(registry.get(&call.name).is_some());
        assert!(call.args.is_object());
    }
});
