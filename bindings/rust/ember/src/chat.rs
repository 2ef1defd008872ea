//! Chat templates: a conversation rendered to the prompt text the model was trained on.
use crate::error::{Error, Result};
use crate::model::Model;
use crate::strings::{str_to_c, two_call};
use ember_sys as sys;
use std::ffi::CString;
use std::ptr;

/// One message of a conversation for [`Model::apply_chat_template`]: a role ("system", "user",
/// "assistant", ... whatever the template knows) and its text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChatMessage {
    pub role: String,
    pub content: String,
}

impl ChatMessage {
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> ChatMessage {
        ChatMessage { role: role.into(), content: content.into() }
    }
}

impl Model {
    /// Renders `messages` with a chat template (`ember_chat_apply_template`): `template` None uses the
    /// model's own (`tokenizer.chat_template`, or ChatML for a model without one), Some uses the Jinja
    /// text given. `add_generation_prompt` ends the text with what opens the assistant's reply.
    ///
    /// Tokenize the result with `parse_special` true and, since templates write their own BOS text,
    /// usually `add_special` false (ember.h, "Tokenizing the result", says when not).
    ///
    /// Errors: `InvalidArgument` for a template syntax or rendering error (with the template line), or
    /// the template's `raise_exception(msg)` (the message is `msg`), or a NUL byte inside a role,
    /// content or the template; `Unsupported` for a Jinja construct outside ember's subset.
    pub fn apply_chat_template(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
        template: Option<&str>,
    ) -> Result<String> {
        let tmpl = template.map(|t| str_to_c(t, "chat template")).transpose()?;
        // The CStrings own the bytes the C structs point to; they live until the end of this function,
        // past both C calls.
        let mut owned: Vec<(CString, CString)> = Vec::with_capacity(messages.len());
        for (i, m) in messages.iter().enumerate() {
            let role = CString::new(m.role.as_str())
                .map_err(|_| Error::invalid_argument(format!("message {i}: role {:?} contains a NUL byte", m.role)))?;
            let content = CString::new(m.content.as_str())
                .map_err(|_| Error::invalid_argument(format!("message {i}: content contains a NUL byte")))?;
            owned.push((role, content));
        }
        let raw: Vec<sys::ember_chat_message> = owned
            .iter()
            .map(|(r, c)| sys::ember_chat_message { role: r.as_ptr(), content: c.as_ptr() })
            .collect();
        let tmpl_ptr = tmpl.as_ref().map_or(ptr::null(), |t| t.as_ptr());
        let msgs_ptr = if raw.is_empty() { ptr::null() } else { raw.as_ptr() };
        let bytes = two_call::<u8>(1, |buf, cap, len| unsafe {
            // SAFETY: a live model; tmpl NULL or a C string; raw.len() messages whose strings `owned`
            // keeps alive; buf has cap bytes or is NULL with cap 0.
            sys::ember_chat_apply_template(
                self.as_ptr(),
                tmpl_ptr,
                msgs_ptr,
                raw.len(),
                add_generation_prompt,
                buf as *mut _,
                cap,
                len,
            )
        })?;
        // UTF-8 in gives UTF-8 out (Jinja strings count code points, so no slice cuts a character).
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }
}
