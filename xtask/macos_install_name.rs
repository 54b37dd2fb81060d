// Included by the build scripts of the three shared libraries (ffi/, godot/, bindings/kotlin/).

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
