//! The conformance runner of the Rust SDK (`conformance/README.md`): every case of every
//! `*.json` file of `--cases DIR` (sorted by name) through the SDK's public API, one
//! `FAIL <file> <id>: <why>` line per failure, then `N passed, N failed`. Exits non-zero on any
//! failure, or when the directory holds no case.
//!
//!     cargo run -p ankusa-sdk --example conformance -- --cases conformance/cases

mod json;
mod mock;
mod ops;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use ankusa_sdk::Error;
use serde_json::Value;

use json::{Json, body_matches};
use mock::MockGateway;
use ops::{Actual, Context};

fn usage() -> ExitCode {
    eprintln!("usage: conformance --cases DIR");
    ExitCode::from(2)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let dir = match args.as_slice() {
        [flag, dir] if flag == "--cases" => PathBuf::from(dir),
        [] => PathBuf::from("conformance/cases"),
        _ => return usage(),
    };
    let files = match case_files(&dir) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("conformance: cannot read {}: {e}", dir.display());
            return ExitCode::from(2);
        }
    };
    let gateway = match MockGateway::start().await {
        Ok(g) => g,
        Err(e) => {
            eprintln!("conformance: cannot start the mock claim gateway: {e}");
            return ExitCode::from(2);
        }
    };
    let (mut passed, mut failed) = (0usize, 0usize);
    for file in &files {
        let name = file
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default();
        let cases = match load(file) {
            Ok(c) => c,
            Err(why) => {
                println!("FAIL {name} -: {why}");
                failed += 1;
                continue;
            }
        };
        for (i, case) in cases.iter().enumerate() {
            let id = match case.get("id") {
                Some(Json::String(s)) => s.clone(),
                _ => format!("#{i}"),
            };
            match run_case(case, &gateway).await {
                Ok(()) => passed += 1,
                Err(why) => {
                    println!("FAIL {name} {id}: {why}");
                    failed += 1;
                }
            }
        }
    }
    println!("{passed} passed, {failed} failed");
    if failed > 0 || passed == 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn case_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    Ok(files)
}

/// The cases of a file: `{"cases": [...]}` or a bare array.
fn load(path: &Path) -> Result<Vec<Json>, String> {
    let text = std::fs::read(path).map_err(|e| format!("cannot read: {e}"))?;
    let doc: Json = serde_json::from_slice(&text).map_err(|e| format!("not JSON: {e}"))?;
    match doc {
        Json::Array(cases) => Ok(cases),
        doc => match doc.get("cases") {
            Some(Json::Array(cases)) => Ok(cases.clone()),
            _ => Err("not a case file: neither {\"cases\": [...]} nor an array".into()),
        },
    }
}

async fn run_case(case: &Json, gateway: &MockGateway) -> Result<(), String> {
    let operation = match case.get("operation") {
        Some(Json::String(s)) => s.clone(),
        _ => return Err("no operation".into()),
    };
    let input = case.get("input").ok_or("no input")?;
    let expect = case.get("expect").ok_or("no expect")?.to_value();
    let (ok, error) = (expect.get("ok"), expect.get("error"));
    if ok.is_some() == error.is_some() {
        return Err("expect must hold exactly one of ok and error".into());
    }
    // Requests of an earlier case (a delayed answer still in flight) are not this case's.
    gateway.reset(mock::Reply::default());
    let mut ctx = Context {
        gateway,
        compare_requests: true,
    };
    let outcome = ops::run(&operation, input, &mut ctx).await?;
    match (outcome, ok, error) {
        (Ok(actual), Some(ok), _) => compare_ok(ok, &actual)?,
        (Err(e), _, Some(error)) => compare_error(error, &e)?,
        (Ok(actual), None, Some(error)) => {
            return Err(format!("expected error {error}, got ok {}", actual.value));
        }
        (Err(e), Some(_), None) => {
            return Err(format!("expected ok, got {}: {e}", e.class()));
        }
        _ => unreachable!("one of ok and error is set"),
    }
    if let Some(expected) = expect.get("requests")
        && ctx.compare_requests
    {
        compare_requests(expected, &gateway.requests())?;
    }
    Ok(())
}

fn compare_ok(expected: &Value, actual: &Actual) -> Result<(), String> {
    let Value::Object(keys) = expected else {
        return if *expected == actual.value {
            Ok(())
        } else {
            Err(format!("expected {expected}, got {}", actual.value))
        };
    };
    for (key, want) in keys {
        if key == "body" {
            let body = actual.body.as_ref().ok_or("the result has no body")?;
            body_matches(want, body.as_deref())?;
            continue;
        }
        match actual.value.get(key) {
            None => return Err(format!("{key}: missing from the result")),
            Some(got) if got != want => return Err(format!("{key}: expected {want}, got {got}")),
            Some(_) => {}
        }
    }
    Ok(())
}

fn compare_error(expected: &Value, e: &Error) -> Result<(), String> {
    let Value::Object(keys) = expected else {
        return Err("malformed case: expect.error is not an object".into());
    };
    for (key, want) in keys {
        let got = match key.as_str() {
            "class" => Value::from(e.class()),
            "code" => Value::from(e.code()),
            "retryable" => Value::from(e.retryable()),
            "field" => e.field().map(Value::from).unwrap_or(Value::Null),
            "status" => e.status().map(Value::from).unwrap_or(Value::Null),
            other => return Err(format!("malformed case: unknown error key {other:?}")),
        };
        if &got != want {
            return Err(format!("error {key}: expected {want}, got {got} ({e})"));
        }
    }
    Ok(())
}

fn compare_requests(expected: &Value, got: &[Value]) -> Result<(), String> {
    let Value::Array(want) = expected else {
        return Err("malformed case: expect.requests is not an array".into());
    };
    if want.len() != got.len() {
        return Err(format!(
            "requests: expected {}, the gateway got {}: {}",
            want.len(),
            got.len(),
            Value::from(got.to_vec())
        ));
    }
    for (i, (w, g)) in want.iter().zip(got).enumerate() {
        for key in ["method", "path"] {
            if let Some(v) = w.get(key)
                && g.get(key) != Some(v)
            {
                return Err(format!("request {i} {key}: expected {v}, got {}", g[key]));
            }
        }
        if let Some(Value::Object(headers)) = w.get("headers") {
            for (name, v) in headers {
                let got = g["headers"].get(name.to_ascii_lowercase());
                if got != Some(v) {
                    return Err(format!(
                        "request {i} header {name}: expected {v}, got {}",
                        got.cloned().unwrap_or(Value::Null)
                    ));
                }
            }
        }
    }
    Ok(())
}
