//! The layout test: what this crate declares must be what the library has (bindings/README.md).
//!
//! `bindings/layout/ember.layout` is printed by a C program that the C compiler checked against
//! `ember.h` ($EMBER_LAYOUT, or the committed file beside this crate). This test compares it with:
//! - the compiled crate: `size_of`, `align_of` and `offset_of!` of every struct and field, and the value
//!   of every constant (the lists below are compared with the crate's source, so none can be left out);
//! - the crate's source text (`src/lib.rs`): each field's, callback's and function's Rust types, mapped
//!   to C type strings by one table (`c_type`) and compared with the table's strings.
//!
//! It fails on any difference, on anything the crate declares that the table lacks, and on anything the
//! table lists that the crate lacks. The `drift_*` tests feed it altered tables and sources to show
//! that each kind of drift is caught.
use ember_sys::*;
use std::collections::BTreeMap;
use std::mem::{align_of, offset_of, size_of};

const SOURCE: &str = include_str!("../src/lib.rs");

// ------------------------------------------------------------------------------------------------
// What the compiler says about the crate
// ------------------------------------------------------------------------------------------------

struct FieldLayout {
    name: &'static str,
    offset: usize,
    size: usize,
}

struct StructLayout {
    name: &'static str,
    size: usize,
    align: usize,
    fields: Vec<FieldLayout>,
}

fn field_size<S, F>(_: fn(&S) -> &F) -> usize {
    size_of::<F>()
}

macro_rules! layouts {
    ($($s:ident { $($f:ident),* $(,)? })*) => {
        vec![$(StructLayout {
            name: stringify!($s),
            size: size_of::<$s>(),
            align: align_of::<$s>(),
            fields: vec![$(FieldLayout {
                name: stringify!($f),
                offset: offset_of!($s, $f),
                size: field_size(|x: &$s| &x.$f),
            }),*],
        }),*]
    };
}

macro_rules! values {
    ($($c:ident),* $(,)?) => { vec![$((stringify!($c), $c as i64)),*] };
}

fn compiled_layouts() -> Vec<StructLayout> {
    layouts! {
        ember_model_params { struct_size, progress, progress_user_data, vocab_only, log, log_user_data }
        ember_model_info { struct_size, architecture, name, n_params, size_bytes, n_ctx_train, n_vocab, n_embd,
                           n_layer, n_head, n_head_kv, kv_bytes_per_token,
                           state_bytes_per_sequence, n_kv_layers, n_recurrent_layers }
        ember_tensor_info { struct_size, name, type_, n_dims, dims, n_bytes }
        ember_session_params { struct_size, n_ctx, n_threads, n_batch, seed, backend, reserved, n_seq_max, kv_type,
                               device, gpu_layers, experts_on_cpu, gpu_budget_bytes }
        ember_sampler_params { struct_size, temperature, top_k, top_p, min_p, repeat_penalty, frequency_penalty,
                               presence_penalty, penalty_last_n, seed, n_logprobs }
        ember_token_logprob { token, logprob }
        ember_generate_params { struct_size, max_tokens, on_token, user_data, speculate, reserved_1_4, grammar, stop,
                                n_stop }
        ember_spec_params { struct_size, mode, draft_model, k, adaptive, k_max, ngram_max, n_threads }
        ember_spec_stats { struct_size, k, drafted, accepted, target_passes, generated, acceptance_rate,
                           tokens_per_pass }
        ember_engine_params { struct_size, n_ctx, n_seq_max, kv_bytes, n_threads, n_batch, backend, manual_step,
                              kv_type, reserved, device, gpu_layers, experts_on_cpu, gpu_budget_bytes, speculation,
                              spec_k, spec_ngram_max, reserved_1_10 }
        ember_placement { struct_size, n_layer, gpu_layers, experts_on_cpu, gpu_bytes, cpu_bytes, gpu_budget_bytes,
                          automatic, description }
        ember_engine_stats { struct_size, n_blocks, n_blocks_used, n_blocks_cached, block_size, n_running,
                             n_queued, kv_bytes }
        ember_memory_estimate { struct_size, weights_bytes, kv_bytes, compute_bytes, total_bytes }
        ember_request_params { struct_size, prompt, n_prompt, max_tokens, sampling, on_token, user_data, grammar, stop,
                               n_stop, speculate }
        ember_request_stats { struct_size, reserved, n_tokens, decode_steps, drafted, accepted, acceptance_rate }
        ember_device_info { struct_size, index, name, type_, score }
        ember_vulkan_device_params { struct_size, device_index, instance, physical_device, device, queue,
                                     queue_family }
        ember_cuda_device_params { struct_size, device_index, stream }
        ember_chat_message { role, content }
        ember_cpu_budget { struct_size, max_threads, priority, flags }
        ember_logit_bias { token, bias }
        ember_chat_tool { name, description, parameters }
        ember_chat_tool_call { id, name, arguments }
        ember_chat_turn { role, content, reasoning_content, tool_calls, n_tool_calls, tool_call_id, name }
        ember_chat_params { struct_size, tmpl, messages, n_messages, tools, n_tools, add_generation_prompt, reasoning, tools_json }
        ember_chat_parser_params { struct_size, format, tmpl, reasoning_open, tools, n_tools }
        ember_chat_delta { struct_size, content, content_len, reasoning, reasoning_len, first_call, n_calls, malformed }
        ember_tool_grammar_params { struct_size, format, tmpl, tools, n_tools, choice, name, parallel, tools_json }
        ember_embed_params { struct_size, backend, n_threads, n_batch, max_tokens, truncate, normalize, dimensions, pooling }
        ember_grammar_triggers { struct_size, words, n_words, tokens, n_tokens, once }
        ember_embed_request_params { struct_size, texts, lengths, tokens, n_tokens, n_texts, pooling, dimensions, normalize,
                                     truncate, max_tokens, query }
    }
}

fn compiled_values() -> Vec<(&'static str, i64)> {
    values![
        EMBER_VERSION_MAJOR, EMBER_VERSION_MINOR, EMBER_VERSION_PATCH, EMBER_ABI_VERSION,
        EMBER_OK, EMBER_END_OF_GENERATION, EMBER_STOPPED, EMBER_ERR_INVALID_ARGUMENT, EMBER_ERR_OUT_OF_MEMORY,
        EMBER_ERR_IO, EMBER_ERR_INVALID_MODEL, EMBER_ERR_UNSUPPORTED, EMBER_ERR_CANCELLED, EMBER_ERR_CONTEXT_FULL,
        EMBER_ERR_BUFFER_TOO_SMALL, EMBER_ERR_NOT_FOUND, EMBER_ERR_TYPE_MISMATCH, EMBER_ERR_BACKEND,
        EMBER_ERR_INVALID_STATE, EMBER_ERR_CORRUPT_DATA, EMBER_ERR_GRAMMAR_DEAD_END, EMBER_ERR_INTERNAL,
        EMBER_LOG_DEBUG, EMBER_LOG_INFO, EMBER_LOG_WARN, EMBER_LOG_ERROR,
        EMBER_TOKENIZE_ADD_SPECIAL, EMBER_TOKENIZE_PARSE_SPECIAL, EMBER_DETOKENIZE_RENDER_SPECIAL,
        EMBER_DETOKENIZE_KEEP_LEADING_SPACE, EMBER_CPU_BUDGET_FIXED_THREADS,
        EMBER_GPU_LAYERS_ALL, EMBER_GPU_LAYERS_AUTO, EMBER_SESSION_KEPT_STATES,
        EMBER_CPU_PRIORITY_NORMAL, EMBER_CPU_PRIORITY_LOW, EMBER_CPU_PRIORITY_HIGH,
        EMBER_BACKEND_AUTO, EMBER_BACKEND_CPU, EMBER_BACKEND_CUDA, EMBER_BACKEND_VULKAN,
        EMBER_KV_F16, EMBER_KV_Q8_0, EMBER_KV_Q4_0,
        EMBER_PRECISION_DEFAULT, EMBER_PRECISION_HIGH,
        EMBER_SPEC_OFF, EMBER_SPEC_DRAFT, EMBER_SPEC_LOOKUP, EMBER_SPEC_MTP,
        EMBER_REQUEST_QUEUED, EMBER_REQUEST_RUNNING, EMBER_REQUEST_DONE, EMBER_REQUEST_CANCELLED,
        EMBER_REQUEST_FAILED,
        EMBER_REASONING_DEFAULT, EMBER_REASONING_OFF, EMBER_REASONING_ON,
        EMBER_CHAT_FORMAT_AUTO, EMBER_CHAT_FORMAT_CONTENT, EMBER_CHAT_FORMAT_HERMES, EMBER_CHAT_FORMAT_LLAMA3,
        EMBER_CHAT_FORMAT_MISTRAL, EMBER_CHAT_FORMAT_GPT_OSS, EMBER_CHAT_FORMAT_GRANITE, EMBER_CHAT_FORMAT_PHI4,
        EMBER_TOOL_CHOICE_AUTO, EMBER_TOOL_CHOICE_NONE, EMBER_TOOL_CHOICE_REQUIRED, EMBER_TOOL_CHOICE_NAMED,
        EMBER_POOLING_MODEL, EMBER_POOLING_MEAN, EMBER_POOLING_CLS, EMBER_POOLING_LAST,
    ]
}

// ------------------------------------------------------------------------------------------------
// The table
// ------------------------------------------------------------------------------------------------

#[derive(Default)]
struct Table {
    structs: BTreeMap<String, (usize, usize)>,
    /// struct -> [(field, offset, size, C type)] in table order
    fields: BTreeMap<String, Vec<(String, usize, usize, String)>>,
    /// value name -> (enum type, or "" for a plain constant; value)
    values: BTreeMap<String, (String, i64)>,
    enum_types: BTreeMap<String, ()>,
    callbacks: BTreeMap<String, String>,
    fns: BTreeMap<String, String>,
}

fn parse_table(text: &str) -> Result<Table, String> {
    let mut t = Table::default();
    for (n, line) in text.lines().enumerate() {
        let bad = || format!("ember.layout line {}: cannot parse {:?}", n + 1, line);
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let w: Vec<&str> = line.splitn(2, ' ').collect();
        let rest = *w.get(1).ok_or_else(bad)?;
        let num = |s: &str| s.parse::<i64>().map_err(|_| bad());
        match w[0] {
            "struct" => {
                let p: Vec<&str> = rest.split(' ').collect();
                if p.len() != 3 {
                    return Err(bad());
                }
                t.structs.insert(p[0].into(), (num(p[1])? as usize, num(p[2])? as usize));
            }
            "field" => {
                let p: Vec<&str> = rest.splitn(5, ' ').collect();
                if p.len() != 5 {
                    return Err(bad());
                }
                t.fields.entry(p[0].into()).or_default().push((
                    p[1].into(),
                    num(p[2])? as usize,
                    num(p[3])? as usize,
                    p[4].into(),
                ));
            }
            "enum" => {
                let p: Vec<&str> = rest.split(' ').collect();
                if p.len() != 3 {
                    return Err(bad());
                }
                t.enum_types.insert(p[0].into(), ());
                t.values.insert(p[1].into(), (p[0].into(), num(p[2])?));
            }
            "const" => {
                let p: Vec<&str> = rest.split(' ').collect();
                if p.len() != 2 {
                    return Err(bad());
                }
                t.values.insert(p[0].into(), (String::new(), num(p[1])?));
            }
            "callback" | "fn" => {
                let (name, sig) = rest.split_once(' ').ok_or_else(bad)?;
                let map = if w[0] == "fn" { &mut t.fns } else { &mut t.callbacks };
                map.insert(name.into(), sig.into());
            }
            _ => return Err(bad()),
        }
    }
    Ok(t)
}

// ------------------------------------------------------------------------------------------------
// The crate's source
// ------------------------------------------------------------------------------------------------

#[derive(Default)]
struct Source {
    /// struct -> [(field, Rust type)]; opaque structs (only private fields) are left out
    structs: BTreeMap<String, Vec<(String, String)>>,
    /// const -> Rust type
    consts: BTreeMap<String, String>,
    /// integer alias (a C enum) -> Rust type
    aliases: BTreeMap<String, String>,
    /// callback alias -> its `fn(...) -> ...` text
    callbacks: BTreeMap<String, String>,
    /// function -> its `(...) -> ...` text
    fns: BTreeMap<String, String>,
}

/// The source without `//` comments, whitespace runs made one space.
fn normalize(src: &str) -> String {
    let mut out = String::new();
    for line in src.lines() {
        let code = match line.find("//") {
            Some(i) => &line[..i],
            None => line,
        };
        out.push_str(code);
        out.push(' ');
    }
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The text between the bracket at `open` and its partner, and the index after the partner.
fn bracketed(s: &str, open: usize) -> Option<(&str, usize)> {
    let mut depth = 0i32;
    for (i, c) in s[open..].char_indices() {
        match c {
            '(' | '{' | '<' | '[' => depth += 1,
            ')' | '}' | '>' | ']' => {
                // `->` is an arrow, not a closing angle bracket
                if c == '>' && s[..open + i].ends_with('-') {
                    continue;
                }
                depth -= 1;
                if depth == 0 {
                    return Some((&s[open + 1..open + i], open + i + 1));
                }
            }
            _ => {}
        }
    }
    None
}

/// Splits at commas outside brackets; empty pieces (a trailing comma) are dropped.
fn split_top(s: &str) -> Vec<String> {
    let (mut out, mut cur, mut depth) = (Vec::new(), String::new(), 0i32);
    let mut prev = ' ';
    for c in s.chars() {
        match c {
            '(' | '<' | '[' | '{' => depth += 1,
            '>' if prev == '-' => {}
            ')' | '>' | ']' | '}' => depth -= 1,
            ',' if depth == 0 => {
                out.push(cur.trim().to_string());
                cur.clear();
                prev = c;
                continue;
            }
            _ => {}
        }
        cur.push(c);
        prev = c;
    }
    out.push(cur.trim().to_string());
    out.into_iter().filter(|p| !p.is_empty()).collect()
}

fn ident_at(s: &str) -> String {
    s.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect()
}

fn parse_source(src: &str) -> Result<Source, String> {
    let s = normalize(src);
    let mut out = Source::default();
    let mut i = 0;
    while let Some(k) = s[i..].find("pub ") {
        let at = i + k;
        let item = &s[at + 4..];
        i = at + 4;
        if let Some(r) = item.strip_prefix("struct ") {
            let name = ident_at(r);
            let open = at + 4 + 7 + name.len() + 1;
            let (body, end) = bracketed(&s, open).ok_or(format!("struct {name}: no body"))?;
            let mut fields = Vec::new();
            for f in split_top(body) {
                if let Some(f) = f.strip_prefix("pub ") {
                    let (n, ty) = f.split_once(": ").ok_or(format!("struct {name}: field {f:?}"))?;
                    fields.push((n.trim().to_string(), ty.trim().to_string()));
                }
            }
            if !fields.is_empty() {
                out.structs.insert(name, fields);
            }
            i = end;
        } else if let Some(r) = item.strip_prefix("const ") {
            let name = ident_at(r);
            let rest = &r[name.len()..];
            let ty = rest.trim_start_matches(':').split('=').next().unwrap_or("").trim();
            out.consts.insert(name, ty.to_string());
        } else if let Some(r) = item.strip_prefix("type ") {
            let name = ident_at(r);
            let semi = r.find(';').ok_or(format!("type {name}: no ';'"))?;
            let def = r[name.len()..semi].trim().trim_start_matches('=').trim();
            // rustfmt may break `Option<...>` over lines: undo the spaces and the trailing comma
            let def = def.replace("< ", "<").replace(", >", ">").replace(" >", ">");
            let def = def.as_str();
            if let Some(f) = def.strip_prefix("Option<unsafe extern \"C\" fn") {
                out.callbacks.insert(name, f.trim_end_matches('>').trim().to_string());
            } else {
                out.aliases.insert(name, def.to_string());
            }
        } else if let Some(r) = item.strip_prefix("fn ") {
            let name = ident_at(r);
            let semi = r.find(';').ok_or(format!("fn {name}: no ';'"))?;
            out.fns.insert(name.clone(), r[name.len()..semi].trim().to_string());
        }
    }
    Ok(out)
}

// ------------------------------------------------------------------------------------------------
// Rust types as C type strings
// ------------------------------------------------------------------------------------------------

/// The C spelling of a Rust FFI type, as ember_layout.c prints it (`const char *`, `ember_model **`).
/// Names the crate declares (ember_*) stand for the C type of the same name.
fn c_type(rust: &str) -> Result<String, String> {
    let t = rust.trim();
    if let Some(inner) = t.strip_prefix("*const ") {
        if inner.trim_start().starts_with('*') {
            // *const *const c_char: C writes the outer const after the inner pointer's star.
            return Ok(format!("{}const *", c_type(inner)?));
        }
        return Ok(format!("const {} *", c_type(inner)?));
    }
    if let Some(inner) = t.strip_prefix("*mut ") {
        let c = c_type(inner)?;
        return Ok(if c.ends_with('*') { format!("{c}*") } else { format!("{c} *") });
    }
    if let Some(arr) = t.strip_prefix('[').and_then(|a| a.strip_suffix(']')) {
        let (elem, n) = arr.split_once(';').ok_or(format!("{t}: not an array"))?;
        return Ok(format!("{}[{}]", c_type(elem)?, n.trim()));
    }
    let base = t.rsplit("::").next().unwrap_or(t);
    Ok(match base {
        "u8" => "uint8_t",
        "i8" => "int8_t",
        "u16" => "uint16_t",
        "i16" => "int16_t",
        "u32" => "uint32_t",
        "i32" => "int32_t",
        "u64" => "uint64_t",
        "i64" => "int64_t",
        "usize" => "size_t",
        "f32" => "float",
        "f64" => "double",
        "bool" => "bool",
        "c_char" => "char",
        "c_void" => "void",
        "()" => "void",
        other if other.starts_with("ember_") && other.chars().all(|c| c.is_alphanumeric() || c == '_') => other,
        other => return Err(format!("no C mapping for Rust type `{other}`")),
    }
    .to_string())
}

/// `(a: T, b: U) -> R` as the table writes it: `R|T, U` (`void` for no arguments or no result).
fn c_signature(rust: &str) -> Result<String, String> {
    let open = rust.find('(').ok_or(format!("{rust}: no argument list"))?;
    let (args, end) = bracketed(rust, open).ok_or(format!("{rust}: unbalanced"))?;
    let ret = match rust[end..].trim().strip_prefix("->") {
        Some(r) => c_type(r)?,
        None => "void".to_string(),
    };
    let mut c_args = Vec::new();
    for a in split_top(args) {
        let (_, ty) = a.split_once(": ").ok_or(format!("argument {a:?} has no type"))?;
        c_args.push(c_type(ty)?);
    }
    let args = if c_args.is_empty() { "void".to_string() } else { c_args.join(", ") };
    Ok(format!("{ret}|{args}"))
}

/// A Rust field name as C spells it: `type_` stands for the C keyword-free name `type`.
fn c_field_name(rust: &str) -> &str {
    rust.strip_suffix('_').unwrap_or(rust)
}

// ------------------------------------------------------------------------------------------------
// The comparison
// ------------------------------------------------------------------------------------------------

fn compare(
    table_text: &str,
    source_text: &str,
    layouts: &[StructLayout],
    values: &[(&'static str, i64)],
) -> Vec<String> {
    let mut bad = Vec::new();
    let table = match parse_table(table_text) {
        Ok(t) => t,
        Err(e) => return vec![e],
    };
    let src = match parse_source(source_text) {
        Ok(s) => s,
        Err(e) => return vec![format!("src/lib.rs: {e}")],
    };

    // The compiled lists above must cover the source, or a declaration would escape the check.
    for (name, fields) in &src.structs {
        match layouts.iter().find(|l| l.name == name) {
            None => bad.push(format!("struct {name}: declared in src/lib.rs but not in this test's layouts! list")),
            Some(l) => {
                let listed: Vec<&str> = l.fields.iter().map(|f| f.name).collect();
                let declared: Vec<&str> = fields.iter().map(|f| f.0.as_str()).collect();
                if listed != declared {
                    bad.push(format!("struct {name}: fields in layouts! {listed:?} differ from src/lib.rs {declared:?}"));
                }
            }
        }
    }
    for name in src.consts.keys() {
        if !values.iter().any(|v| v.0 == name) {
            bad.push(format!("const {name}: declared in src/lib.rs but not in this test's values! list"));
        }
    }

    // Structs: size, alignment, and each field's offset, size and type, in order.
    for l in layouts {
        let Some(&(size, align)) = table.structs.get(l.name) else {
            bad.push(format!("struct {}: declared by the crate, absent from the table", l.name));
            continue;
        };
        if (l.size, l.align) != (size, align) {
            bad.push(format!("struct {}: size/align {}/{} in Rust, {}/{} in C", l.name, l.size, l.align, size, align));
        }
        let empty = Vec::new();
        let tf = table.fields.get(l.name).unwrap_or(&empty);
        let rust_types = src.structs.get(l.name);
        for f in &l.fields {
            let cname = c_field_name(f.name);
            let Some((_, off, fsize, ctype)) = tf.iter().find(|t| t.0 == cname) else {
                bad.push(format!("field {}.{}: declared by the crate, absent from the table", l.name, cname));
                continue;
            };
            if (f.offset, f.size) != (*off, *fsize) {
                bad.push(format!(
                    "field {}.{}: offset/size {}/{} in Rust, {}/{} in C",
                    l.name, cname, f.offset, f.size, off, fsize
                ));
            }
            if let Some(rt) = rust_types.and_then(|fs| fs.iter().find(|x| x.0 == f.name)) {
                match c_type(&rt.1) {
                    Ok(c) if &c == ctype => {}
                    Ok(c) => bad.push(format!("field {}.{}: type {} (Rust `{}`), C has {}", l.name, cname, c, rt.1, ctype)),
                    Err(e) => bad.push(format!("field {}.{}: {}", l.name, cname, e)),
                }
            }
        }
        for t in tf {
            if !l.fields.iter().any(|f| c_field_name(f.name) == t.0) {
                bad.push(format!("field {}.{}: in the table, not declared by the crate", l.name, t.0));
            }
        }
    }
    for name in table.structs.keys() {
        if !layouts.iter().any(|l| l.name == name) {
            bad.push(format!("struct {name}: in the table, not declared by the crate"));
        }
    }

    // Enum values and constants.
    for (name, value) in values {
        match table.values.get(*name) {
            None => bad.push(format!("const {name}: declared by the crate, absent from the table")),
            Some((ty, v)) => {
                if v != value {
                    bad.push(format!("const {name}: {value} in Rust, {v} in C"));
                }
                let rust_ty = src.consts.get(*name).map(String::as_str).unwrap_or("");
                if !ty.is_empty() && rust_ty != ty {
                    bad.push(format!("const {name}: typed `{rust_ty}` in Rust, a value of enum {ty} in C"));
                }
            }
        }
    }
    for name in table.values.keys() {
        if !values.iter().any(|v| v.0 == name) {
            bad.push(format!("const {name}: in the table, not declared by the crate"));
        }
    }
    // A C enum is an int on every platform the table describes.
    for ty in table.enum_types.keys() {
        match src.aliases.get(ty) {
            Some(r) if r == "i32" => {}
            Some(r) => bad.push(format!("enum {ty}: declared as `{r}`, must be i32 (C int)")),
            None => bad.push(format!("enum {ty}: in the table, no type alias in the crate")),
        }
    }

    // Callback types and functions: signatures as C strings.
    for (kind, rust, c) in [("callback", &src.callbacks, &table.callbacks), ("fn", &src.fns, &table.fns)] {
        for (name, sig) in rust {
            let Some(want) = c.get(name) else {
                bad.push(format!("{kind} {name}: declared by the crate, absent from the table"));
                continue;
            };
            match c_signature(sig) {
                Ok(have) if &have == want => {}
                Ok(have) => bad.push(format!("{kind} {name}: `{have}` in Rust, `{want}` in C")),
                Err(e) => bad.push(format!("{kind} {name}: {e}")),
            }
        }
        for name in c.keys() {
            if !rust.contains_key(name) {
                bad.push(format!("{kind} {name}: in the table, not declared by the crate"));
            }
        }
    }
    bad
}

// ------------------------------------------------------------------------------------------------
// Tests
// ------------------------------------------------------------------------------------------------

fn table_text() -> String {
    let path = std::env::var("EMBER_LAYOUT")
        .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/../../layout/ember.layout").to_string());
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read the layout table {path}: {e}"))
}

fn problems(table: &str, source: &str) -> Vec<String> {
    compare(table, source, &compiled_layouts(), &compiled_values())
}

#[test]
fn crate_matches_the_layout_table() {
    // The committed table is LP64 (x86-64 / AArch64 Linux); elsewhere sizes legitimately differ.
    if cfg!(not(target_pointer_width = "64")) {
        eprintln!("skipped: the layout table describes 64-bit targets");
        return;
    }
    let bad = problems(&table_text(), SOURCE);
    assert!(bad.is_empty(), "ember-sys differs from ember.layout:\n  {}", bad.join("\n  "));
}

#[test]
fn source_parser_sees_every_declaration() {
    // Guards the guard: were the parser to find nothing, "no difference" would mean nothing.
    let src = parse_source(SOURCE).unwrap();
    assert_eq!(src.structs.len(), compiled_layouts().len());
    assert_eq!(src.consts.len(), compiled_values().len());
    assert_eq!(src.fns.len(), parse_table(&table_text()).unwrap().fns.len());
    assert_eq!(src.callbacks.len(), 4);
    assert_eq!(src.fns["ember_session_feed"], "(session: *mut ember_session, tokens: *const ember_token, n_tokens: usize) -> ember_status");
}

#[test]
fn type_mapping() {
    assert_eq!(c_type("u32").unwrap(), "uint32_t");
    assert_eq!(c_type("usize").unwrap(), "size_t");
    assert_eq!(c_type("*const c_char").unwrap(), "const char *");
    assert_eq!(c_type("*mut *mut ember_model").unwrap(), "ember_model **");
    assert_eq!(c_type("*mut *const c_char").unwrap(), "const char **");
    assert_eq!(c_type("*mut *const f32").unwrap(), "const float **");
    assert_eq!(c_type("*const core::ffi::c_void").unwrap(), "const void *");
    assert_eq!(c_type("[i64; 4]").unwrap(), "int64_t[4]");
    assert_eq!(c_type("[c_char; 128]").unwrap(), "char[128]");
    assert!(c_type("String").is_err());
    assert_eq!(c_signature("() -> u32").unwrap(), "uint32_t|void");
    assert_eq!(c_signature("(a: *mut ember_session)").unwrap(), "void|ember_session *");
}

/// Asserts that altering the real table (or source) by `from` → `to` gives a problem containing `what`.
fn assert_caught(table_edit: Option<(&str, &str)>, source_edit: Option<(&str, &str)>, what: &str) {
    let mut table = table_text();
    let mut source = SOURCE.to_string();
    if let Some((from, to)) = table_edit {
        assert!(table.contains(from), "the table has no {from:?} to alter");
        table = table.replacen(from, to, 1);
    }
    if let Some((from, to)) = source_edit {
        assert!(source.contains(from), "the source has no {from:?} to alter");
        source = source.replacen(from, to, 1);
    }
    let bad = problems(&table, &source);
    assert!(bad.iter().any(|b| b.contains(what)), "drift not caught: wanted {what:?}, got {bad:#?}");
}

#[test]
fn drift_struct_size() {
    assert_caught(Some(("struct ember_sampler_params 56 8", "struct ember_sampler_params 64 8")), None,
                  "struct ember_sampler_params: size/align 56/8 in Rust, 64/8 in C");
}

#[test]
fn drift_field_offset() {
    assert_caught(Some(("field ember_session_params n_batch 12 4", "field ember_session_params n_batch 16 4")), None,
                  "field ember_session_params.n_batch: offset/size 12/4 in Rust, 16/4 in C");
}

#[test]
fn drift_field_type() {
    assert_caught(Some(("field ember_model_info n_vocab 44 4 uint32_t", "field ember_model_info n_vocab 44 4 int32_t")),
                  None, "field ember_model_info.n_vocab: type uint32_t");
}

#[test]
fn drift_field_added_to_header() {
    assert_caught(Some(("field ember_cuda_device_params stream 8 8 void *",
                        "field ember_cuda_device_params stream 8 8 void *\nfield ember_cuda_device_params flags 16 4 uint32_t")),
                  None, "field ember_cuda_device_params.flags: in the table, not declared by the crate");
}

#[test]
fn drift_enum_value() {
    assert_caught(Some(("enum ember_status EMBER_ERR_IO -3", "enum ember_status EMBER_ERR_IO -33")), None,
                  "const EMBER_ERR_IO: -3 in Rust, -33 in C");
}

#[test]
fn drift_enum_value_added() {
    assert_caught(Some(("enum ember_kv_type EMBER_KV_Q4_0 2", "enum ember_kv_type EMBER_KV_Q4_0 2\nenum ember_kv_type EMBER_KV_Q5_0 3")),
                  None, "const EMBER_KV_Q5_0: in the table, not declared by the crate");
}

#[test]
fn drift_function_argument() {
    assert_caught(Some(("fn ember_session_feed ember_status|ember_session *, const ember_token *, size_t",
                        "fn ember_session_feed ember_status|ember_session *, const ember_token *, uint32_t")),
                  None, "fn ember_session_feed: `ember_status|ember_session *, const ember_token *, size_t` in Rust");
    // The same drift made on the Rust side.
    assert_caught(None, Some(("n_tokens: u32) -> ember_status;", "n_tokens: u64) -> ember_status;")),
                  "fn ember_session_truncate: `ember_status|ember_session *, uint64_t` in Rust");
}

#[test]
fn drift_function_constness() {
    assert_caught(None, Some(("pub fn ember_model_free(model: *mut ember_model);", "pub fn ember_model_free(model: *const ember_model);")),
                  "fn ember_model_free: `void|const ember_model *` in Rust, `void|ember_model *` in C");
}

#[test]
fn drift_function_added_or_removed() {
    assert_caught(Some(("fn ember_cuda_set_device", "fn ember_cuda_set_device_v2 ember_status|void\nfn ember_cuda_set_device")),
                  None, "fn ember_cuda_set_device_v2: in the table, not declared by the crate");
    assert_caught(Some(("fn ember_token_bos ember_token|const ember_model *\n", "")), None,
                  "fn ember_token_bos: declared by the crate, absent from the table");
}

#[test]
fn drift_callback() {
    assert_caught(Some(("callback ember_progress_fn bool|float, void *", "callback ember_progress_fn bool|double, void *")),
                  None, "callback ember_progress_fn: `bool|float, void *` in Rust");
}
