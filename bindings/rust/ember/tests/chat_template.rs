//! Model::apply_chat_template on stories15M, which has no chat template, so the library's ChatML
//! fallback renders: compared with ChatML written out by hand (ember.h: "<|im_start|>{role}\n{content}
//! <|im_end|>\n" per message, then "<|im_start|>assistant\n") and with the C function called directly.
mod common;
use ember::{sys, ChatMessage, Model, Status};
use std::ffi::CString;

const EXPECTED: &str = "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n\
                        <|im_start|>user\nHello! Grüße, 世界<|im_end|>\n\
                        <|im_start|>assistant\n";

fn conversation() -> Vec<ChatMessage> {
    vec![
        ChatMessage::new("system", "You are a helpful assistant."),
        ChatMessage::new("user", "Hello! Grüße, 世界"),
    ]
}

/// The C function through ember-sys, independent of the safe wrapper's code.
fn raw_render(model: &Model, msgs: &[ChatMessage], add_generation_prompt: bool) -> String {
    let owned: Vec<(CString, CString)> = msgs
        .iter()
        .map(|m| (CString::new(m.role.as_str()).unwrap(), CString::new(m.content.as_str()).unwrap()))
        .collect();
    let raw: Vec<sys::ember_chat_message> =
        owned.iter().map(|(r, c)| sys::ember_chat_message { role: r.as_ptr(), content: c.as_ptr() }).collect();
    let mut len = 0usize;
    // SAFETY: live model, raw.len() messages kept alive by `owned`, NULL buffer with capacity 0.
    let st = unsafe {
        sys::ember_chat_apply_template(model.as_ptr(), std::ptr::null(), raw.as_ptr(), raw.len(),
                                       add_generation_prompt, std::ptr::null_mut(), 0, &mut len)
    };
    assert!(st == sys::EMBER_OK || st == sys::EMBER_ERR_BUFFER_TOO_SMALL, "size query: {st}");
    let need = len;
    // A buffer one byte short (no room for the NUL) is refused, and the size still reported.
    let mut small = vec![0u8; need];
    // SAFETY: as above, with a buffer of `need` bytes.
    let st = unsafe {
        sys::ember_chat_apply_template(model.as_ptr(), std::ptr::null(), raw.as_ptr(), raw.len(),
                                       add_generation_prompt, small.as_mut_ptr() as *mut _, small.len(), &mut len)
    };
    assert_eq!(st, sys::EMBER_ERR_BUFFER_TOO_SMALL);
    assert_eq!(len, need);
    let mut buf = vec![0u8; len + 1];
    // SAFETY: as above, with a buffer of len + 1 bytes.
    let st = unsafe {
        sys::ember_chat_apply_template(model.as_ptr(), std::ptr::null(), raw.as_ptr(), raw.len(),
                                       add_generation_prompt, buf.as_mut_ptr() as *mut _, buf.len(), &mut len)
    };
    assert_eq!(st, sys::EMBER_OK);
    assert_eq!(buf[len], 0, "NUL-terminated");
    buf.truncate(len);
    String::from_utf8(buf).unwrap()
}

fn model() -> Option<Model> {
    common::model_path().map(|p| Model::load(p).expect("loading stories15M"))
}

#[test]
fn chatml_fallback_matches_hand_written_chatml_and_the_c_call() {
    let Some(model) = model() else { return };
    let msgs = conversation();
    let got = model.apply_chat_template(&msgs, true, None).unwrap();
    assert_eq!(got, EXPECTED);
    assert_eq!(got, raw_render(&model, &msgs, true));
    let no_prompt = model.apply_chat_template(&msgs, false, None).unwrap();
    assert_eq!(no_prompt, EXPECTED.strip_suffix("<|im_start|>assistant\n").unwrap());
    assert_eq!(no_prompt, raw_render(&model, &msgs, false));
}

#[test]
fn explicit_template_is_used_with_the_models_bos() {
    let Some(model) = model() else { return };
    let tmpl = "{{ bos_token }}{% for m in messages %}[{{ m.role | upper }}] {{ m.content }}\n{% endfor %}\
                {% if add_generation_prompt %}[ASSISTANT]{% endif %}";
    let msgs = conversation();
    assert_eq!(
        model.apply_chat_template(&msgs, true, Some(tmpl)).unwrap(),
        "<s>[SYSTEM] You are a helpful assistant.\n[USER] Hello! Grüße, 世界\n[ASSISTANT]"
    );
    assert_eq!(
        model.apply_chat_template(&msgs, false, Some(tmpl)).unwrap(),
        "<s>[SYSTEM] You are a helpful assistant.\n[USER] Hello! Grüße, 世界\n"
    );
}

#[test]
fn template_errors_carry_status_and_message() {
    let Some(model) = model() else { return };
    let msgs = conversation();
    let err = model.apply_chat_template(&msgs, true, Some("{{ raise_exception('boom') }}")).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument, "{err}");
    assert!(err.message.contains("boom"), "{}", err.message);
    let err = model.apply_chat_template(&msgs, true, Some("{% for %}")).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument, "{err}");
    assert!(!err.message.is_empty());
    let err = model.apply_chat_template(&msgs, true, Some("{% filter upper %}x{% endfilter %}")).unwrap_err();
    assert_eq!(err.status, Status::Unsupported, "{err}");
    // NUL bytes cannot reach C: errors, not panics.
    let err = model.apply_chat_template(&[ChatMessage::new("user", "a\0b")], true, None).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument);
    assert!(err.message.contains("NUL"), "{}", err.message);
    let err = model.apply_chat_template(&[ChatMessage::new("us\0er", "x")], true, None).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument);
    let err = model.apply_chat_template(&msgs, true, Some("x\0y")).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument);
}

#[test]
fn empty_conversation() {
    let Some(model) = model() else { return };
    assert_eq!(model.apply_chat_template(&[], true, None).unwrap(), "<|im_start|>assistant\n");
    assert_eq!(model.apply_chat_template(&[], false, None).unwrap(), "");
    assert_eq!(model.apply_chat_template(&[], false, Some("n={{ messages | length }}")).unwrap(), "n=0");
}
