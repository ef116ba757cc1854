//! Pure tests of status computation: Gateway, Source and Sink conditions and counts.

use ankusa_crds::{Gateway, GatewayPodStatus, Sink, Source, SourceStatus};
use ankusa_operator::render::{self, Outcome, SourceRender};
use ankusa_operator::status::gateway::{self, gateway_status};
use ankusa_operator::status::sink::sink_status;
use ankusa_operator::status::source::{self as source_st, GatewayView, source_status};
use common::resource;
use serde_json::json;

mod common;

const NOW: &str = "2026-01-01T00:00:00Z";

fn gw(replicas: i32) -> Gateway {
    resource(json!({
        "metadata": {"name": "gw", "namespace": "ns", "generation": 4},
        "spec": {"replicas": replicas},
    }))
}

fn pod(n: u8, ready: bool, programmed: bool) -> GatewayPodStatus {
    GatewayPodStatus {
        name: format!("gw-{n}"),
        ready,
        programmed,
        ..Default::default()
    }
}

fn rendered_ok(g: &Gateway) -> render::Rendered {
    render::render(&render::Inputs {
        gateway: g,
        sources: &[],
        sinks: &[],
        secrets: &Default::default(),
        admin_token: "operator-admin-token-0123456789",
        scrape_token: None,
        previous: None,
    })
}

fn cond<'a>(c: &'a [ankusa_crds::Condition], t: &str) -> &'a ankusa_crds::Condition {
    c.iter().find(|x| x.type_ == t).unwrap()
}

#[test]
fn gateway_ready_only_when_every_desired_pod_is_ready_and_programmed() {
    let g = gw(3);
    let r = rendered_ok(&g);
    let st = gateway_status(
        &g,
        &r,
        vec![pod(0, true, true), pod(1, true, true), pod(2, true, true)],
        None,
        &Default::default(),
        NOW,
    );
    assert_eq!(st.programmed.as_deref(), Some("3/3"));
    assert!(cond(&st.conditions, "Ready").is_true());
    assert!(!cond(&st.conditions, "Progressing").is_true());
    assert_eq!(st.observed_generation, Some(4));
    assert_eq!(
        st.selector.as_deref(),
        Some("app.kubernetes.io/instance=gw,app.kubernetes.io/name=ankusa-gateway")
    );

    let st = gateway_status(
        &g,
        &r,
        vec![pod(0, true, true), pod(1, true, false), pod(2, true, true)],
        None,
        &Default::default(),
        NOW,
    );
    let ready = cond(&st.conditions, "Ready");
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_deref()),
        ("False", Some("Programming"))
    );
    assert!(cond(&st.conditions, "Progressing").is_true());

    // Scaling up: the new pod is not there yet.
    let g4 = gw(4);
    let st = gateway_status(
        &g4,
        &rendered_ok(&g4),
        vec![pod(0, true, true), pod(1, true, true), pod(2, true, true)],
        None,
        &Default::default(),
        NOW,
    );
    assert_eq!(st.programmed.as_deref(), Some("3/4"));
    assert_eq!(
        cond(&st.conditions, "Progressing").reason.as_deref(),
        Some("Scaling")
    );
    assert_eq!(st.replicas, 3);
}

#[test]
fn a_pod_refusing_its_config_degrades_the_gateway() {
    let g = gw(1);
    let mut p = pod(0, true, false);
    p.last_error = Some("refused the config: sources.x: bad".into());
    let st = gateway_status(
        &g,
        &rendered_ok(&g),
        vec![p],
        None,
        &Default::default(),
        NOW,
    );
    let d = cond(&st.conditions, "Degraded");
    assert!(d.is_true());
    assert_eq!(d.reason.as_deref(), Some("PodErrors"));
    assert!(
        d.message
            .as_ref()
            .unwrap()
            .contains("gw-0: refused the config")
    );
}

fn src(generation: i64, deleting: bool) -> Source {
    let mut v = json!({
        "metadata": {"name": "orders", "namespace": "ns", "generation": generation},
        "spec": {"gatewayRef": {"name": "gw"}, "sinks": [{"name": "k"}]},
    });
    if deleting {
        v["metadata"]["deletionTimestamp"] = json!(NOW);
    }
    resource(v)
}

fn view(programmed: i32, desired: i32) -> GatewayView<'static> {
    GatewayView {
        error: None,
        programmed,
        desired,
        prefix: "/webhooks",
        gateway: "gw",
        pens: &[],
    }
}

#[test]
fn source_programmed_counts_only_its_current_generation() {
    let sr = SourceRender {
        id: "orders".into(),
        generation: Some(2),
        outcome: Outcome::Current,
    };
    let st = source_status(
        &src(2, false),
        Some(&sr),
        view(3, 3),
        &SourceStatus::default(),
        NOW,
    );
    assert_eq!(st.programmed.as_deref(), Some("3/3"));
    assert!(cond(&st.conditions, "Ready").is_true());
    assert_eq!(cond(&st.conditions, "Ready").observed_generation, Some(2));
    assert_eq!(st.path.as_deref(), Some("/webhooks/orders"));

    let failed = SourceRender {
        id: "orders".into(),
        generation: Some(3),
        outcome: Outcome::Previous("Secret gh not found".into()),
    };
    let st = source_status(&src(3, false), Some(&failed), view(3, 3), &st, NOW);
    assert_eq!(
        st.programmed.as_deref(),
        Some("0/3"),
        "the current generation runs nowhere"
    );
    let ready = cond(&st.conditions, "Ready");
    assert_eq!(ready.reason.as_deref(), Some("RenderFailed"));
    assert!(
        ready
            .message
            .as_ref()
            .unwrap()
            .contains("keep the previously rendered version")
    );
    assert!(cond(&st.conditions, "Degraded").is_true());

    let st = source_status(
        &src(2, false),
        Some(&sr),
        GatewayView {
            error: Some("bad settings"),
            ..view(3, 3)
        },
        &SourceStatus::default(),
        NOW,
    );
    assert_eq!(
        cond(&st.conditions, "Ready").reason.as_deref(),
        Some("GatewayConfigInvalid")
    );
}

#[test]
fn a_deleting_source_says_it_drains() {
    let sr = SourceRender {
        id: "orders".into(),
        generation: Some(1),
        outcome: Outcome::Current,
    };
    let st = source_status(
        &src(1, true),
        Some(&sr),
        view(3, 3),
        &SourceStatus::default(),
        NOW,
    );
    let ready = cond(&st.conditions, "Ready");
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_deref()),
        ("False", Some("Draining"))
    );
}

fn sink(generation: i64) -> Sink {
    resource(json!({
        "metadata": {"name": "k", "namespace": "ns", "generation": generation},
        "spec": {"type": "log"},
    }))
}

fn gw_with_sink(
    name: &str,
    replicas: i32,
    programmed: i32,
    sink_gen: i64,
    error: Option<&str>,
) -> Gateway {
    resource(json!({
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"replicas": replicas},
        "status": {"programmedReplicas": programmed,
                   "sinks": [{"name": "k", "observedGeneration": sink_gen, "error": error}]},
    }))
}

#[test]
fn sink_status_adds_up_every_gateway_using_it() {
    let users = vec!["orders".to_string()];
    let gws = [
        gw_with_sink("a", 3, 3, 5, None),
        gw_with_sink("b", 2, 2, 5, None),
    ];
    let st = sink_status(&sink(5), &gws, &users, &Default::default(), NOW);
    assert_eq!(st.programmed.as_deref(), Some("5/5"));
    assert!(cond(&st.conditions, "Ready").is_true());
    assert_eq!(st.used_by.as_deref(), Some("orders"));
    // One gateway still renders the previous generation.
    let gws = [
        gw_with_sink("a", 3, 3, 5, None),
        gw_with_sink("b", 2, 2, 4, None),
    ];
    let st = sink_status(&sink(5), &gws, &users, &Default::default(), NOW);
    assert_eq!(st.programmed.as_deref(), Some("3/5"));
    assert!(!cond(&st.conditions, "Ready").is_true());
    // A render failure is reported with the gateway's name.
    let gws = [gw_with_sink("a", 3, 3, 5, Some("Secret s not found"))];
    let st = sink_status(&sink(5), &gws, &users, &Default::default(), NOW);
    assert!(
        cond(&st.conditions, "Degraded")
            .message
            .as_ref()
            .unwrap()
            .contains("a: Secret s not found")
    );
    // Unused.
    let st = sink_status(&sink(5), &[], &[], &Default::default(), NOW);
    assert_eq!(
        cond(&st.conditions, "Ready").reason.as_deref(),
        Some("NotReferenced")
    );
}

fn failure(source: &str, sink: u16, name: Option<&str>, failures: u64) -> ankusa_api::SinkFailure {
    ankusa_api::SinkFailure {
        source: source.into(),
        sink,
        name: name.map(String::from),
        sink_type: "redis".into(),
        error: format!("redis: not_connected: tcp_connect: refused ({source})"),
        at: 1_767_225_600_000 + failures,
        since: 1_767_225_600_000,
        failures,
        breaker_open: failures >= 5,
    }
}

fn rendered_sink(name: &str) -> ankusa_crds::RenderedSink {
    ankusa_crds::RenderedSink {
        name: name.into(),
        observed_generation: Some(1),
        ..Default::default()
    }
}

#[test]
fn pods_delivery_failures_reach_each_rendered_sink_by_name() {
    let mut sinks = vec![rendered_sink("k"), rendered_sink("quiet")];
    let orders: Source = resource(json!({
        "metadata": {"name": "orders", "namespace": "ns"},
        "spec": {"gatewayRef": {"name": "gw"}, "id": "orders-v2",
                 "sinks": [{"name": "quiet"}, {"name": "k"}]},
    }));
    let mut pods = vec![
        (
            "gw-0".to_string(),
            vec![
                failure("orders-v2", 1, Some("k"), 2),
                // Another source delivering to the same Sink, failing longer: shown.
                failure("audit", 0, Some("k"), 7),
                // A Sink this Gateway no longer renders.
                failure("audit", 1, Some("gone"), 1),
            ],
        ),
        // A config rendered before `sink_names`: matched through the Source's id and position.
        ("gw-1".to_string(), vec![failure("orders-v2", 1, None, 3)]),
    ];
    gateway::delivery_errors(&mut sinks, &pods, &[&orders]);
    assert_eq!(sinks[0].failing_pods, 2);
    let e = &sinks[0].delivery_errors;
    assert_eq!(
        e.iter()
            .map(|e| (e.pod.as_str(), e.source.as_str(), e.failures))
            .collect::<Vec<_>>(),
        vec![("gw-0", "audit", 7), ("gw-1", "orders-v2", 3)]
    );
    assert_eq!(e[0].since.as_deref(), Some("2026-01-01T00:00:00Z"));
    assert!(e[0].breaker_open && !e[1].breaker_open);
    assert_eq!(
        e[1].error,
        "redis: not_connected: tcp_connect: refused (orders-v2)"
    );
    assert!(sinks[1].delivery_errors.is_empty());
    assert_eq!(sinks[1].failing_pods, 0);

    // Many failing pods: a few are listed, all are counted.
    pods = (0..9)
        .map(|n| {
            (
                format!("gw-{n}"),
                vec![failure("orders-v2", 1, Some("k"), 1)],
            )
        })
        .collect();
    gateway::delivery_errors(&mut sinks, &pods, &[&orders]);
    assert_eq!(sinks[0].failing_pods, 9);
    assert_eq!(sinks[0].delivery_errors.len(), gateway::MAX_DELIVERY_ERRORS);
    // And every pod recovered: cleared.
    gateway::delivery_errors(&mut sinks, &[("gw-0".into(), vec![])], &[&orders]);
    assert_eq!(
        (sinks[0].failing_pods, sinks[0].delivery_errors.len()),
        (0, 0)
    );
}

/// A Gateway `name` rendering Sink `k` (generation 5) on `replicas` programmed pods, with
/// `failing` of them reporting a failed delivery of `error` to it.
fn gw_failing(name: &str, replicas: i32, failing: usize, error: &str) -> Gateway {
    let errors: Vec<serde_json::Value> = (0..failing.min(5))
        .map(|n| {
            json!({"pod": format!("{name}-{n}"), "source": "orders", "error": error,
                   "since": NOW, "failures": 5, "breakerOpen": n == 0})
        })
        .collect();
    resource(json!({
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"replicas": replicas},
        "status": {"programmedReplicas": replicas,
                   "sinks": [{"name": "k", "observedGeneration": 5,
                              "deliveryErrors": errors, "failingPods": failing}]},
    }))
}

#[test]
fn sink_status_is_degraded_while_deliveries_fail_and_ready_stays_about_programming() {
    let users = vec!["orders".to_string()];
    let tls = "redis: not_connected: tls_handshake: invalid peer certificate: UnknownIssuer \
               (server certificate: subject CN=redis.internal)";
    let st = sink_status(
        &sink(5),
        &[gw_failing("gw", 3, 1, tls)],
        &users,
        &Default::default(),
        NOW,
    );
    assert!(
        cond(&st.conditions, "Ready").is_true(),
        "programmed everywhere"
    );
    let d = cond(&st.conditions, "Degraded");
    assert!(d.is_true());
    assert_eq!(d.reason.as_deref(), Some("DeliveryFailing"));
    assert_eq!(
        d.message.as_deref(),
        Some(format!("gw/gw-0: {tls} (5 failures, circuit breaker open)").as_str())
    );
    assert_eq!(st.failing_pods, 1);

    // The pods recover: Degraded clears, keeping Ready's transition time.
    let healed = sink_status(&sink(5), &[gw_failing("gw", 3, 0, tls)], &users, &st, NOW);
    let d = cond(&healed.conditions, "Degraded");
    assert!(!d.is_true());
    assert_eq!(d.reason.as_deref(), Some("AsExpected"));
    assert_eq!(healed.failing_pods, 0);

    // Many failing pods across gateways, each with the longest error a pod reports: the
    // message names three and counts the rest, well under a condition's 32768 bytes.
    let long = format!(
        "redis: {}",
        "x".repeat(ankusa_api::MAX_SINK_ERROR_BYTES - 7)
    );
    let gws = [
        gw_failing("a", 40, 40, &long),
        gw_failing("b", 40, 12, &long),
    ];
    let st = sink_status(&sink(5), &gws, &users, &Default::default(), NOW);
    let m = cond(&st.conditions, "Degraded").message.clone().unwrap();
    assert_eq!(st.failing_pods, 52);
    assert!(m.starts_with("a/a-0: redis: xxx"), "{m}");
    assert!(m.ends_with("; and 49 more pods"), "{}", &m[m.len() - 40..]);
    assert!(m.len() < 2_000, "{}", m.len());

    // A render failure says more than the deliveries; an unused Sink has none.
    let mut broken = gw_failing("gw", 3, 1, tls);
    broken.status.as_mut().unwrap().sinks[0].error = Some("Secret s not found".into());
    let st = sink_status(&sink(5), &[broken], &users, &Default::default(), NOW);
    assert_eq!(
        cond(&st.conditions, "Degraded").reason.as_deref(),
        Some("RenderFailed")
    );
    let st = sink_status(
        &sink(5),
        &[gw_failing("gw", 3, 1, tls)],
        &[],
        &Default::default(),
        NOW,
    );
    assert!(!cond(&st.conditions, "Degraded").is_true());
    assert_eq!(st.failing_pods, 0);
}

/// A pod's pen holding `mine` entries of `orders` (100 bytes each, the oldest received at
/// `NOW` + `age_ms`), `bytes` in all, capped at 1000.
fn pen(mine: i64, age_ms: u64, bytes: i64) -> ankusa_api::PenStatus {
    let at = 1_767_225_600_000 + age_ms;
    ankusa_api::PenStatus {
        entries: mine + 1,
        bytes,
        max_bytes: 1000,
        oldest_received_at: Some(at),
        sources: vec![
            ankusa_api::PenSourceStatus {
                source: "orders".into(),
                entries: mine,
                bytes: mine * 100,
                oldest_received_at: (mine > 0).then_some(at),
            },
            ankusa_api::PenSourceStatus {
                source: "other".into(),
                entries: 1,
                bytes: 100,
                oldest_received_at: Some(at),
            },
        ]
        .into_iter()
        .filter(|s| s.entries > 0)
        .collect(),
    }
}

fn quarantining_src(mode: &str) -> Source {
    resource(json!({
        "metadata": {"name": "orders", "namespace": "ns", "generation": 1},
        "spec": {"gatewayRef": {"name": "gw"}, "onVerifyFailure": mode, "sinks": [{"name": "k"}]},
    }))
}

#[test]
fn a_quarantining_source_shows_its_entries_per_pod_and_when_a_pen_is_near_full() {
    let sr = SourceRender {
        id: "orders".into(),
        generation: Some(1),
        outcome: Outcome::Current,
    };
    let pens = vec![
        ("gw-0".to_string(), pen(2, 5_000, 300)),
        ("gw-1".to_string(), pen(0, 0, 100)),
        ("gw-2".to_string(), pen(3, 1_000, 400)),
    ];
    let with = |pens| GatewayView { pens, ..view(3, 3) };
    let st = source_status(
        &quarantining_src("quarantine"),
        Some(&sr),
        with(&pens),
        &SourceStatus::default(),
        NOW,
    );
    let q = st.quarantine.clone().expect("quarantine status");
    assert_eq!((q.entries, q.bytes, q.pods_with_entries), (5, 500, 2));
    assert_eq!(
        q.oldest.as_deref(),
        Some("2026-01-01T00:00:01Z"),
        "the oldest of all pods"
    );
    assert_eq!(
        q.pods
            .iter()
            .map(|p| (
                p.pod.as_str(),
                p.entries,
                p.bytes,
                p.oldest.as_deref(),
                p.pen_bytes,
                p.pen_max_bytes
            ))
            .collect::<Vec<_>>(),
        vec![
            ("gw-2", 3, 300, Some("2026-01-01T00:00:01Z"), 400, 1000),
            ("gw-0", 2, 200, Some("2026-01-01T00:00:05Z"), 300, 1000),
        ],
        "pods holding entries, the fullest first"
    );
    let near = cond(&st.conditions, "QuarantineNearFull");
    assert!(!near.is_true());
    assert_eq!(near.reason.as_deref(), Some("BelowThreshold"));
    assert!(
        cond(&st.conditions, "Ready").is_true(),
        "a pen is not a render problem"
    );

    // gw-0's pen (every source) reaches 80% of max_bytes: the condition turns True, naming it.
    let fuller = vec![
        ("gw-0".to_string(), pen(2, 5_000, 800)),
        ("gw-1".to_string(), pen(0, 0, 799)),
    ];
    let st2 = source_status(
        &quarantining_src("quarantine"),
        Some(&sr),
        with(&fuller),
        &st,
        "2026-01-01T00:01:00Z",
    );
    let near = cond(&st2.conditions, "QuarantineNearFull");
    assert!(near.is_true());
    assert_eq!(near.reason.as_deref(), Some("PenNearFull"));
    let m = near.message.as_deref().unwrap();
    assert!(m.contains("gw/gw-0: 800 bytes of 1000 bytes (80%)"), "{m}");
    assert!(!m.contains("gw-1"), "{m}");
    assert!(m.contains("ReplayJob of kind quarantine"), "{m}");
    assert_eq!(
        near.last_transition_time.as_deref(),
        Some("2026-01-01T00:01:00Z")
    );
    // The other conditions kept their transition time.
    assert_eq!(
        cond(&st2.conditions, "Ready")
            .last_transition_time
            .as_deref(),
        Some(NOW)
    );

    // Released everywhere: the status says 0, and the condition stays (False).
    let empty = vec![("gw-0".to_string(), pen(0, 0, 100))];
    let st3 = source_status(
        &quarantining_src("quarantine"),
        Some(&sr),
        with(&empty),
        &st2,
        NOW,
    );
    let q = st3.quarantine.unwrap();
    assert_eq!((q.entries, q.pods_with_entries, q.pods.len()), (0, 0, 0));
    assert!(!cond(&st3.conditions, "QuarantineNearFull").is_true());

    // A source that no longer quarantines but still has entries shows them, without the
    // condition; one without entries shows nothing.
    let st = source_status(
        &quarantining_src("reject"),
        Some(&sr),
        with(&pens),
        &SourceStatus::default(),
        NOW,
    );
    assert_eq!(st.quarantine.as_ref().map(|q| q.entries), Some(5));
    assert!(
        st.conditions
            .iter()
            .all(|c| c.type_ != "QuarantineNearFull")
    );
    let st = source_status(
        &quarantining_src("reject"),
        Some(&sr),
        with(&empty),
        &SourceStatus::default(),
        NOW,
    );
    assert_eq!(st.quarantine, None);
    assert_eq!(st.conditions.len(), 3);
}

#[test]
fn many_pods_holding_entries_are_counted_and_the_fullest_listed() {
    let pens: Vec<(String, ankusa_api::PenStatus)> = (0..25)
        .map(|n| (format!("gw-{n}"), pen(n + 1, 0, 0)))
        .collect();
    let q = source_st::source_quarantine("orders", true, &pens).unwrap();
    assert_eq!(q.pods_with_entries, 25);
    assert_eq!(q.entries, (1..=25).sum::<i64>());
    assert_eq!(q.pods.len(), source_st::MAX_QUARANTINE_PODS);
    assert_eq!(q.pods[0].pod, "gw-24");
    // Past three near-full pods the message counts the rest.
    let full: Vec<(String, ankusa_api::PenStatus)> = (0..5)
        .map(|n| (format!("gw-{n}"), pen(1, 0, 1000)))
        .collect();
    let (on, _, m) = source_st::quarantine_near_full("gw", &full);
    assert!(on);
    assert!(
        m.contains("gw/gw-2: ") && !m.contains("gw/gw-3: ") && m.contains("and 2 more pods"),
        "{m}"
    );
    // Sizes read as people write them.
    let big = ankusa_api::PenStatus {
        bytes: 900 << 20,
        max_bytes: 1 << 30,
        ..pen(1, 0, 0)
    };
    let (_, _, m) = source_st::quarantine_near_full("gw", &[("gw-0".into(), big)]);
    assert!(m.contains("gw/gw-0: 900.0 MiB of 1.0 GiB (87%)"), "{m}");
    // No pod answered: nothing is claimed either way.
    let (on, reason, _) = source_st::quarantine_near_full("gw", &[]);
    assert_eq!((on, reason), (false, "NoReport"));
}

fn pod_with(n: u8, archive_failures: i64, dlq_full: bool) -> GatewayPodStatus {
    GatewayPodStatus {
        archive: Some(ankusa_crds::PodArchiveStatus {
            pending: 7,
            archived: 100,
            failures: archive_failures,
            last_error: (archive_failures > 0).then(|| "s3: PUT: status 503".into()),
            ..Default::default()
        }),
        dlq: Some(ankusa_crds::PodDlqStatus {
            rows: 10,
            bytes: 1000,
            full: dlq_full,
        }),
        ..pod(n, true, true)
    }
}

#[test]
fn a_full_dlq_or_failing_archive_degrades_the_gateway() {
    let g = gw(2);
    let r = rendered_ok(&g);
    let st = |pods| gateway_status(&g, &r, pods, None, &Default::default(), NOW);
    let ok = st(vec![pod_with(0, 2, false), pod_with(1, 0, false)]);
    assert!(
        !cond(&ok.conditions, "Degraded").is_true(),
        "two failures are retried quietly"
    );
    assert!(cond(&ok.conditions, "Ready").is_true());

    let failing = st(vec![pod_with(0, 3, false), pod_with(1, 0, false)]);
    let d = cond(&failing.conditions, "Degraded");
    assert!(d.is_true());
    assert_eq!(d.reason.as_deref(), Some("ArchiveFailing"));
    assert!(d.message.as_deref().unwrap().contains("gw-0"), "{d:?}");
    assert!(
        cond(&failing.conditions, "Ready").is_true(),
        "still serving"
    );

    let full = st(vec![pod_with(0, 3, false), pod_with(1, 0, true)]);
    let d = cond(&full.conditions, "Degraded");
    assert_eq!(d.reason.as_deref(), Some("DlqFull"));
    assert!(
        d.message.as_deref().unwrap().contains("gw-1")
            && d.message.as_deref().unwrap().contains("503 dlq_full"),
        "{d:?}"
    );
}

#[test]
fn archive_and_dlq_counts_alone_are_not_a_steady_change() {
    let g = gw(1);
    let r = rendered_ok(&g);
    let st = |pods| gateway_status(&g, &r, pods, None, &Default::default(), NOW);
    let a = st(vec![pod_with(0, 0, false)]);
    let mut busier = pod_with(0, 1, false);
    busier.archive.as_mut().unwrap().pending = 900;
    busier.dlq.as_mut().unwrap().rows = 77;
    let b = st(vec![busier]);
    assert_ne!(a, b);
    assert_eq!(gateway::steady_part(&a), gateway::steady_part(&b));
    // A DLQ turning full, or uploads failing long enough to degrade, is.
    let c = st(vec![pod_with(0, 0, true)]);
    assert_ne!(gateway::steady_part(&a), gateway::steady_part(&c));
    let d = st(vec![pod_with(0, 5, false)]);
    assert_ne!(gateway::steady_part(&a), gateway::steady_part(&d));
}

fn durable_gw(dual: bool) -> Gateway {
    let mut d = json!({"backup": {"intervalMs": 10000,
                                  "store": {"type": "s3", "bucket": "hooks-backup", "endpoint": "http://127.0.0.1:5000"}}});
    if dual {
        d["mode"] = json!("dual");
        d["intake"] = json!({"type": "kafka",
                             "options": {"brokers": ["127.0.0.1:9092"], "topic": "intake"}});
    }
    resource(json!({
        "metadata": {"name": "gw", "namespace": "ns", "generation": 4},
        "spec": {"replicas": 2, "durability": d,
                 "settings": {"egress": {"allow_http": true, "allow_loopback": true}}},
    }))
}

/// A pod's `GET /v1/status` with backups and an intake log.
fn durable_status(age: u64, failures: u64, state: &str) -> ankusa_api::Status {
    serde_json::from_value(json!({
        "instance": "gw-0", "version": "0.1.0", "config_hash": "abc", "generation": 1,
        "loaded_at": 1767225600000u64, "sources": [],
        "backup": {"store": "s3", "last_success_at": 1767225600000u64, "age_seconds": age,
                   "runs": 12, "failures": failures,
                   "last_error": (failures > 0).then_some("s3: PUT backup/gw-0/LATEST: status 503"),
                   "restored_from": "20260101T000000Z-0007"},
        "intake": {"log": "kafka", "node": "gw-0", "state": state, "partition": 3, "offset": 812,
                   "watermark": 800, "pending": 4, "lag_seconds": 1.7, "failures": 0},
    }))
    .expect("a status the gateway sends")
}

fn mapped(age: u64, failures: u64, state: &str, n: u8) -> GatewayPodStatus {
    let mut p = pod(n, true, true);
    gateway::pod_durability(&durable_status(age, failures, state), &mut p);
    p
}

#[test]
fn a_pods_backup_and_intake_reach_its_status() {
    let p = mapped(42, 0, "ready", 0);
    assert_eq!(p.backup_age_seconds, Some(42));
    assert_eq!(p.last_backup_at.as_deref(), Some("2026-01-01T00:00:00Z"));
    assert_eq!(p.backup_failures, Some(0));
    assert_eq!(p.backup_last_error, None);
    assert_eq!(p.restored_from.as_deref(), Some("20260101T000000Z-0007"));
    assert_eq!(p.intake_state.as_deref(), Some("ready"));
    assert_eq!(p.intake_lag_seconds, Some(1), "whole seconds");
    assert_eq!(p.intake_pending, Some(4));
    let v = serde_json::to_value(&p).unwrap();
    for k in [
        "backupAgeSeconds",
        "lastBackupAt",
        "restoredFrom",
        "intakeState",
        "intakeLagSeconds",
        "intakePending",
    ] {
        assert!(v.get(k).is_some(), "{k} in {v}");
    }
    // A pod of a version without them, or with neither on, reports none.
    let mut q = pod(1, true, true);
    let bare: ankusa_api::Status = serde_json::from_value(json!({
        "instance": "gw-1", "version": "0.1.0", "config_hash": "abc", "generation": 1,
        "loaded_at": 0, "sources": []}))
    .unwrap();
    gateway::pod_durability(&bare, &mut q);
    assert_eq!(q, pod(1, true, true));
}

#[test]
fn stale_backups_and_a_down_intake_degrade_the_gateway() {
    let g = durable_gw(true);
    let r = rendered_ok(&g);
    assert_eq!(r.error, None);
    let st = |pods| gateway_status(&g, &r, pods, None, &Default::default(), NOW);
    // Interval 10 s: stale past 30 s, or after a failure.
    let ok = st(vec![
        mapped(30, 0, "ready", 0),
        mapped(5, 0, "recovering", 1),
    ]);
    assert!(
        !cond(&ok.conditions, "Degraded").is_true(),
        "{:?}",
        ok.conditions
    );
    assert!(cond(&ok.conditions, "Ready").is_true());

    for stale in [mapped(31, 0, "ready", 0), mapped(3, 1, "ready", 0)] {
        let s = st(vec![stale, mapped(5, 0, "ready", 1)]);
        let d = cond(&s.conditions, "Degraded");
        assert!(d.is_true());
        assert_eq!(d.reason.as_deref(), Some("BackupStale"));
        let m = d.message.as_deref().unwrap();
        assert!(m.contains("gw-0") && !m.contains("gw-1"), "{m}");
        assert!(m.contains("intake log"), "dual: the log has the rest: {m}");
        assert!(cond(&s.conditions, "Ready").is_true(), "still serving");
    }
    let down = st(vec![mapped(31, 0, "ready", 0), mapped(5, 0, "down", 1)]);
    let d = cond(&down.conditions, "Degraded");
    assert_eq!(
        d.reason.as_deref(),
        Some("IntakeDown"),
        "the worse of the two"
    );
    assert!(d.message.as_deref().unwrap().contains("gw-1"));
    assert!(
        d.message
            .as_deref()
            .unwrap()
            .contains("503 intake_unavailable")
    );

    // Disk mode: the message says what a lost volume costs.
    let g = durable_gw(false);
    let r = rendered_ok(&g);
    let s = gateway_status(
        &g,
        &r,
        vec![mapped(31, 0, "ready", 0)],
        None,
        &Default::default(),
        NOW,
    );
    let m = cond(&s.conditions, "Degraded").message.clone().unwrap();
    assert!(m.contains("acked since its last backup"), "{m}");
    // Without backups, an age means nothing.
    let g = gw(1);
    let s = gateway_status(
        &g,
        &rendered_ok(&g),
        vec![mapped(9999, 0, "ready", 0)],
        None,
        &Default::default(),
        NOW,
    );
    assert!(!cond(&s.conditions, "Degraded").is_true());
}

#[test]
fn backup_ages_and_intake_lag_alone_are_not_a_steady_change() {
    let g = durable_gw(true);
    let r = rendered_ok(&g);
    let st = |pods| gateway_status(&g, &r, pods, None, &Default::default(), NOW);
    let a = st(vec![mapped(3, 0, "ready", 0)]);
    let mut later = mapped(9, 0, "ready", 0);
    later.intake_lag_seconds = Some(0);
    later.intake_pending = Some(17);
    later.last_backup_at = Some("2026-01-01T00:00:10Z".into());
    let b = st(vec![later]);
    assert_ne!(a, b);
    assert_eq!(gateway::steady_part(&a), gateway::steady_part(&b));
    // A state change, a first failure, or staleness (a condition) is.
    for c in [
        st(vec![mapped(3, 0, "down", 0)]),
        st(vec![mapped(3, 1, "ready", 0)]),
        st(vec![mapped(60, 0, "ready", 0)]),
    ] {
        assert_ne!(gateway::steady_part(&a), gateway::steady_part(&c));
    }
}
