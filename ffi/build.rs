//! Gives the shared library the soname ffi/install.sh installs it under, so a program linked
//! with `-ldeskwire` records `libdeskwire.so.0` and survives minor upgrades.

fn main() {
    let major = std::env::var("CARGO_PKG_VERSION_MAJOR").unwrap_or_else(|_| "0".into());
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libdeskwire.so.{major}");
    }
}
