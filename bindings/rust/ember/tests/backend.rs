//! The session says which backend it runs on and with how many threads.
mod common;
use common::model_path;
use ember::{Backend, Model, Session};

#[test]
fn session_says_its_backend_and_threads() {
    let Some(path) = model_path() else { return };
    let model = Model::load(&path).unwrap();
    let params = ember::SessionParams { n_ctx: 256, n_threads: 1, backend: Backend::Cpu, ..Default::default() };
    let s = Session::new(&model, &params).unwrap();
    let (backend, threads) = s.backend().unwrap();
    assert!(matches!(backend, Backend::Cpu), "asked for the CPU");
    assert_eq!(threads, 1);
    assert!(ember::default_thread_count() >= 1);
}
