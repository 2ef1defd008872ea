//! Generation through the binding equals the C API's (ember-greedy-ref), by every path; sessions save,
//! restore and fork; models are shared across threads.
mod common;
use common::{model_path, small_session_params, PROMPT};
use ember::{Finish, Model, Sampler, Session, Token};
use std::process::Command;
use std::sync::Arc;

const N: usize = 32;

fn greedy_ids(model: &Model, prompt: &str, n: usize) -> Vec<Token> {
    let mut s = Session::new(model, &small_session_params()).unwrap();
    s.feed(&model.tokenize(prompt, true, false).unwrap()).unwrap();
    let mut sampler = Sampler::greedy().unwrap();
    s.tokens(&mut sampler, n)
        .map(|p| p.unwrap())
        .filter(|p| !p.end_of_generation)
        .map(|p| p.token)
        .collect()
}

#[test]
fn greedy_equals_the_c_reference() {
    let (Some(path), Some(reference)) = (model_path(), common::greedy_ref()) else { return };
    let out = Command::new(&reference).arg(&path).arg(PROMPT).arg(N.to_string()).output().unwrap();
    assert!(out.status.success(), "ember-greedy-ref failed: {}", String::from_utf8_lossy(&out.stderr));
    let want: Vec<Token> = String::from_utf8(out.stdout).unwrap().lines().map(|l| l.parse().unwrap()).collect();
    assert!(!want.is_empty());
    let model = Model::load(&path).unwrap();
    assert_eq!(greedy_ids(&model, PROMPT, N), want);
}

#[test]
fn iterator_closure_and_manual_sampling_agree() {
    let Some(path) = model_path() else { return };
    let model = Model::load(&path).unwrap();
    let prompt = model.tokenize(PROMPT, true, false).unwrap();
    assert_eq!(prompt[0], model.bos().unwrap());
    let by_iter = greedy_ids(&model, PROMPT, 16);
    assert_eq!(by_iter.len(), 16);

    // One call with a streaming closure.
    let mut s = Session::new(&model, &small_session_params()).unwrap();
    s.feed(&prompt).unwrap();
    let mut sampler = Sampler::greedy().unwrap();
    let (mut ids, mut text) = (Vec::new(), String::new());
    let g = s
        .generate(&mut sampler, 16, |t, piece| {
            ids.push(t);
            text.push_str(piece);
            true
        })
        .unwrap();
    assert_eq!((g.count, g.finish), (16, Finish::MaxTokens));
    assert_eq!(ids, by_iter);
    assert_eq!(text.trim_start(), model.detokenize(&ids, false).unwrap().trim_start());
    assert_eq!(s.position().unwrap() as usize, prompt.len() + 16);

    // By hand: logits, sample, accept, feed.
    let mut s = Session::new(&model, &small_session_params()).unwrap();
    s.feed(&prompt).unwrap();
    let mut sampler = Sampler::greedy().unwrap();
    let mut manual = Vec::new();
    for _ in 0..16 {
        let logits = s.logits().unwrap();
        assert_eq!(logits.len(), model.info().unwrap().n_vocab as usize);
        let t = sampler.sample(logits).unwrap();
        sampler.accept(t).unwrap();
        s.feed(&[t]).unwrap();
        manual.push(t);
    }
    assert_eq!(manual, by_iter);

    // Stopping from the closure.
    let mut s = Session::new(&model, &small_session_params()).unwrap();
    s.feed(&prompt).unwrap();
    let mut n = 0;
    let g = s.generate(&mut sampler, 16, |_, _| { n += 1; n < 3 }).unwrap();
    assert_eq!((g.count, g.finish), (3, Finish::Stopped));
}

#[test]
fn model_info_and_tokenizer() {
    let Some(path) = model_path() else { return };
    let model = Model::load(&path).unwrap();
    let info = model.info().unwrap();
    assert_eq!(info.architecture, "llama");
    assert_eq!(info.n_vocab, 32000);
    assert!(info.n_params > 10_000_000);
    assert_eq!(model.meta_string("general.architecture").unwrap(), "llama");
    assert_eq!(model.meta_string("no.such.key").err().unwrap().status, ember::Status::NotFound);
    let ids = model.tokenize("Hello world", false, false).unwrap();
    assert_eq!(model.detokenize(&ids, false).unwrap(), "Hello world");
    let pieces: Vec<u8> = ids.iter().flat_map(|&t| model.token_to_piece(t, false).unwrap()).collect();
    assert_eq!(String::from_utf8(pieces).unwrap().trim_start(), "Hello world");
    assert!(model.is_eog(model.eos().unwrap()));
    assert!(!model.is_eog(ids[0]));
    assert_eq!(model.token_to_piece(-5, false).err().unwrap().status, ember::Status::InvalidArgument);
    assert!(ember::version().starts_with("0."));
    assert_eq!(ember::abi_version(), ember::sys::EMBER_ABI_VERSION);
}

#[test]
fn save_restore_and_fork_repeat_the_same_tokens() {
    let Some(path) = model_path() else { return };
    let model = Model::load(&path).unwrap();
    let mut s = Session::new(&model, &ember::SessionParams { n_seq_max: 2, ..small_session_params() }).unwrap();
    s.feed(&model.tokenize(PROMPT, true, false).unwrap()).unwrap();
    let state = s.save().unwrap();
    let mut fork = s.fork().unwrap();
    let take = |s: &mut Session| -> Vec<Token> {
        let mut sampler = Sampler::greedy().unwrap();
        s.tokens(&mut sampler, 8).map(|p| p.unwrap().token).collect()
    };
    let first = take(&mut s);
    s.restore(&state).unwrap();
    assert_eq!(take(&mut s), first, "restored state continued differently");
    // The fork outlives its parent.
    drop(s);
    assert_eq!(take(&mut fork), first, "the fork continued differently");

    let file = std::env::temp_dir().join(format!("ember-rust-state-{}.bin", std::process::id()));
    let mut s = Session::new(&model, &small_session_params()).unwrap();
    s.feed(&model.tokenize(PROMPT, true, false).unwrap()).unwrap();
    s.save_file(&file).unwrap();
    let mut t = Session::new(&model, &small_session_params()).unwrap();
    t.restore_file(&file).unwrap();
    std::fs::remove_file(&file).ok();
    assert_eq!(t.position().unwrap(), s.position().unwrap());
    assert_eq!(take(&mut t), first);
    s.truncate(1).unwrap();
    assert_eq!(s.position().unwrap(), 1);
}

#[test]
fn one_model_shared_by_sessions_on_threads() {
    let Some(path) = model_path() else { return };
    let model = Arc::new(Model::load(&path).unwrap());
    let want = greedy_ids(&model, PROMPT, 12);
    let threads: Vec<_> = (0..2)
        .map(|_| {
            let model = Arc::clone(&model);
            std::thread::spawn(move || greedy_ids(&model, PROMPT, 12))
        })
        .collect();
    for t in threads {
        assert_eq!(t.join().unwrap(), want);
    }
    // A session (with its sampler) moved to another thread, borrowing a model that outlives the scope.
    std::thread::scope(|scope| {
        let mut s = Session::new(&model, &small_session_params()).unwrap();
        s.feed(&model.tokenize(PROMPT, true, false).unwrap()).unwrap();
        let mut sampler = Sampler::greedy().unwrap();
        let got = scope
            .spawn(move || s.tokens(&mut sampler, 12).map(|p| p.unwrap().token).collect::<Vec<_>>())
            .join()
            .unwrap();
        assert_eq!(got, want);
    });
}
