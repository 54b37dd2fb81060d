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

include!("../xtask/macos_install_name.rs");
