//! The engine: requests batched on a worker thread (or stepped by hand) give the session's greedy tokens.
mod common;
use common::{model_path, small_session_params, PROMPT};
use ember::{Engine, EngineParams, Model, RequestState, Sampler, Session, Token};
use std::sync::{Arc, Mutex};

fn send_sync<T: Send + Sync>() {}

fn greedy(model: &Model, prompt: &[Token], n: usize) -> Vec<Token> {
    let mut s = Session::new(model, &small_session_params()).unwrap();
    s.feed(prompt).unwrap();
    let mut sampler = Sampler::greedy().unwrap();
    s.tokens(&mut sampler, n).map(|p| p.unwrap()).filter(|p| !p.end_of_generation).map(|p| p.token).collect()
}

#[test]
fn requests_give_the_sessions_greedy_tokens() {
    send_sync::<Engine<'static>>();
    send_sync::<ember::Request>();
    let Some(path) = model_path() else { return };
    let model = Model::load(&path).unwrap();
    let prompt = model.tokenize(PROMPT, true, false).unwrap();
    let want = greedy(&model, &prompt, 12);

    let engine = Engine::new(&model, &EngineParams { n_ctx: 256, n_seq_max: 2, n_threads: 2, ..Default::default() }).unwrap();
    let streamed = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&streamed);
    let a = engine
        .submit(&prompt, 12, None, Some(Box::new(move |t, _text| { sink.lock().unwrap().push(t); true })))
        .unwrap();
    let b = engine.submit(&prompt, 12, None, None).unwrap();
    assert!(a.wait(None).unwrap() && b.wait(None).unwrap());
    let (ta, sa) = a.poll().unwrap();
    let (tb, sb) = b.poll().unwrap();
    assert_eq!((sa, sb), (RequestState::Done, RequestState::Done));
    assert_eq!(ta, want);
    assert_eq!(tb, want);
    assert_eq!(*streamed.lock().unwrap(), want);
    assert_eq!(a.text().unwrap().trim_start(), model.detokenize(&want, false).unwrap().trim_start());
    assert!(a.error().unwrap().is_none());

    let err = engine.submit(&[], 4, None, None).err().expect("an empty prompt was accepted");
    assert_eq!(err.status, ember::Status::InvalidArgument);
    // A request handle outlives its engine (the header allows it).
    let c = engine.submit(&prompt, 0, None, None).unwrap();
    c.cancel().unwrap();
    drop(engine);
    c.wait(None).unwrap();
    assert_eq!(c.poll().unwrap().1, RequestState::Cancelled);
}

#[test]
fn manual_steps() {
    let Some(path) = model_path() else { return };
    let model = Model::load(&path).unwrap();
    let prompt = model.tokenize(PROMPT, true, false).unwrap();
    let engine = Engine::new(&model, &EngineParams { n_ctx: 128, n_seq_max: 1, n_threads: 2, manual_step: true, ..Default::default() }).unwrap();
    let r = engine.submit(&prompt, 6, Some(&ember::SamplerParams::greedy()), None).unwrap();
    let mut steps = 0;
    while engine.step().unwrap() {
        steps += 1;
        assert!(steps < 100);
    }
    assert_eq!(r.poll().unwrap(), (greedy(&model, &prompt, 6), RequestState::Done));
}

#[test]
fn embedding_requests_beside_a_generation() {
    let Some(path) = model_path() else { return };
    let model = Model::load(&path).unwrap();
    let prompt = model.tokenize(PROMPT, true, false).unwrap();
    let engine = Engine::new(&model, &EngineParams { n_ctx: 256, n_seq_max: 2, n_threads: 2, ..Default::default() }).unwrap();
    let gen = engine.submit(&prompt, 8, None, None).unwrap();
    let options = ember::EmbedOptions { pooling: ember::Pooling::Mean, ..Default::default() };
    let r = engine.submit_embed(&[PROMPT, "another text", PROMPT], &options).unwrap();
    assert!(r.wait(None).unwrap() && gen.wait(None).unwrap());
    let v = r.embeddings().unwrap();
    assert_eq!(v.len(), 3);
    assert_eq!(v[0].len(), r.embedding_dim());
    let norm: f64 = v[0].iter().map(|&x| x as f64 * x as f64).sum();
    assert!((norm - 1.0).abs() < 1e-4);
    assert_eq!(v[0], v[2]);
    assert_eq!(gen.embedding_dim(), 0);
    // A generating model has no pooling of its own.
    let err = engine.submit_embed(&["x"], &ember::EmbedOptions::default()).err().expect("the model's pooling accepted");
    assert_eq!(err.status, ember::Status::InvalidArgument);
    // A query is for a reranking model only.
    let err = engine.submit_rerank("a query", &["x"], &options).err().expect("a query on a generating model accepted");
    assert_eq!(err.status, ember::Status::InvalidArgument);
}
