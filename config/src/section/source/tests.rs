//! A source's own rules, through a whole config: `sink_names`, and `on_verify_failure` against
//! `verify` (with the quarantine section's bounds).

use crate::testing::{log_source, with_source};
use crate::*;

#[test]
fn sink_names_name_every_sink_once_in_plain_text() {
    let mut s = log_source();
    s.sink_names = vec!["orders".into()];
    validate(&with_source(s.clone())).unwrap();
    s.sink_names = vec!["a".into(), "b".into()];
    let e = validate(&with_source(s.clone())).unwrap_err();
    assert_eq!(e.field.as_deref(), Some("sources.s.sink_names"));
    assert!(
        e.message.contains("each of the 1 sinks (got 2 names)"),
        "{e}"
    );
    for bad in [String::new(), "x".repeat(254), "a\nb".into()] {
        s.sink_names = vec![bad];
        let e = validate(&with_source(s.clone())).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("sources.s.sink_names[0]"));
    }
}

#[test]
fn quarantine_needs_a_scheme_and_sane_bounds() {
    let mut s = log_source();
    s.on_verify_failure = OnVerifyFailure::Quarantine;
    let e = validate(&with_source(s.clone())).unwrap_err();
    assert_eq!(e.field.as_deref(), Some("sources.s.on_verify_failure"));
    assert!(e.message.contains("needs a verify scheme"), "{e}");
    s.verify = VerifyConfig::Github(Preset {
        secret: Secrets::one("k"),
    });
    let mut c = with_source(s);
    validate(&c).unwrap();
    assert_eq!(c.quarantine, crate::QuarantineConfig::default());
    // The section's own bounds (`quarantine.rs`) are part of the whole config's.
    c.quarantine.rate = 0.0;
    let e = validate(&c).unwrap_err();
    assert_eq!(e.field.as_deref(), Some("quarantine.rate"));
    c.quarantine.rate = 0.5;
    c.quarantine.max_bytes_per_source = Some(c.quarantine.max_bytes + 1);
    let e = validate(&c).unwrap_err();
    assert_eq!(e.field.as_deref(), Some("quarantine.max_bytes_per_source"));
    c.quarantine.max_bytes_per_source = Some(1);
    validate(&c).unwrap();
}
