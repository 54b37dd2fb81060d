//! On macOS, gives the library the install name `@rpath/libdeskwire_godot.dylib` (rustc's
//! default is the absolute path of the build tree, which exists on no user's machine).

fn main() {
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("macos") {
        macos_install_name("@rpath/libdeskwire_godot.dylib");
    }
}

/// `-install_name NAME` for the macOS linker: through the C compiler (`-Wl,`), or bare where
/// rustc runs ld64.lld itself (`-Clinker-flavor=ld64.lld`, as `cargo xtask dist` links them).
fn macos_install_name(name: &str) {
    let flags = std::env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    if flags
        .split('\x1f')
        .any(|f| f.ends_with("linker-flavor=ld64.lld"))
    {
        println!("cargo:rustc-cdylib-link-arg=-install_name");
        println!("cargo:rustc-cdylib-link-arg={name}");
    } else {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-install_name,{name}");
    }
}
