//! A dry-run ReplayJob (`dryRun: true`) → the request each pod of its Gateway answers
//! (`POST /v1/sources/{id}/filters/test`): the Source `filter.source` names (it must exist),
//! every one of its sinks in order with the Source's routing or the one `dryRunSinks` gives
//! for it by name, the window in unix ms, `filter.tenant` and `dryRunLimit`. Every expression
//! is compiled here with the gateway's own rules, so a bad one fails the job before any pod is
//! asked. Pure; errors name the spec field, never quote an expression.
//!
//! May import: `render::replay` (`unix_ms`), `render::rendered` (`source_id`), `ankusa_api`,
//! `ankusa_config`, `ankusa_crds`.

use ankusa_api::{FilterTest, FilterTestWindow, MAX_FILTER_TEST_LIMIT, SinkRoutingTry};
use ankusa_config::{SinkRouting, Transform};
use ankusa_crds::{ReplayJobSpec, ReplayKind, Source};
use kube::ResourceExt;

use crate::render::rendered::source_id;
use crate::render::replay::unix_ms;

/// What every pod is asked, and for which source.
#[derive(Debug, Clone, PartialEq)]
pub struct DryRunRequest {
    /// The gateway's id of the Source (the path's `{id}`).
    pub source_id: String,
    /// The Source's Sink names, in order (the answer's sinks are by position).
    pub sink_names: Vec<String>,
    pub body: FilterTest,
}

/// The request for a `dryRun` spec (see the module header).
pub fn build_dry_run(spec: &ReplayJobSpec, sources: &[Source]) -> Result<DryRunRequest, String> {
    if spec.kind != ReplayKind::Archive {
        return Err("dryRun: needs kind archive (it reads the archived hooks of a window)".into());
    }
    if spec.ignore_filters {
        return Err(
            "ignoreFilters: a dry run reports what the filters do; it takes no ignoreFilters"
                .into(),
        );
    }
    let f = &spec.filter;
    if f.id.is_some() || f.sink.is_some() || f.error_class.is_some() {
        return Err("filter: a dry run takes filter.source and filter.tenant only".into());
    }
    let name = f
        .source
        .as_ref()
        .ok_or("filter.source: a dry run needs the Source whose filters it tries")?;
    let source = sources
        .iter()
        .find(|s| &s.name_any() == name)
        .ok_or_else(|| format!("filter.source: Source {name} not found"))?;
    let archive = spec
        .archive
        .as_ref()
        .ok_or("archive: a dry run needs archive.from and archive.to")?;
    if !archive.sinks.is_empty() {
        return Err("archive.sinks: a dry run reports every sink of the Source".into());
    }
    let from = unix_ms("archive.from", &archive.from)?;
    let to = unix_ms("archive.to", &archive.to)?;
    if from >= to {
        return Err("archive.from must be before archive.to".into());
    }
    let limit = spec
        .dry_run_limit
        .unwrap_or(ankusa_api::DEFAULT_FILTER_TEST_LIMIT);
    if !(1..=MAX_FILTER_TEST_LIMIT).contains(&limit) {
        return Err(format!("dryRunLimit: must be 1 to {MAX_FILTER_TEST_LIMIT}"));
    }
    for (i, o) in spec.dry_run_sinks.iter().enumerate() {
        if !source.spec.sinks.iter().any(|s| s.name == o.name) {
            return Err(format!(
                "dryRunSinks[{i}].name: Source {name} has no sink {:?}",
                o.name
            ));
        }
        if spec.dry_run_sinks[..i].iter().any(|p| p.name == o.name) {
            return Err(format!(
                "dryRunSinks[{i}].name: names Sink {:?} twice",
                o.name
            ));
        }
    }
    let mut tries = Vec::with_capacity(source.spec.sinks.len());
    for (i, s) in source.spec.sinks.iter().enumerate() {
        let (t, field) = match spec.dry_run_sinks.iter().position(|o| o.name == s.name) {
            Some(j) => {
                let o = &spec.dry_run_sinks[j];
                let t = SinkRoutingTry {
                    filter: o.filter.clone(),
                    on_filter_error: o.on_filter_error.unwrap_or_default(),
                    transform: o.transform.as_ref().map(|t| Transform {
                        body: t.body.clone(),
                        headers: t.headers.clone(),
                    }),
                };
                (t, format!("dryRunSinks[{j}]"))
            }
            None => (
                SinkRoutingTry {
                    filter: s.filter.clone(),
                    on_filter_error: s.on_filter_error.unwrap_or_default(),
                    transform: s.transform.clone(),
                },
                format!("Source {name} sinks[{i}]"),
            ),
        };
        SinkRouting {
            filter: t.filter.as_deref(),
            on_filter_error: t.on_filter_error,
            transform: t.transform.as_ref(),
        }
        .compile(&field)
        .map_err(|e| e.to_string())?;
        tries.push(t);
    }
    Ok(DryRunRequest {
        source_id: source_id(source),
        sink_names: source.spec.sinks.iter().map(|s| s.name.clone()).collect(),
        body: FilterTest {
            sinks: Some(tries),
            hook: None,
            archive: Some(FilterTestWindow {
                from,
                to,
                limit: Some(limit),
                tenant: f.tenant.clone(),
            }),
            samples: Some(0),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::object;
    use ankusa_crds::{ArchiveReplaySpec, DryRunSink, LocalRef};
    use serde_json::json;

    fn source() -> Source {
        object(json!({
            "metadata": {"name": "orders", "namespace": "ns"},
            "spec": {"gatewayRef": {"name": "gw"}, "id": "orders-v2", "sinks": [
                {"name": "paid", "filter": "body.type == \"invoice.paid\""},
                {"name": "all"}
            ]}
        }))
    }

    fn spec() -> ReplayJobSpec {
        let mut s: ReplayJobSpec = serde_json::from_value(json!({
            "gatewayRef": {"name": "gw"}, "kind": "archive", "dryRun": true,
            "filter": {"source": "orders", "tenant": "acme"}
        }))
        .unwrap();
        s.archive = Some(ArchiveReplaySpec {
            from: "2026-01-01T00:00:00Z".into(),
            to: "2026-01-02T00:00:00Z".into(),
            sinks: Vec::new(),
        });
        s.gateway_ref = LocalRef { name: "gw".into() };
        s
    }

    #[test]
    fn the_source_routing_with_overrides_by_name() {
        let mut s = spec();
        s.dry_run_sinks = vec![DryRunSink {
            name: "all".into(),
            filter: Some("size < 100".into()),
            ..Default::default()
        }];
        s.dry_run_limit = Some(500);
        let r = build_dry_run(&s, &[source()]).unwrap();
        assert_eq!(r.source_id, "orders-v2");
        assert_eq!(r.sink_names, ["paid", "all"]);
        assert_eq!(
            serde_json::to_value(&r.body).unwrap(),
            json!({
                "sinks": [
                    {"filter": "body.type == \"invoice.paid\"", "on_filter_error": "deliver"},
                    {"filter": "size < 100", "on_filter_error": "deliver"}
                ],
                "archive": {"from": 1767225600000u64, "to": 1767312000000u64, "limit": 500, "tenant": "acme"},
                "samples": 0
            })
        );
    }

    /// A change to the spec and what its refusal must say.
    type Change = Box<dyn Fn(&mut ReplayJobSpec)>;

    #[test]
    fn refusals_name_the_field() {
        let cases: Vec<(Change, &str)> = vec![
            (Box::new(|s| s.kind = ReplayKind::Dlq), "dryRun"),
            (Box::new(|s| s.ignore_filters = true), "ignoreFilters"),
            (
                Box::new(|s| s.filter.source = Some("gone".into())),
                "filter.source: Source gone not found",
            ),
            (Box::new(|s| s.archive = None), "archive:"),
            (
                Box::new(|s| s.archive.as_mut().unwrap().sinks = vec!["all".into()]),
                "archive.sinks",
            ),
            (Box::new(|s| s.dry_run_limit = Some(100_001)), "dryRunLimit"),
            (
                Box::new(|s| {
                    s.dry_run_sinks = vec![DryRunSink {
                        name: "nope".into(),
                        ..Default::default()
                    }]
                }),
                "dryRunSinks[0].name",
            ),
            (
                Box::new(|s| {
                    s.dry_run_sinks = vec![DryRunSink {
                        name: "paid".into(),
                        filter: Some("body.type ==".into()),
                        ..Default::default()
                    }]
                }),
                "dryRunSinks[0].filter",
            ),
            (
                Box::new(|s| s.archive.as_mut().unwrap().to = "2025-01-01T00:00:00Z".into()),
                "archive.from must be before archive.to",
            ),
        ];
        for (change, want) in cases {
            let mut s = spec();
            change(&mut s);
            let e = build_dry_run(&s, &[source()]).unwrap_err();
            assert!(e.contains(want), "{want}: {e}");
        }
    }

    #[test]
    fn the_source_s_own_bad_expression_is_named_too() {
        let mut src = source();
        src.spec.sinks[1].filter = Some("nope(".into());
        let e = build_dry_run(&spec(), &[src]).unwrap_err();
        assert!(e.starts_with("Source orders sinks[1].filter"), "{e}");
    }
}
