//! Error paths: statuses and messages, never a panic.
mod common;
use ember::{LoadOptions, Model, Sampler, SamplerParams, Session, Status};
use std::path::Path;

#[test]
fn missing_file_is_io_error_naming_the_path() {
    let path = "/nonexistent/ember-rust-test/missing.gguf";
    let err = Model::load(path).err().expect("loading a missing file succeeded");
    assert_eq!(err.status, Status::Io);
    assert!(err.message.contains(path), "message {:?} does not name the path", err.message);
    let shown = err.to_string();
    assert!(shown.starts_with("EMBER_ERR_IO: "), "Display gave {shown:?}");
    let as_dyn: &dyn std::error::Error = &err;
    assert!(as_dyn.to_string().contains("missing.gguf"));
}

#[test]
fn nul_inside_a_path_is_an_error_not_a_panic() {
    let err = Model::load("models/a\0b.gguf").err().expect("a path with NUL loaded");
    assert_eq!(err.status, Status::InvalidArgument);
    assert!(err.message.contains("NUL"), "{}", err.message);
}

#[test]
fn malformed_file_is_invalid_model() {
    let path = std::env::temp_dir().join(format!("ember-rust-bad-{}.gguf", std::process::id()));
    std::fs::write(&path, b"this is not a gguf file at all, just text").unwrap();
    let err = Model::load(&path).err().expect("a text file loaded as a model");
    std::fs::remove_file(&path).ok();
    assert_eq!(err.status, Status::InvalidModel, "{err}");
    assert!(!err.message.is_empty());
}

#[test]
fn sampler_rejects_out_of_range_params_with_a_message() {
    let err = Sampler::new(&SamplerParams { top_p: 1.5, ..Default::default() }).err().expect("top_p 1.5 accepted");
    assert_eq!(err.status, Status::InvalidArgument);
    assert!(err.message.contains("top_p"), "{}", err.message);
    let err = Sampler::new(&SamplerParams { top_k: -1, ..Default::default() }).err().expect("top_k -1 accepted");
    assert_eq!(err.status, Status::InvalidArgument);
}

#[test]
fn sampler_defaults_are_the_c_defaults() {
    let p = SamplerParams::default();
    assert_eq!((p.temperature, p.top_k, p.top_p, p.min_p), (1.0, 0, 1.0, 0.0));
    assert_eq!((p.repeat_penalty, p.frequency_penalty, p.presence_penalty), (1.0, 0.0, 0.0));
    assert_eq!((p.penalty_last_n, p.seed), (64, 0));
    assert_eq!(SamplerParams::greedy().temperature, 0.0);
}

#[test]
fn status_round_trips_and_keeps_unknown_values() {
    for code in [-1, -2, -3, -4, -5, -6, -7, -8, -9, -10, -11, -12, -13, -100, -55] {
        assert_eq!(Status::from_raw(code).code(), code);
    }
    assert_eq!(Status::from_raw(-55), Status::Other(-55));
    assert_eq!(Status::Cancelled.name(), "EMBER_ERR_CANCELLED");
}

#[test]
fn session_errors() {
    let Some(path) = common::model_path() else { return };
    let model = Model::load(&path).unwrap();
    let mut s = Session::new(&model, &ember::SessionParams { n_ctx: 16, n_threads: 1, ..Default::default() }).unwrap();
    let err = s.logits().expect_err("logits before any feed");
    assert_eq!(err.status, Status::InvalidState);
    let err = s.feed(&[1; 20]).expect_err("20 tokens fit in 16");
    assert_eq!(err.status, Status::ContextFull);
    assert_eq!(s.position().unwrap(), 0, "a failed feed evaluated something");
    let err = s.feed(&[1_000_000]).expect_err("a token outside the vocabulary was fed");
    assert_eq!(err.status, Status::InvalidArgument);
    let err = s.restore(b"garbage").expect_err("garbage restored");
    assert_eq!(err.status, Status::CorruptData);
    let err = s.truncate(5).expect_err("truncate past the position");
    assert_eq!(err.status, Status::InvalidArgument);

    let vocab = Model::load_with(&path, &LoadOptions { vocab_only: true, ..Default::default() }, None).unwrap();
    assert!(!vocab.tokenize("hello", true, false).unwrap().is_empty());
    let err = Session::new(&vocab, &Default::default()).err().expect("a session on a vocab-only model");
    assert_eq!(err.status, Status::InvalidArgument);

    // Metadata only: described (architecture, tensors), but no tokenizer and no sessions.
    let meta = Model::load_with(&path, &LoadOptions { metadata_only: true, ..Default::default() }, None).unwrap();
    assert_eq!(meta.info().unwrap().architecture, "llama");
    assert_eq!(meta.tokenize("hello", true, false).unwrap_err().status, Status::Unsupported);
    let err = Session::new(&meta, &Default::default()).err().expect("a session on a metadata-only model");
    assert_eq!(err.status, Status::InvalidArgument);
    assert!(Path::new(&path).exists());
}
