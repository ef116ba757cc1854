//! The admin API's parameters: the dead-index cursor a client hands back, the DLQ filter as a
//! query string or JSON, a replay job's request, patch and stored form, and their checks.
//! No panic; a cursor that decodes is the one `encode` writes (and every position round-trips);
//! a request that parses re-serialises to one that parses the same.

#![no_main]

use ankusa_api::{CreateReplay, DeadFilter, PatchReplay, ReplayJob, TopLevelFilter, check_rate};
use ankusa_config::ErrorClass;
use ankusa_format::cursor::DeadCursor;
use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
enum Case {
    Cursor(String),
    Position(u64, u64, u16),
    Query(Vec<u8>),
    Filter(Vec<u8>),
    Create(Vec<u8>),
    Patch(Vec<u8>),
    Job(Vec<u8>),
    Rate(u32),
    Text(String),
}

fuzz_target!(|case: Case| match case {
    Case::Cursor(s) => {
        if let Some(c) = DeadCursor::decode(&s) {
            // One spelling per position: the cursor is not malleable.
            assert_eq!(c.encode(), s);
            let _ = c.key(Some("t"));
        }
    }
    Case::Position(at, seq, sink) => {
        let c = DeadCursor::new(at, seq, sink);
        let back = DeadCursor::decode(&c.encode()).expect("an encoded cursor decodes");
        assert_eq!(back, c);
        assert_eq!((back.dead_at(), back.seq(), back.sink()), (at, seq, sink));
    }
    Case::Query(q) => {
        // `GET /v1/dlq?...` as axum's `Query` reads it (serde_urlencoded).
        if let Ok(f) = serde_urlencoded::from_bytes::<DeadFilter>(&q) {
            let _ = f.check();
            let _ = f.only_tenant();
        }
        let _ = serde_urlencoded::from_bytes::<TopLevelFilter>(&q);
    }
    Case::Filter(b) => {
        if let Ok(f) = serde_json::from_slice::<DeadFilter>(&b) {
            let _ = f.check();
            let again: DeadFilter =
                serde_json::from_slice(&serde_json::to_vec(&f).expect("serialises"))
                    .expect("re-parses");
            assert_eq!(again, f);
        }
    }
    Case::Create(b) => {
        if let Ok(r) = serde_json::from_slice::<CreateReplay>(&b) {
            let filter = r.filter();
            if let Some(rate) = r.rate {
                let _ = check_rate(rate);
            }
            let again: CreateReplay =
                serde_json::from_slice(&serde_json::to_vec(&r).expect("serialises"))
                    .expect("re-parses");
            assert_eq!(again.filter(), filter);
            if let Ok(f) = filter {
                assert_eq!(f.check(), Ok(()));
            }
        }
    }
    Case::Patch(b) => {
        let _ = serde_json::from_slice::<PatchReplay>(&b);
    }
    Case::Job(b) => {
        if let Ok(j) = serde_json::from_slice::<ReplayJob>(&b) {
            // A stored job's cursor is read back with `decode`; any text must be safe there.
            if let Some(c) = j.cursor.as_deref() {
                let _ = DeadCursor::decode(c);
            }
            let _ = j.filter.check();
        }
    }
    Case::Rate(r) => {
        assert_eq!(
            check_rate(r).is_ok(),
            (1..=ankusa_api::MAX_RATE).contains(&r)
        );
    }
    Case::Text(s) => {
        let _ = DeadFilter::check_tenant(&s);
        if let Some(c) = ErrorClass::parse(&s) {
            assert_eq!(c.as_str(), s);
        }
    }
});
