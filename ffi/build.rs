//! Gives the shared library the name it is installed under, so programs linked against it find
//! it again: on Linux the soname ffi/install.sh installs (a program linked with `-ldeskwire`
//! records `libdeskwire.so.0` and survives minor upgrades); on macOS the install name
//! `@rpath/libdeskwire.dylib` of the release tarball (rustc's default is the absolute path of
//! the build tree, which exists on no user's machine).

fn main() {
    let major = std::env::var("CARGO_PKG_VERSION_MAJOR").unwrap_or_else(|_| "0".into());
    match std::env::var("CARGO_CFG_TARGET_OS").as_deref() {
        Ok("linux") => println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libdeskwire.so.{major}"),
        Ok("macos") => macos_install_name("@rpath/libdeskwire.dylib"),
        _ => {}
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
