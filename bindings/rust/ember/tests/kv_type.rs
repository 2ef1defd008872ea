//! SessionParams::kv_type: each cache type makes a session whose saved state the others refuse; the
//! quantized ones save fewer bytes than f16, Q4_0 fewer than Q8_0.
mod common;
use common::{model_path, PROMPT};
use ember::{Backend, KvType, Model, Session};

fn saved_state(model: &Model, kv_type: KvType) -> Vec<u8> {
    let params = ember::SessionParams { n_ctx: 64, n_threads: 1, backend: Backend::Cpu, kv_type, ..Default::default() };
    let mut s = Session::new(model, &params).unwrap();
    s.feed(&model.tokenize(PROMPT, true, false).unwrap()).unwrap();
    s.save().unwrap()
}

#[test]
fn each_cache_type_keeps_its_own_states() {
    let Some(path) = model_path() else { return };
    let model = Model::load(&path).unwrap();
    let f16 = saved_state(&model, KvType::F16);
    let q8 = saved_state(&model, KvType::Q8_0);
    let q4 = saved_state(&model, KvType::Q4_0);
    assert!(q4.len() < q8.len() && q8.len() < f16.len());
    let params = ember::SessionParams { n_ctx: 64, n_threads: 1, backend: Backend::Cpu, kv_type: KvType::Q4_0, ..Default::default() };
    let mut s = Session::new(&model, &params).unwrap();
    s.restore(&q4).unwrap();
    assert!(s.restore(&q8).is_err());
    assert!(s.restore(&f16).is_err());
}
