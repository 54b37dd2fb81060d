//! `uniffi-bindgen`, the version that matches the `uniffi` the library was built with.
//!
//! ```sh
//! cargo run -p deskwire-uniffi-bindgen -- generate --library target/debug/libdeskwire_uniffi.so \
//!     --language kotlin --out-dir bindings/kotlin/src/generated/kotlin --no-format
//! ```

fn main() {
    uniffi::uniffi_bindgen_main()
}
