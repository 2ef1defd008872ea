//! Structured output through the safe API on stories15M: a JSON Schema on `generate_with` and on an
//! engine request gives JSON that parses and validates; stop strings end `generate_with`,
//! `generate_next` and requests without emitting the stop text; logprobs are log-probabilities, sorted,
//! and name the sampled token.
mod common;

use ember::{
    Engine, EngineParams, GenerateOptions, Grammar, Logprobs, Model, RequestOptions, Sampler, SamplerParams, Session,
    Status, Token,
};
use std::collections::BTreeMap;

const NPC_SCHEMA: &str = r#"{"type":"object","properties":{
  "say":{"type":"string","maxLength":30},
  "action":{"enum":["wave","attack","flee"]}},
  "required":["say","action"]}"#;

/// A JSON value, as far as the test needs one.
#[derive(Debug, PartialEq)]
enum Json {
    Null,
    Bool(bool),
    Number(f64),
    Str(String),
    Array(Vec<Json>),
    Object(BTreeMap<String, Json>),
}

/// A strict JSON parser (RFC 8259, the whole text one value): what the constrained text must be.
struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn parse(text: &str) -> Result<Json, String> {
        let mut p = Parser { s: text.as_bytes(), i: 0 };
        let v = p.value()?;
        p.ws();
        if p.i != p.s.len() {
            return Err(format!("text after the value at {}", p.i));
        }
        Ok(v)
    }
    fn ws(&mut self) {
        while self.i < self.s.len() && b" \t\r\n".contains(&self.s[self.i]) {
            self.i += 1;
        }
    }
    fn eat(&mut self, b: u8) -> Result<(), String> {
        self.ws();
        if self.s.get(self.i) == Some(&b) {
            self.i += 1;
            Ok(())
        } else {
            Err(format!("expected '{}' at {}", b as char, self.i))
        }
    }
    fn literal(&mut self, word: &str, v: Json) -> Result<Json, String> {
        if self.s[self.i..].starts_with(word.as_bytes()) {
            self.i += word.len();
            Ok(v)
        } else {
            Err(format!("bad literal at {}", self.i))
        }
    }
    fn value(&mut self) -> Result<Json, String> {
        self.ws();
        match self.s.get(self.i).copied() {
            Some(b'{') => {
                self.i += 1;
                let mut m = BTreeMap::new();
                self.ws();
                if self.s.get(self.i) == Some(&b'}') {
                    self.i += 1;
                    return Ok(Json::Object(m));
                }
                loop {
                    self.ws();
                    let Json::Str(k) = self.string()? else { unreachable!() };
                    self.eat(b':')?;
                    if m.insert(k.clone(), self.value()?).is_some() {
                        return Err(format!("key {k} twice"));
                    }
                    self.ws();
                    match self.s.get(self.i) {
                        Some(b',') => self.i += 1,
                        Some(b'}') => {
                            self.i += 1;
                            return Ok(Json::Object(m));
                        }
                        _ => return Err(format!("bad object at {}", self.i)),
                    }
                }
            }
            Some(b'[') => {
                self.i += 1;
                let mut a = Vec::new();
                self.ws();
                if self.s.get(self.i) == Some(&b']') {
                    self.i += 1;
                    return Ok(Json::Array(a));
                }
                loop {
                    a.push(self.value()?);
                    self.ws();
                    match self.s.get(self.i) {
                        Some(b',') => self.i += 1,
                        Some(b']') => {
                            self.i += 1;
                            return Ok(Json::Array(a));
                        }
                        _ => return Err(format!("bad array at {}", self.i)),
                    }
                }
            }
            Some(b'"') => self.string(),
            Some(b't') => self.literal("true", Json::Bool(true)),
            Some(b'f') => self.literal("false", Json::Bool(false)),
            Some(b'n') => self.literal("null", Json::Null),
            _ => {
                let start = self.i;
                while self.i < self.s.len() && b"+-0123456789.eE".contains(&self.s[self.i]) {
                    self.i += 1;
                }
                let t = std::str::from_utf8(&self.s[start..self.i]).unwrap();
                let leading_zero = t.trim_start_matches('-').starts_with('0') && t.trim_start_matches('-').len() > 1
                    && !t.trim_start_matches('-')[1..].starts_with(['.', 'e', 'E']);
                match t.parse::<f64>() {
                    Ok(v) if !t.is_empty() && !t.starts_with('+') && !leading_zero => Ok(Json::Number(v)),
                    _ => Err(format!("bad number {t:?} at {start}")),
                }
            }
        }
    }
    fn string(&mut self) -> Result<Json, String> {
        if self.s.get(self.i) != Some(&b'"') {
            return Err(format!("expected a string at {}", self.i));
        }
        self.i += 1;
        let mut out = Vec::new();
        loop {
            match self.s.get(self.i).copied() {
                None => return Err("unterminated string".into()),
                Some(b'"') => {
                    self.i += 1;
                    return String::from_utf8(out).map(Json::Str).map_err(|e| e.to_string());
                }
                Some(b'\\') => {
                    let e = self.s.get(self.i + 1).copied().ok_or("bad escape")?;
                    self.i += 2;
                    match e {
                        b'"' | b'\\' | b'/' => out.push(e),
                        b'b' => out.push(8),
                        b'f' => out.push(12),
                        b'n' => out.push(b'\n'),
                        b'r' => out.push(b'\r'),
                        b't' => out.push(b'\t'),
                        b'u' => {
                            let hex = std::str::from_utf8(self.s.get(self.i..self.i + 4).ok_or("bad \\u")?).unwrap();
                            let c = u32::from_str_radix(hex, 16).map_err(|e| e.to_string())?;
                            self.i += 4;
                            let ch = char::from_u32(c).unwrap_or('\u{fffd}'); // lone surrogates: not checked
                            out.extend_from_slice(ch.to_string().as_bytes());
                        }
                        _ => return Err(format!("bad escape at {}", self.i)),
                    }
                }
                Some(c) if c < 0x20 => return Err(format!("control character in a string at {}", self.i)),
                Some(c) => {
                    out.push(c);
                    self.i += 1;
                }
            }
        }
    }
}

/// Parses `text` as the NPC schema's object and checks it against the schema.
fn valid_npc(text: &str) {
    let v = Parser::parse(text).unwrap_or_else(|e| panic!("constrained output {text:?} is not JSON: {e}"));
    let Json::Object(m) = v else { panic!("{text:?} is not an object") };
    assert_eq!(m.len(), 2, "{text:?}: properties beyond the schema's");
    let Some(Json::Str(say)) = m.get("say") else { panic!("{text:?}: say missing or not a string") };
    assert!(say.chars().count() <= 30, "{text:?}: say longer than 30");
    let Some(Json::Str(action)) = m.get("action") else { panic!("{text:?}: action missing") };
    assert!(["wave", "attack", "flee"].contains(&action.as_str()), "{text:?}: action not in the enum");
}

#[test]
fn json_parser_refuses_what_is_not_json() {
    for bad in ["", "{", r#"{"a":1,}"#, "[1 2]", "01", r#""a"x"#, "tru", r#"{"a" 1}"#] {
        assert!(Parser::parse(bad).is_err(), "{bad:?} parsed");
    }
    assert_eq!(Parser::parse(r#" {"a":[1,-2.5e3,"x\n"],"b":null} "#).map(|_| ()), Ok(()));
}

fn prompted<'m>(model: &'m Model) -> Session<'m> {
    let mut s = Session::new(model, &common::small_session_params()).unwrap();
    s.feed(&model.tokenize(common::PROMPT, true, false).unwrap()).unwrap();
    s
}

fn engine(model: &Model) -> Engine<'_> {
    Engine::new(model, &EngineParams { n_ctx: 256, n_seq_max: 2, n_threads: 2, ..Default::default() }).unwrap()
}

/// Waits for a request and gives its text.
fn request_text(e: &Engine, prompt: &[Token], options: &RequestOptions) -> String {
    let r = e.submit_with(prompt, options, None).unwrap();
    assert!(r.wait(None).unwrap());
    assert_eq!(r.error().unwrap().map(|e| e.message), None);
    r.text().unwrap()
}

#[test]
fn json_schema_on_generate_and_request() {
    let Some(path) = common::model_path() else { return };
    let model = Model::load(&path).unwrap();
    let grammar = Grammar::from_json_schema(&model, NPC_SCHEMA).unwrap();
    for temperature in [0.0, 1.0] {
        let mut sampler = Sampler::new(&SamplerParams { temperature, seed: 7, ..Default::default() }).unwrap();
        let mut session = prompted(&model);
        let mut text = String::new();
        let g = session
            .generate_with(&mut sampler, &GenerateOptions { max_tokens: 120, grammar: Some(&grammar), ..Default::default() }, |_, t| {
                text.push_str(t);
                true
            })
            .unwrap();
        assert_eq!(g.finish, ember::Finish::EndOfGeneration, "temperature {temperature}: {text:?}");
        valid_npc(&text);
    }
    // On an engine request, which keeps its own reference to the grammar.
    let e = engine(&model);
    let prompt = model.tokenize(common::PROMPT, true, false).unwrap();
    let g2 = Grammar::from_json_schema(&model, NPC_SCHEMA).unwrap();
    let r = e.submit_with(&prompt, &RequestOptions { max_tokens: 120, grammar: Some(&g2), ..Default::default() }, None).unwrap();
    drop(g2);
    assert!(r.wait(None).unwrap());
    valid_npc(&r.text().unwrap());
}

#[test]
fn stop_strings_end_the_text_without_it() {
    let Some(path) = common::model_path() else { return };
    let model = Model::load(&path).unwrap();
    // Greedy text, and a stop string from its middle: every case expects the text before it.
    let mut pieces = Vec::new();
    let mut greedy = Sampler::greedy().unwrap();
    for p in prompted(&model).tokens(&mut greedy, 40) {
        pieces.push(p.unwrap().text);
    }
    let full: String = pieces.concat();
    assert!(full.len() >= 40 && full.is_ascii(), "{full:?}");
    let stop = &full[full.len() / 2..full.len() / 2 + 4];
    let before = &full[..full.find(stop).unwrap()];

    let mut text = String::new();
    let g = prompted(&model)
        .generate_with(&mut Sampler::greedy().unwrap(), &GenerateOptions { max_tokens: 40, stop: &["never appears", stop], ..Default::default() }, |_, t| {
            text.push_str(t);
            true
        })
        .unwrap();
    assert_eq!((text.as_str(), g.finish), (before, ember::Finish::EndOfGeneration), "stop {stop:?}");

    // generate_next: the step that completes the stop string ends generation.
    let mut session = prompted(&model);
    session.set_stop(&[stop]).unwrap();
    let mut sampler = Sampler::greedy().unwrap();
    let mut text = String::new();
    let mut ended = false;
    for p in session.tokens(&mut sampler, 40) {
        let p = p.unwrap();
        text.push_str(&p.text);
        ended = p.end_of_generation;
    }
    assert!(ended);
    assert_eq!(text, before);

    // Ending before the match is decided: flush_stop gives what is held. The stop string begins with
    // the last two bytes of the 10th (or a later, long enough) step's text and never completes.
    let k = (9..pieces.len()).find(|&i| pieces[i].len() >= 2).unwrap();
    let held = &pieces[k][pieces[k].len() - 2..];
    let mut session = prompted(&model);
    session.set_stop(&[&format!("{held}\u{1}")]).unwrap();
    let mut sampler = Sampler::greedy().unwrap();
    let mut text = String::new();
    for p in session.tokens(&mut sampler, k + 1) {
        text.push_str(&p.unwrap().text);
    }
    let rest = session.flush_stop().unwrap();
    assert_eq!(rest, held);
    assert_eq!(text + &rest, pieces[..=k].concat());
    assert_eq!(session.set_stop(&["a\0b"]).err().map(|e| e.status), Some(Status::InvalidArgument));
    assert_eq!(session.set_stop(&["x"; 17]).err().map(|e| e.status), Some(Status::InvalidArgument));

    // An engine request: its text ends before the stop string.
    let e = engine(&model);
    let prompt = model.tokenize(common::PROMPT, true, false).unwrap();
    let whole = request_text(&e, &prompt, &RequestOptions { max_tokens: 40, ..Default::default() });
    let Some(i) = whole.find(stop) else {
        eprintln!("skipped the request case: the engine's text {whole:?} lacks {stop:?}");
        return;
    };
    let cut = request_text(&e, &prompt, &RequestOptions { max_tokens: 40, stop: &[stop], ..Default::default() });
    assert_eq!(cut, &whole[..i]);
}

/// Log-probabilities <= 0, best first, n of them, and the sampled token's is its own.
fn check_logprobs(l: &Logprobs, n: usize, token: Token) {
    assert_eq!(l.sampled.token, token);
    assert!(l.sampled.logprob <= 0.0);
    assert_eq!(l.top.len(), n);
    for (i, t) in l.top.iter().enumerate() {
        assert!(t.logprob <= 0.0 && (i == 0 || t.logprob <= l.top[i - 1].logprob), "{:?}", l.top);
        if t.token == token {
            assert_eq!(t.logprob, l.sampled.logprob);
        }
    }
}

#[test]
fn logprobs_are_sorted_log_probabilities() {
    let Some(path) = common::model_path() else { return };
    let model = Model::load(&path).unwrap();
    let params = SamplerParams { seed: 3, n_logprobs: 5, ..Default::default() };
    let mut sampler = Sampler::new(&params).unwrap();
    assert_eq!(sampler.logprobs().err().map(|e| e.status), Some(Status::InvalidState));
    let mut session = prompted(&model);
    for _ in 0..8 {
        let p = session.generate_next(&mut sampler).unwrap();
        check_logprobs(&sampler.logprobs().unwrap(), 5, p.token);
    }
    // Greedy: the sampled token is the most probable one.
    let mut greedy = Sampler::new(&SamplerParams { n_logprobs: 3, ..SamplerParams::greedy() }).unwrap();
    let p = prompted(&model).generate_next(&mut greedy).unwrap();
    let l = greedy.logprobs().unwrap();
    check_logprobs(&l, 3, p.token);
    assert_eq!(l.top[0].token, p.token);

    // Per token of an engine request.
    let e = engine(&model);
    let prompt = model.tokenize(common::PROMPT, true, false).unwrap();
    let r = e.submit_with(&prompt, &RequestOptions { max_tokens: 6, sampling: Some(&params), ..Default::default() }, None).unwrap();
    assert!(r.wait(None).unwrap());
    let (tokens, _) = r.poll().unwrap();
    assert_eq!(tokens.len(), 6);
    for (i, &t) in tokens.iter().enumerate() {
        check_logprobs(&r.logprobs(i).unwrap(), 5, t);
    }
    assert_eq!(r.logprobs(tokens.len()).err().map(|e| e.status), Some(Status::NotFound));
}
