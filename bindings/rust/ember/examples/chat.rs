//! A minimal streaming chat: each line read from stdin becomes a user message; the whole conversation
//! is rendered with the model's chat template (`Model::apply_chat_template`, ChatML for a model without
//! one) and only the tokens after what the session already holds are fed, so earlier turns stay in the
//! KV cache. (stories15M is a story model, not a chat model: under ChatML it rambles, but the flow is
//! the one a chat model needs.)
//!
//!     cargo run --example chat -- -m models/stories15M-q8_0.gguf [-n 128] [--temp 0.8]
//!
//! Test mode (CI compares it with ember-greedy-ref): `--prompt TEXT --print-ids` prints the generated
//! token ids one per line (greedy unless --temp is given); `--prompt TEXT` alone streams the reply.
use ember::{ChatMessage, Model, Sampler, SamplerParams, Session, SessionParams, Status};
use std::io::{self, BufRead, Write};
use std::process::ExitCode;

struct Options {
    model: String,
    n: usize,
    temp: Option<f32>,
    prompt: Option<String>,
    print_ids: bool,
}

const USAGE: &str = "usage: chat -m MODEL [-n N] [--temp T] [--prompt TEXT [--print-ids]]";

fn parse_args() -> Result<Options, String> {
    let mut o = Options { model: String::new(), n: 128, temp: None, prompt: None, print_ids: false };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "-m" => o.model = value()?,
            "-n" => o.n = value()?.parse().map_err(|_| "-n wants a count".to_string())?,
            "--temp" => o.temp = Some(value()?.parse().map_err(|_| "--temp wants a number".to_string())?),
            "--prompt" => o.prompt = Some(value()?),
            "--print-ids" => o.print_ids = true,
            "-h" | "--help" => return Err(USAGE.into()),
            other => return Err(format!("unknown option {other}\n{USAGE}")),
        }
    }
    if o.model.is_empty() {
        return Err(USAGE.into());
    }
    if o.print_ids && o.prompt.is_none() {
        return Err("--print-ids needs --prompt".into());
    }
    Ok(o)
}

/// Feeds `text` (with BOS on the session's first turn) and streams up to `n` tokens of reply to `out`.
fn reply(
    model: &Model,
    session: &mut Session,
    sampler: &mut Sampler,
    text: &str,
    n: usize,
    print_ids: bool,
    out: &mut impl Write,
) -> ember::Result<()> {
    let first_turn = session.position()? == 0;
    let mut tokens = model.tokenize(text, first_turn, false)?;
    match session.feed(&tokens) {
        Err(e) if e.status == Status::ContextFull => {
            // Out of context: start over with this turn alone.
            session.truncate(0)?;
            tokens = model.tokenize(text, true, false)?;
            session.feed(&tokens)?;
        }
        r => r?,
    }
    for piece in session.tokens(sampler, n) {
        let piece = piece?;
        if print_ids {
            if !piece.end_of_generation {
                writeln!(out, "{}", piece.token).ok();
            }
        } else {
            write!(out, "{}", piece.text).ok();
            out.flush().ok();
        }
    }
    Ok(())
}

fn run(o: Options) -> ember::Result<()> {
    let model = Model::load(&o.model)?;
    let mut session = Session::new(&model, &SessionParams::default())?;
    let default_temp = if o.prompt.is_some() && o.print_ids { 0.0 } else { 0.8 };
    let mut sampler = Sampler::new(&SamplerParams { temperature: o.temp.unwrap_or(default_temp), ..Default::default() })?;
    let stdout = io::stdout();
    let mut out = stdout.lock();
    if let Some(prompt) = &o.prompt {
        reply(&model, &mut session, &mut sampler, prompt, o.n, o.print_ids, &mut out)?;
        if !o.print_ids {
            writeln!(out).ok();
        }
        return Ok(());
    }
    eprintln!("ember {} chat: type a line, get a reply (Ctrl-D ends)", ember::version());
    let mut chat = Chat::new(&model)?;
    for line in io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        if line.trim().is_empty() {
            continue;
        }
        chat.turn(&model, &mut session, &mut sampler, line, o.n, &mut out)?;
        writeln!(out).ok();
    }
    Ok(())
}

/// End-of-turn markers as text: a model whose vocabulary lacks the template's special tokens
/// (stories15M under ChatML) spells them out, and the reply ends there.
const MARKERS: [&str; 4] = ["<|im_end|>", "<|im_start|>", "<|eot_id|>", "<end_of_turn>"];

/// The conversation so far and the tokens the session holds for it.
struct Chat {
    messages: Vec<ChatMessage>,
    in_session: Vec<ember::Token>,
    /// The BOS to put first when the template writes none (ChatML) and the tokenizer would add one.
    bos: Option<ember::Token>,
}

impl Chat {
    fn new(model: &Model) -> ember::Result<Chat> {
        let added = model.tokenize("", true, false)?;
        let bos = model.bos().filter(|b| added.first() == Some(b));
        Ok(Chat { messages: Vec::new(), in_session: Vec::new(), bos })
    }

    fn turn(
        &mut self,
        model: &Model,
        session: &mut Session,
        sampler: &mut Sampler,
        line: String,
        n: usize,
        out: &mut impl Write,
    ) -> ember::Result<()> {
        self.messages.push(ChatMessage::new("user", line));
        let text = model.apply_chat_template(&self.messages, true, None)?;
        // The template's special tokens are text: parse them; no BOS/EOS from the tokenizer (the
        // template writes its own BOS text), except a BOS where it wrote none (see `bos`).
        let mut tokens = model.tokenize(&text, false, true)?;
        if let Some(bos) = self.bos {
            if tokens.first() != Some(&bos) {
                tokens.insert(0, bos);
            }
        }
        let mut common = tokens.iter().zip(&self.in_session).take_while(|(a, b)| a == b).count();
        if common == tokens.len() {
            common -= 1; // feed at least one token, for fresh logits
        }
        session.truncate(common as u32)?;
        self.in_session.truncate(common);
        if let Err(e) = session.feed(&tokens[common..]) {
            if e.status == Status::ContextFull {
                writeln!(out, "[the context is full: starting over]").ok();
                session.truncate(0)?;
                self.in_session.clear();
                self.messages.clear();
                return Ok(());
            }
            return Err(e);
        }
        self.in_session.extend_from_slice(&tokens[common..]);
        // The library ends the reply at a marker and never hands out the marker or what could begin
        // one. The token that completes a marker was fed (an end-of-generation token is not).
        session.set_stop(&MARKERS)?;
        let mut reply = String::new();
        for piece in session.tokens(sampler, n) {
            let piece = piece?;
            if !model.is_eog(piece.token) {
                self.in_session.push(piece.token);
            }
            reply.push_str(&piece.text);
            write!(out, "{}", piece.text).ok();
            out.flush().ok();
        }
        // A reply cut by the token limit: what was held as a possible marker start is text after all.
        let rest = session.flush_stop()?;
        write!(out, "{rest}").ok();
        reply.push_str(&rest);
        self.messages.push(ChatMessage::new("assistant", reply));
        Ok(())
    }
}

fn main() -> ExitCode {
    let o = match parse_args() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    match run(o) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("chat: {e}");
            ExitCode::FAILURE
        }
    }
}
