//! Grammars through the safe API: malformed input is an error with its status; greedy output under a
//! JSON Schema is one of the schema's values, and ends with end-of-generation.
mod common;

use ember::{Grammar, Model, Sampler, Session, Status};

#[test]
fn grammar_constrains_greedy_output() {
    let Some(path) = common::model_path() else { return };
    let model = Model::load(&path).unwrap();
    let e = Grammar::from_gbnf(&model, "root ::= [a-").err().unwrap();
    assert_eq!(e.status, Status::InvalidArgument);
    assert!(e.message.contains("line 1, column"), "{}", e.message);
    let e = Grammar::from_json_schema(&model, r#"{"type":"string","format":"date"}"#).err().unwrap();
    assert_eq!(e.status, Status::Unsupported);

    let grammar = Grammar::from_json_schema(&model, r#"{"enum":["wave","flee"]}"#).unwrap();
    let mut sampler = Sampler::greedy().unwrap();
    sampler.set_grammar(Some(&grammar)).unwrap();
    drop(grammar); // the sampler keeps its own reference
    let mut session = Session::new(&model, &common::small_session_params()).unwrap();
    session.feed(&model.tokenize(common::PROMPT, true, false).unwrap()).unwrap();
    let mut text = String::new();
    for _ in 0..20 {
        let piece = session.generate_next(&mut sampler).unwrap();
        text.push_str(&piece.text);
        if piece.end_of_generation {
            break;
        }
    }
    assert!(text == "\"wave\"" || text == "\"flee\"", "{text}");
    sampler.set_grammar(None).unwrap();
}
