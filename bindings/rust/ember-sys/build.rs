//! Links libember (a shared library). Where it is not on the linker's default path, set
//! `EMBER_LIB_DIR` to the folder holding `libember.so` (a CMake build's `build/` folder, or an install
//! prefix's `lib/`); at run time the loader then needs it too (`LD_LIBRARY_PATH`, or an rpath).
use std::env;

fn main() {
    println!("cargo:rerun-if-env-changed=EMBER_LIB_DIR");
    if let Some(dir) = env::var_os("EMBER_LIB_DIR") {
        if !dir.is_empty() {
            println!("cargo:rustc-link-search=native={}", dir.to_string_lossy());
        }
    }
    println!("cargo:rustc-link-lib=dylib=ember");
}
