//! A ReplayJob's spec → the request every pod of its Gateway receives (`POST /v1/replays`):
//! the Source and Sink names resolved to the gateway's source id and sink indexes, times to
//! unix milliseconds, and the rules the CRD states in CEL checked here as well (API servers
//! before 1.25 do not enforce CEL). Pure; errors name the spec field, never quote its text.
//!
//! May import: `render::rendered` (`source_id`), `ankusa_api`, `ankusa_crds`.

use ankusa_api::{CreateReplay, DeadFilter};
use ankusa_crds::replay::ReplayFilterSpec;
use ankusa_crds::{ArchiveReplaySpec, ReplayJobSpec, ReplayKind, Source};
use kube::ResourceExt;

use crate::render::rendered::source_id;

/// An RFC 3339 time of the spec as unix milliseconds; errors name `field`, not the text (the
/// parser's message quotes what it was given).
pub(crate) fn unix_ms(field: &str, v: &str) -> Result<u64, String> {
    v.parse::<k8s_openapi::jiff::Timestamp>()
        .map_err(|_| format!("{field} is not an RFC 3339 time (e.g. 2026-12-01T00:00:00Z)"))
        .and_then(|t| {
            u64::try_from(t.as_millisecond()).map_err(|_| format!("{field} is before 1970"))
        })
}

/// The position of Sink `sink` among `src`'s sinks (the gateway's sink index).
fn sink_index(src: &Source, sink: &str, field: &str) -> Result<u16, String> {
    let idx = src
        .spec
        .sinks
        .iter()
        .position(|r| r.name == sink)
        .ok_or_else(|| format!("{field}: Source {} has no sink {sink:?}", src.name_any()))?;
    u16::try_from(idx).map_err(|_| format!("{field}: {sink:?} is past sink 65535"))
}

/// The request every pod receives, from the spec (see the module header).
pub fn build_request(
    spec: &ReplayJobSpec,
    job_id: &str,
    sources: &[Source],
) -> Result<CreateReplay, String> {
    check_kind(spec)?;
    let f = &spec.filter;
    let source = f
        .source
        .as_ref()
        .map(|name| sources.iter().find(|s| &s.name_any() == name).ok_or(name));
    let filter = dead_filter(f, source)?;
    if let Some(r) = spec.rate {
        ankusa_api::check_rate(r).map_err(|m| format!("rate {m}"))?;
    }
    let mut body = CreateReplay {
        rate: spec.rate,
        max_lag_ms: spec.max_lag_ms,
        pause_after_dead: spec.pause_after_dead,
        ..CreateReplay::dlq(job_id, filter)
    };
    body.kind = spec.kind.as_str().to_string();
    if spec.ignore_filters {
        if spec.kind == ReplayKind::Quarantine {
            return Err("ignoreFilters: is for kind dlq and archive".into());
        }
        body.ignore_filters = Some(true);
    }
    if let Some(a) = &spec.archive {
        archive_window(a, source, &mut body)?;
    }
    Ok(body)
}

/// Which filters and sections each kind takes (the CRD's CEL rules).
fn check_kind(spec: &ReplayJobSpec) -> Result<(), String> {
    let f = &spec.filter;
    let refuse = |field: &str, why: &str| Err(format!("{field}: {why}"));
    match spec.kind {
        ReplayKind::Archive => {
            for (set, field) in [
                (f.sink.is_some(), "filter.sink"),
                (f.error_class.is_some(), "filter.errorClass"),
                (f.since.is_some(), "filter.since"),
                (f.until.is_some(), "filter.until"),
            ] {
                if set {
                    return refuse(
                        field,
                        "not a filter of kind archive (it takes filter.tenant, filter.source and filter.id; the window is archive.from and archive.to, the sinks archive.sinks)",
                    );
                }
            }
            if spec.archive.is_none() {
                return refuse(
                    "archive",
                    "kind archive requires archive.from and archive.to",
                );
            }
        }
        ReplayKind::Quarantine | ReplayKind::Dlq => {
            if spec.archive.is_some() {
                return refuse("archive", "is only for kind archive");
            }
            if spec.kind == ReplayKind::Quarantine {
                if f.sink.is_some() {
                    return refuse("filter.sink", "not a filter of kind quarantine");
                }
                if f.error_class.is_some() {
                    return refuse("filter.errorClass", "not a filter of kind quarantine");
                }
            }
        }
    }
    Ok(())
}

/// `spec.filter` → the gateway's filter; `source` is the Source `filter.source` names (or its
/// name when no such Source exists).
fn dead_filter(
    f: &ReplayFilterSpec,
    source: Option<Result<&Source, &String>>,
) -> Result<DeadFilter, String> {
    let mut filter = DeadFilter {
        tenant: f.tenant.clone(),
        ..Default::default()
    };
    filter.source_id = match source {
        // No such Source object (any more): the name is taken as the source id.
        Some(Err(name)) => Some(name.clone()),
        Some(Ok(s)) => Some(source_id(s)),
        None => None,
    };
    if let Some(sink) = &f.sink {
        let Some(Ok(src)) = source else {
            return Err(format!(
                "filter.sink {sink:?} needs filter.source naming an existing Source"
            ));
        };
        filter.sink = Some(sink_index(src, sink, "filter.sink")?);
    }
    filter.error_class = f.error_class;
    if let Some(id) = &f.id {
        filter.id = Some(
            serde_json::from_value(serde_json::Value::String(id.clone()))
                .map_err(|_| "filter.id: not a hook id (a UUID)".to_string())?,
        );
    }
    let since = f
        .since
        .as_deref()
        .map(|v| unix_ms("filter.since", v))
        .transpose()?;
    let until = f
        .until
        .as_deref()
        .map(|v| unix_ms("filter.until", v))
        .transpose()?;
    if let (Some(s), Some(u)) = (since, until)
        && s > u
    {
        return Err("filter.since is after filter.until".into());
    }
    filter.since = since;
    filter.until = until;
    Ok(filter)
}

/// `spec.archive` → the request's window and sink indexes (the sinks are those of the Source
/// `filter.source` names).
fn archive_window(
    a: &ArchiveReplaySpec,
    source: Option<Result<&Source, &String>>,
    body: &mut CreateReplay,
) -> Result<(), String> {
    let from = unix_ms("archive.from", &a.from)?;
    let to = unix_ms("archive.to", &a.to)?;
    if from >= to {
        return Err("archive.from must be before archive.to".into());
    }
    body.from = Some(from);
    body.to = Some(to);
    if a.sinks.is_empty() {
        return Ok(());
    }
    let Some(Ok(src)) = source else {
        return Err(
            "archive.sinks needs filter.source naming an existing Source (the sinks are that Source's)"
                .into(),
        );
    };
    let mut idx = Vec::with_capacity(a.sinks.len());
    for (i, sink) in a.sinks.iter().enumerate() {
        let n = sink_index(src, sink, &format!("archive.sinks[{i}]"))?;
        if idx.contains(&n) {
            return Err(format!("archive.sinks[{i}]: names Sink {sink:?} twice"));
        }
        idx.push(n);
    }
    if idx.len() > ankusa_api::MAX_ARCHIVE_SINKS {
        return Err(format!(
            "archive.sinks: names at most {} sinks",
            ankusa_api::MAX_ARCHIVE_SINKS
        ));
    }
    body.sinks = Some(idx);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::object;
    use ankusa_crds::LocalRef;
    use ankusa_crds::replay::ErrorClass;
    use serde_json::json;

    fn spec(filter: ReplayFilterSpec) -> ReplayJobSpec {
        ReplayJobSpec {
            gateway_ref: LocalRef { name: "gw".into() },
            kind: Default::default(),
            filter,
            archive: None,
            rate: Some(50),
            max_lag_ms: None,
            pause_after_dead: None,
            ttl_seconds_after_finished: None,
            ignore_filters: false,
            dry_run: false,
            dry_run_sinks: Vec::new(),
            dry_run_limit: None,
        }
    }

    fn source(name: &str, id: Option<&str>, sinks: &[&str]) -> Source {
        let mut s: Source = object(json!({
            "metadata": {"name": name, "namespace": "ns"},
            "spec": {"gatewayRef": {"name": "gw"}, "sinks": sinks.iter().map(|n| json!({"name": n})).collect::<Vec<_>>()}
        }));
        s.spec.id = id.map(String::from);
        s
    }

    #[test]
    fn request_resolves_names_and_times() {
        let sources = [source("orders", Some("orders-v2"), &["a", "b"])];
        let body = build_request(
            &spec(ReplayFilterSpec {
                tenant: Some("acme".into()),
                source: Some("orders".into()),
                sink: Some("b".into()),
                error_class: Some(ErrorClass::Transient),
                id: None,
                since: Some("2026-01-01T00:00:00Z".into()),
                until: None,
            }),
            "0b7f9f0e-1111-4222-8333-444455556666",
            &sources,
        )
        .unwrap();
        assert_eq!(
            serde_json::to_value(body).unwrap(),
            json!({
                "job_id": "0b7f9f0e-1111-4222-8333-444455556666",
                "kind": "dlq",
                "filter": {"tenant": "acme", "source_id": "orders-v2", "sink": 1,
                           "error_class": "transient", "since": 1767225600000u64},
                "rate": 50
            })
        );
    }

    #[test]
    fn ignore_filters_rides_along_for_dlq_and_archive_only() {
        let sources = [source("orders", None, &["a"])];
        let mut s = spec(ReplayFilterSpec::default());
        s.ignore_filters = true;
        let body = build_request(&s, "j", &sources).unwrap();
        assert_eq!(body.ignore_filters, Some(true));
        s.kind = ReplayKind::Quarantine;
        let e = build_request(&s, "j", &sources).unwrap_err();
        assert!(e.starts_with("ignoreFilters"), "{e}");
    }

    #[test]
    fn request_refusals() {
        let sources = [source("orders", None, &["a"])];
        let bad_sink = spec(ReplayFilterSpec {
            source: Some("orders".into()),
            sink: Some("zzz".into()),
            ..Default::default()
        });
        assert!(
            build_request(&bad_sink, "j", &sources)
                .unwrap_err()
                .contains("no sink")
        );
        let sink_without_source = spec(ReplayFilterSpec {
            sink: Some("a".into()),
            ..Default::default()
        });
        assert!(build_request(&sink_without_source, "j", &sources).is_err());
        let bad_time = spec(ReplayFilterSpec {
            since: Some("yesterday".into()),
            ..Default::default()
        });
        assert!(
            build_request(&bad_time, "j", &sources)
                .unwrap_err()
                .contains("RFC 3339")
        );
        // A deleted Source's name is taken as the source id.
        let gone = spec(ReplayFilterSpec {
            source: Some("old".into()),
            ..Default::default()
        });
        let gone = serde_json::to_value(build_request(&gone, "j", &sources).unwrap()).unwrap();
        assert_eq!(gone["filter"]["source_id"], "old");
    }

    fn orders_filter() -> ReplayFilterSpec {
        ReplayFilterSpec {
            tenant: Some("acme".into()),
            source: Some("orders".into()),
            ..Default::default()
        }
    }

    fn archive(from: &str, to: &str, sinks: &[&str]) -> Option<ArchiveReplaySpec> {
        Some(ArchiveReplaySpec {
            from: from.into(),
            to: to.into(),
            sinks: sinks.iter().map(|s| s.to_string()).collect(),
        })
    }

    #[test]
    fn archive_requests_carry_the_window_and_sink_indexes() {
        let sources = [source("orders", Some("orders-v2"), &["a", "b", "c"])];
        let mut s = spec(orders_filter());
        s.kind = ReplayKind::Archive;
        s.archive = archive("2026-01-01T00:00:00Z", "2026-01-01T01:00:00Z", &["c", "a"]);
        let body = build_request(&s, "j", &sources).unwrap();
        assert_eq!(
            serde_json::to_value(&body).unwrap(),
            json!({
                "job_id": "j",
                "kind": "archive",
                "filter": {"tenant": "acme", "source_id": "orders-v2"},
                "rate": 50,
                "from": 1_767_225_600_000u64,
                "to": 1_767_229_200_000u64,
                "sinks": [2, 0]
            })
        );
        // What the gateway checks of it passes.
        let w = body.archive_window().unwrap().unwrap();
        assert_eq!(
            (w.from, w.to, w.sinks),
            (1_767_225_600_000, 1_767_229_200_000, vec![0, 2])
        );
        // Without sinks: every sink of each hook's source, and no source needed.
        s.filter.source = None;
        s.archive = archive("2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z", &[]);
        let body = serde_json::to_value(build_request(&s, "j", &sources).unwrap()).unwrap();
        assert!(body.get("sinks").is_none(), "{body}");
        assert_eq!(body["filter"], json!({"tenant": "acme"}));
        // One hook by its id.
        s.filter.id = Some("0190a5b2-1111-7222-8333-444455556666".into());
        let body = serde_json::to_value(build_request(&s, "j", &sources).unwrap()).unwrap();
        assert_eq!(
            body["filter"],
            json!({"tenant": "acme", "id": "0190a5b2-1111-7222-8333-444455556666"})
        );
    }

    #[test]
    fn quarantine_requests_take_a_receive_window_and_a_hook_id() {
        let sources = [source("orders", None, &["a"])];
        let mut s = spec(ReplayFilterSpec {
            id: Some("0190a5b2-1111-7222-8333-444455556666".into()),
            since: Some("2026-01-01T00:00:00Z".into()),
            until: Some("2026-01-01T00:00:01Z".into()),
            ..orders_filter()
        });
        s.kind = ReplayKind::Quarantine;
        let body = serde_json::to_value(build_request(&s, "j", &sources).unwrap()).unwrap();
        assert_eq!(
            body,
            json!({
                "job_id": "j",
                "kind": "quarantine",
                "filter": {"tenant": "acme", "source_id": "orders",
                           "id": "0190a5b2-1111-7222-8333-444455556666",
                           "since": 1_767_225_600_000u64, "until": 1_767_225_601_000u64},
                "rate": 50
            })
        );
    }

    #[test]
    fn kind_rules_hold_without_cel() {
        let sources = [source("orders", None, &["a", "b"])];
        let err = |kind, filter: ReplayFilterSpec, a: Option<ArchiveReplaySpec>| {
            let mut s = spec(filter);
            s.kind = kind;
            s.archive = a;
            build_request(&s, "j", &sources).unwrap_err()
        };
        let window = || archive("2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z", &[]);
        let cases = [
            (
                err(ReplayKind::Archive, orders_filter(), None),
                "archive: kind archive requires",
            ),
            (
                err(ReplayKind::Dlq, orders_filter(), window()),
                "archive: is only for kind archive",
            ),
            (
                err(ReplayKind::Quarantine, orders_filter(), window()),
                "archive: is only for kind archive",
            ),
            (
                err(
                    ReplayKind::Archive,
                    ReplayFilterSpec {
                        since: Some("2026-01-01T00:00:00Z".into()),
                        ..orders_filter()
                    },
                    window(),
                ),
                "filter.since: not a filter of kind archive",
            ),
            (
                err(
                    ReplayKind::Archive,
                    ReplayFilterSpec {
                        sink: Some("a".into()),
                        ..orders_filter()
                    },
                    window(),
                ),
                "filter.sink: not a filter of kind archive",
            ),
            (
                err(
                    ReplayKind::Quarantine,
                    ReplayFilterSpec {
                        sink: Some("a".into()),
                        ..orders_filter()
                    },
                    None,
                ),
                "filter.sink: not a filter of kind quarantine",
            ),
            (
                err(
                    ReplayKind::Quarantine,
                    ReplayFilterSpec {
                        error_class: Some(ErrorClass::Permanent),
                        ..orders_filter()
                    },
                    None,
                ),
                "filter.errorClass: not a filter of kind quarantine",
            ),
            (
                err(
                    ReplayKind::Archive,
                    ReplayFilterSpec::default(),
                    archive("2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z", &["a"]),
                ),
                "archive.sinks needs filter.source",
            ),
            (
                err(
                    ReplayKind::Archive,
                    orders_filter(),
                    archive("2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z", &["zz"]),
                ),
                "archive.sinks[0]: Source orders has no sink \"zz\"",
            ),
            (
                err(
                    ReplayKind::Archive,
                    orders_filter(),
                    archive("2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z", &["a", "a"]),
                ),
                "archive.sinks[1]: names Sink \"a\" twice",
            ),
            (
                err(
                    ReplayKind::Archive,
                    orders_filter(),
                    archive("2026-01-02T00:00:00Z", "2026-01-01T00:00:00Z", &[]),
                ),
                "archive.from must be before archive.to",
            ),
            (
                err(
                    ReplayKind::Archive,
                    orders_filter(),
                    archive("yesterday", "2026-01-01T00:00:00Z", &[]),
                ),
                "archive.from is not an RFC 3339 time",
            ),
            (
                err(
                    ReplayKind::Dlq,
                    ReplayFilterSpec {
                        id: Some("nope".into()),
                        ..orders_filter()
                    },
                    None,
                ),
                "filter.id: not a hook id",
            ),
        ];
        for (got, want) in cases {
            assert!(
                got.starts_with(want),
                "{got:?} does not start with {want:?}"
            );
        }
    }
}
