//! A minimal streaming chat: each line read from stdin is fed to the model and its reply streamed back.
//!
//!     cargo run --example chat -- -m models/stories15M-q8_0.gguf [-n 128] [--temp 0.8]
//!
//! Test mode (CI compares it with ember-greedy-ref): `--prompt TEXT --print-ids` prints the generated
//! token ids one per line (greedy unless --temp is given); `--prompt TEXT` alone streams the reply.
use ember::{Model, Sampler, SamplerParams, Session, SessionParams, Status};
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
    for line in io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        if line.trim().is_empty() {
            continue;
        }
        reply(&model, &mut session, &mut sampler, &line, o.n, false, &mut out)?;
        writeln!(out).ok();
    }
    Ok(())
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
