//! On macOS, gives the library the install name `@rpath/libdeskwire_uniffi.dylib` (rustc's
//! default is the absolute path of the build tree, which exists on no user's machine).

fn main() {
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("macos") {
        macos_install_name("@rpath/libdeskwire_uniffi.dylib");
    }
}

include!("../../xtask/macos_install_name.rs");
