//! Session::set_precision: EMBER_PRECISION_HIGH changes the logits of a quantized model (stories15M is
//! Q8_0) a little, not the greedy token; an unknown value is refused.
mod common;
use common::{model_path, PROMPT};
use ember::{Backend, Model, Precision, Session, Status};

/// The highest logit's id (ties: the lowest id, as the greedy sampler picks).
fn argmax(logits: &[f32]) -> usize {
    let mut best = 0;
    for (i, &l) in logits.iter().enumerate() {
        if l > logits[best] {
            best = i;
        }
    }
    best
}

fn prompt_logits(model: &Model, precision: Option<Precision>) -> Vec<f32> {
    let params = ember::SessionParams { n_ctx: 64, n_threads: 1, backend: Backend::Cpu, ..Default::default() };
    let mut s = Session::new(model, &params).unwrap();
    if let Some(p) = precision {
        s.set_precision(p).unwrap();
    }
    s.feed(&model.tokenize(PROMPT, true, false).unwrap()).unwrap();
    s.logits().unwrap().to_vec()
}

#[test]
fn high_precision_moves_the_logits_not_the_greedy_token() {
    let Some(path) = model_path() else { return };
    let model = Model::load(&path).unwrap();
    let default = prompt_logits(&model, None);
    let high = prompt_logits(&model, Some(Precision::High));
    // Setting the default explicitly is the same as not setting it, bit for bit.
    assert_eq!(prompt_logits(&model, Some(Precision::Default)), default);

    assert_eq!(high.len(), default.len());
    let max_diff = default.iter().zip(&high).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
    assert!(max_diff > 0.0, "EMBER_PRECISION_HIGH gave the default's logits on a Q8_0 model");
    // A rounding change, not another computation: far below the spread of the logits.
    let (lo, hi) = default.iter().fold((f32::MAX, f32::MIN), |(lo, hi), &l| (lo.min(l), hi.max(l)));
    assert!(max_diff < 0.05 * (hi - lo), "logits moved by {max_diff} (range {lo}..{hi})");
    assert_eq!(argmax(&high), argmax(&default), "the greedy token differs");
}

#[test]
fn unknown_precision_is_an_invalid_argument() {
    let Some(path) = model_path() else { return };
    let model = Model::load(&path).unwrap();
    let params = ember::SessionParams { n_ctx: 16, n_threads: 1, backend: Backend::Cpu, ..Default::default() };
    let s = Session::new(&model, &params).unwrap();
    // The safe API cannot name another value; the raw call is what a newer enum or a bad cast would send.
    for bad in [2, -1, 1000] {
        // SAFETY: a live session, used by this thread only.
        let st = unsafe { ember::sys::ember_session_set_precision(s.as_ptr(), bad) };
        assert_eq!(Status::from_raw(st), Status::InvalidArgument, "precision {bad}");
    }
}
