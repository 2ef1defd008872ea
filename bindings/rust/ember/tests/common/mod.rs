//! What the tests share: where the model and the C reference are (from CMake's environment, or the
//! repository's own `models/` when run by hand with `cargo test`).
#![allow(dead_code)]
use std::path::PathBuf;

pub const PROMPT: &str = "Once upon a time";

/// The repository's stories15M model, or None (the caller then skips, saying why).
pub fn model_path() -> Option<PathBuf> {
    let dir = std::env::var_os("EMBER_REPO_MODELS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../../models")));
    let p = dir.join("stories15M-q8_0.gguf");
    if p.is_file() {
        Some(p)
    } else {
        eprintln!("skipped: no model at {} (set EMBER_REPO_MODELS)", p.display());
        None
    }
}

pub fn greedy_ref() -> Option<PathBuf> {
    match std::env::var_os("EMBER_GREEDY_REF") {
        Some(p) => Some(PathBuf::from(p)),
        None => {
            eprintln!("skipped: EMBER_GREEDY_REF is not set (ctest sets it)");
            None
        }
    }
}

/// One session on the model, greedy tokens after the prompt (the way ember-greedy-ref does it).
pub fn small_session_params() -> ember::SessionParams {
    ember::SessionParams { n_ctx: 256, n_threads: 2, ..Default::default() }
}
