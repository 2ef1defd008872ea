//! Cancellation from another thread, Send/Sync as ember.h allows, panics kept out of C, drop order.
mod common;
use common::{model_path, small_session_params, PROMPT};
use ember::{CancelHandle, Finish, LoadOptions, Model, Sampler, Session, Status};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

// Compile-time: these fail to build if an impl is missing (the negative cases are the compile_fail
// doctests in src/lib.rs).
fn send_sync<T: Send + Sync>() {}
fn send<T: Send>() {}
#[test]
fn thread_safety_is_as_the_header_says() {
    send_sync::<Model>();
    send_sync::<CancelHandle>();
    send::<Session<'static>>();
    send::<Sampler>();
}

#[test]
fn feed_cancelled_from_another_thread() {
    let Some(path) = model_path() else { return };
    let model = Model::load(&path).unwrap();
    // One token per pass makes the feed long enough (hundreds of passes) to be caught in the middle.
    let mut s = Session::new(&model, &ember::SessionParams { n_batch: 1, ..small_session_params() }).unwrap();
    let mut prompt = model.tokenize(PROMPT, true, false).unwrap();
    while prompt.len() < 200 {
        prompt.extend_from_slice(&model.tokenize(" and they lived happily ever after", false, false).unwrap());
    }
    let handle = s.cancel_handle();
    let done = Arc::new(AtomicBool::new(false));
    let canceller = {
        let done = Arc::clone(&done);
        // A cancel only affects a call in progress, so keep cancelling until the feed has returned.
        std::thread::spawn(move || {
            while !done.load(Ordering::Acquire) {
                handle.cancel();
                std::thread::sleep(Duration::from_millis(1));
            }
        })
    };
    let r = s.feed(&prompt);
    done.store(true, Ordering::Release);
    canceller.join().unwrap();
    let err = r.expect_err("the feed was not cancelled");
    assert_eq!(err.status, Status::Cancelled, "{err}");
    assert_eq!(s.position().unwrap(), 0, "a cancelled feed left tokens behind");
    // The next call starts uncancelled.
    s.feed(&prompt[..8]).unwrap();
    assert_eq!(s.position().unwrap(), 8);
}

#[test]
fn generation_cancelled_from_another_thread() {
    let Some(path) = model_path() else { return };
    let model = Model::load(&path).unwrap();
    let mut s = Session::new(&model, &small_session_params()).unwrap();
    s.feed(&model.tokenize(PROMPT, true, false).unwrap()).unwrap();
    let handle = s.cancel_handle();
    let mut sampler = Sampler::greedy().unwrap();
    let mut n = 0;
    let g = s
        .generate(&mut sampler, 100, |_, _| {
            n += 1;
            if n == 3 {
                // Cancel from another thread while the generation is running, and wait for it.
                let h = handle.clone();
                std::thread::spawn(move || h.cancel()).join().unwrap();
            }
            true
        })
        .unwrap();
    assert_eq!(g.finish, Finish::Stopped);
    assert!(g.count >= 3 && g.count < 100, "{} tokens after a cancel", g.count);
}

#[test]
fn token_iteration_cancelled_from_another_thread() {
    let Some(path) = model_path() else { return };
    let model = Model::load(&path).unwrap();
    let mut s = Session::new(&model, &small_session_params()).unwrap();
    s.feed(&model.tokenize(PROMPT, true, false).unwrap()).unwrap();
    let handle = s.cancel_handle();
    let mut sampler = Sampler::greedy().unwrap();
    let mut ok = 0;
    let mut cancelled = false;
    for piece in s.tokens(&mut sampler, 100) {
        match piece {
            Ok(_) => ok += 1,
            Err(e) => {
                assert_eq!(e.status, Status::Cancelled, "{e}");
                cancelled = true;
            }
        }
        if ok == 3 {
            // Between two steps, from another thread: kept for the next step, which stops.
            let h = handle.clone();
            std::thread::spawn(move || h.cancel()).join().unwrap();
        }
    }
    assert!(cancelled, "the iteration ran on after a cancel ({ok} pieces)");
    assert_eq!(ok, 3);
    // A new call starts uncancelled.
    assert!(s.generate_next(&mut sampler).is_ok());
}

#[test]
fn load_cancelled_by_progress_and_panics_stay_out_of_c() {
    let Some(path) = model_path() else { return };
    let mut calls = 0;
    let mut stop = |_p: f32| {
        calls += 1;
        false
    };
    let err = Model::load_with(&path, &LoadOptions::default(), Some(&mut stop)).err().expect("not cancelled");
    assert_eq!(err.status, Status::Cancelled);
    assert!(calls >= 1);

    let mut seen = Vec::new();
    let mut record = |p: f32| {
        seen.push(p);
        true
    };
    Model::load_with(&path, &LoadOptions::default(), Some(&mut record)).unwrap();
    assert!(seen.iter().all(|p| (0.0..=1.0).contains(p)) && !seen.is_empty());

    // A panic in the progress closure cancels the load and resumes on this side of the FFI.
    let caught = std::panic::catch_unwind(|| {
        let mut boom = |_p: f32| -> bool { panic!("progress panicked") };
        let _ = Model::load_with(&path, &LoadOptions::default(), Some(&mut boom));
    });
    let payload = caught.expect_err("the panic was swallowed");
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"progress panicked"));

    // Likewise in a streaming closure; the session stays usable.
    let model = Model::load(&path).unwrap();
    let mut s = Session::new(&model, &small_session_params()).unwrap();
    s.feed(&model.tokenize(PROMPT, true, false).unwrap()).unwrap();
    let mut sampler = Sampler::greedy().unwrap();
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        s.generate(&mut sampler, 8, |_, _| panic!("token panicked")).ok();
    }));
    assert!(caught.is_err());
    assert_eq!(s.tokens(&mut sampler, 2).count(), 2);
}

#[test]
fn drop_order_is_safe() {
    let Some(path) = model_path() else { return };
    let model = Model::load(&path).unwrap();
    let mut s = Session::new(&model, &small_session_params()).unwrap();
    let handle = s.cancel_handle();
    s.feed(&model.tokenize(PROMPT, true, false).unwrap()).unwrap();
    let mut fork = s.fork().unwrap();
    let mut sampler = Sampler::greedy().unwrap();
    // Sampler before session, parent before fork, cancel handle after its session.
    drop(s);
    assert_eq!(fork.tokens(&mut sampler, 4).count(), 4);
    drop(sampler);
    drop(fork);
    handle.cancel(); // the session is gone: a no-op, not a use after free
    let h2 = handle.clone();
    std::thread::spawn(move || h2.cancel()).join().unwrap();
    drop(model);
}
