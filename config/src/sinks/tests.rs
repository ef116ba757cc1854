//! The sink configs' defaults, YAML round trip, validation and redacted `Debug`.

use super::*;
use crate::Config;

/// Validates `s` as the only sink of a source (`testing::check_sink`).
fn check(s: SinkConfig) -> Result<(), ConfigError> {
    crate::testing::check_sink(s, false)
}

fn msg(r: Result<(), ConfigError>) -> String {
    r.expect_err("should be refused").to_string()
}

#[test]
fn yaml_defaults() {
    let y = r#"
egress: {allow_loopback: true}
sources:
  s:
    sinks:
      - type: kafka
        brokers: ["127.0.0.1:9092"]
        topic: hooks
      - type: rabbitmq
        url: amqp://guest:guest@127.0.0.1:5672/%2f
        exchange: ankusa.events
      - type: nats
        servers: ["nats://127.0.0.1:4222"]
        subject: ankusa.events
      - type: redis
        url: redis://127.0.0.1:6379/0
        channel: ankusa.events
      - type: sqs
        queue_url: http://127.0.0.1:5000/123456789012/hooks.fifo
      - type: google_pubsub
        project: p1
        topic: hooks
        auth: none
"#;
    let c = crate::from_yaml_str(y, &crate::interpolate::SystemLookup).expect("parses");
    crate::validate(&c).expect("valid");
    let sinks = &c.sources["s"].sinks;
    let types: Vec<_> = sinks.iter().map(|s| s.type_name()).collect();
    assert_eq!(
        types,
        ["kafka", "rabbitmq", "nats", "redis", "sqs", "google_pubsub"]
    );
    match &sinks[0] {
        SinkConfig::Kafka(k) => {
            assert_eq!(k.max_record_bytes, 1_000_000);
            assert_eq!(k.produce_timeout_ms, 5_000);
            assert_eq!(k.inline_max_bytes, 65_536);
            assert_eq!(k.idle_timeout_ms, 600_000);
        }
        o => panic!("{o:?}"),
    }
    match &sinks[1] {
        SinkConfig::Rabbitmq(r) => {
            assert_eq!(r.max_inflight, 256);
            assert_eq!(r.confirm_timeout_ms, 5_000);
            assert_eq!(r.exchange_type, ExchangeType::Topic);
            assert_eq!(r.routing_key, None);
        }
        o => panic!("{o:?}"),
    }
    match &sinks[2] {
        SinkConfig::Nats(n) => {
            assert_eq!(n.max_message_bytes, 1_048_576);
            assert_eq!(n.publish_timeout_ms, 5_000);
        }
        o => panic!("{o:?}"),
    }
    match &sinks[4] {
        SinkConfig::Sqs(s) => {
            assert!(s.is_fifo());
            assert!(s.batch);
            assert_eq!(s.batch_linger_ms, 20);
            assert_eq!(s.batch_max_entries, 10);
            assert_eq!(s.batch_max_bytes, 262_144);
            assert_eq!(s.batch_queue_max, 4_096);
            assert_eq!(s.batch_queue_max_bytes, 134_217_728);
            assert_eq!(s.batch_queue_tenant_max, 1_024);
            assert_eq!(s.max_message_bytes, 1_048_576);
        }
        o => panic!("{o:?}"),
    }
    match &sinks[5] {
        SinkConfig::GooglePubsub(g) => {
            assert_eq!(g.max_message_bytes, 10_000_000);
            assert_eq!(g.batch_max_entries, 1_000);
            assert_eq!(g.batch_max_bytes, 7_500_000);
            assert_eq!(g.auth, PubsubAuth::None);
        }
        o => panic!("{o:?}"),
    }
    // Round trip: the operator serialises these types and the gateway parses them back.
    let back =
        crate::from_yaml_str(&c.to_yaml(), &crate::interpolate::SystemLookup).expect("round trip");
    assert_eq!(back, c);
}

#[test]
fn unknown_keys_are_refused() {
    let y = "sources:\n  s:\n    sinks:\n      - type: redis\n        url: redis://127.0.0.1\n        channel: c\n        chanel: typo\n";
    assert!(crate::from_yaml_str(y, &crate::interpolate::SystemLookup).is_err());
}

#[test]
fn kafka_rules() {
    let ok = KafkaSinkConfig::new(vec!["127.0.0.1:9092".into()], "hooks");
    check(SinkConfig::Kafka(ok.clone())).unwrap();
    let mut k = ok.clone();
    k.brokers = vec![];
    assert!(msg(check(SinkConfig::Kafka(k))).contains("sources.src.sinks[0].brokers"));
    let mut k = ok.clone();
    k.brokers = vec!["user:pw@host:9092".into()];
    let m = msg(check(SinkConfig::Kafka(k)));
    assert!(m.contains("brokers[0]") && !m.contains("pw"), "{m}");
    let mut k = ok.clone();
    k.topic = "bad topic".into();
    assert!(msg(check(SinkConfig::Kafka(k))).contains(".topic"));
    let mut k = ok.clone();
    k.max_record_bytes = 10;
    assert!(msg(check(SinkConfig::Kafka(k))).contains("max_record_bytes must be >= 1024"));
    // Ordering lanes: an ordered Kafka sink is fine; a key needs exactly one source.
    let mut k = ok;
    k.ordered = true;
    check(SinkConfig::Kafka(k.clone())).unwrap();
    k.ordering_key = Some(OrderingKey {
        header: None,
        json: None,
    });
    assert!(msg(check(SinkConfig::Kafka(k))).contains("ordering_key"));
}

#[test]
fn rabbitmq_rules() {
    let ok = RabbitmqSinkConfig::new("amqp://guest:guest@127.0.0.1:5672/%2f", "ankusa.events");
    check(SinkConfig::Rabbitmq(ok.clone())).unwrap();
    let mut r = ok.clone();
    r.url = "http://u:secretpw@host/".into();
    let m = msg(check(SinkConfig::Rabbitmq(r)));
    assert!(m.contains(".url") && !m.contains("secretpw"), "{m}");
    let mut r = ok.clone();
    r.url = "amqp//nope:secretpw@".into();
    let m = msg(check(SinkConfig::Rabbitmq(r)));
    assert!(!m.contains("secretpw"), "{m}");
    let mut r = ok.clone();
    r.exchange = "amq.topic".into();
    assert!(msg(check(SinkConfig::Rabbitmq(r))).contains(".exchange"));
    let mut r = ok;
    r.max_inflight = 0;
    assert!(msg(check(SinkConfig::Rabbitmq(r))).contains("max_inflight must be >= 1"));
}

#[test]
fn nats_rules() {
    let ok = NatsSinkConfig::new(vec!["nats://127.0.0.1:4222".into()], "ankusa.events");
    check(SinkConfig::Nats(ok.clone())).unwrap();
    let mut n = ok.clone();
    n.subject = "ankusa.>".into();
    assert!(msg(check(SinkConfig::Nats(n))).contains(".subject"));
    let mut n = ok.clone();
    n.auth = Some(NatsAuth {
        token: Some("t".into()),
        username: Some("u".into()),
        password: Some("p".into()),
        ..Default::default()
    });
    assert!(msg(check(SinkConfig::Nats(n))).contains(".auth"));
    let mut n = ok;
    n.servers = vec!["nats://u:p@127.0.0.1:4222".into()];
    assert!(msg(check(SinkConfig::Nats(n))).contains("servers[0]"));
}

#[test]
fn sqs_rules() {
    let ok = SqsSinkConfig::new("https://sqs.us-east-1.amazonaws.com/123456789012/hooks.fifo");
    check(SinkConfig::Sqs(ok.clone())).unwrap();
    let mut s = ok.clone();
    s.batch_max_entries = 11;
    assert!(msg(check(SinkConfig::Sqs(s))).contains("batch_max_entries must be <= 10"));
    let mut s = ok.clone();
    s.batch_max_bytes = 2_000_000;
    assert!(msg(check(SinkConfig::Sqs(s))).contains("batch_max_bytes must be <= 1048576"));
    let mut s = ok.clone();
    s.max_message_bytes = 2_000_000;
    assert!(msg(check(SinkConfig::Sqs(s))).contains("max_message_bytes"));
    let mut s = ok.clone();
    s.message_group_id = Some("has space".into());
    assert!(msg(check(SinkConfig::Sqs(s))).contains("message_group_id"));
    let mut s = ok.clone();
    s.access_key_id = Some("AKIA".into());
    assert!(msg(check(SinkConfig::Sqs(s))).contains("secret_access_key"));
    let mut s = ok.clone();
    s.queue_url = "https://sqs.us-east-1.amazonaws.com/hooks".into();
    assert!(msg(check(SinkConfig::Sqs(s))).contains("queue_url"));
    // Ordering lanes need a FIFO queue.
    let mut s = ok;
    s.ordered = true;
    let fifo = s.queue_url.expose().ends_with(".fifo");
    if fifo {
        check(SinkConfig::Sqs(s.clone())).unwrap();
        s.queue_url = s.queue_url.expose().trim_end_matches(".fifo").into();
    }
    assert!(msg(check(SinkConfig::Sqs(s))).contains("FIFO"));
    assert!(!SqsSinkConfig::new("https://x/1/q").is_fifo());
}

#[test]
fn pubsub_rules() {
    let mut ok = GooglePubsubSinkConfig::new("my-project", "hooks");
    ok.auth = PubsubAuth::None;
    check(SinkConfig::GooglePubsub(ok.clone())).unwrap();
    let mut g = ok.clone();
    g.topic = "t1".into();
    assert!(msg(check(SinkConfig::GooglePubsub(g))).contains(".topic"));
    let mut g = ok.clone();
    g.auth = PubsubAuth::Token;
    assert!(msg(check(SinkConfig::GooglePubsub(g))).contains(".token: is required"));
    let mut g = ok.clone();
    g.batch_max_entries = 1001;
    assert!(msg(check(SinkConfig::GooglePubsub(g))).contains("batch_max_entries must be <= 1000"));
    let mut g = ok;
    g.max_message_bytes = 10_000_001;
    assert!(msg(check(SinkConfig::GooglePubsub(g))).contains("max_message_bytes"));
}

#[test]
fn redis_rules() {
    let ok = RedisSinkConfig::new("redis://:pw@127.0.0.1:6379/0", "c");
    check(SinkConfig::Redis(ok.clone())).unwrap();
    let mut r = ok;
    r.url = "http://127.0.0.1".into();
    assert!(msg(check(SinkConfig::Redis(r))).contains(".url"));
}

#[test]
fn debug_never_shows_credentials() {
    let mut s = SqsSinkConfig::new("https://sqs.us-east-1.amazonaws.com/1/q");
    s.access_key_id = Some("AKIAEXAMPLEKEY".into());
    s.secret_access_key = Some("s3cr3t-access".into());
    let mut g = GooglePubsubSinkConfig::new("p", "topic");
    g.auth = PubsubAuth::Token;
    g.token = Some("ya29.bearer".into());
    let mut n = NatsSinkConfig::new(vec!["nats://h:4222".into()], "a.b");
    n.auth = Some(NatsAuth {
        token: Some("nats-tok".into()),
        ..Default::default()
    });
    let mut k = KafkaSinkConfig::new(vec!["h:9092".into()], "t");
    k.sasl = Some(KafkaSasl {
        mechanism: KafkaSaslMechanism::Plain,
        username: "kuser".into(),
        password: "kpass".into(),
        token: Some("kafka-oauth-tok".into()),
        token_file: None,
    });
    let text = format!("{s:?}{g:?}{n:?}{k:?}");
    for needle in [
        "AKIAEXAMPLEKEY",
        "s3cr3t-access",
        "ya29.bearer",
        "nats-tok",
        "kpass",
        "kafka-oauth-tok",
    ] {
        assert!(!text.contains(needle), "{needle} in {text}");
    }
}

#[test]
fn nats_tls_takes_the_old_switch_and_the_shared_settings() {
    let parse = |tls: &str, egress: &str| {
        let y = format!(
            "egress: {{allow_loopback: true{egress}}}\nsources:\n  s:\n    sinks:\n      - type: nats\n        servers: [\"tls://127.0.0.1:4222\"]\n        subject: a.b\n        tls: {tls}\n"
        );
        crate::from_yaml_str(&y, &crate::interpolate::SystemLookup).and_then(|c| {
            crate::validate(&c)?;
            Ok(c)
        })
    };
    let nats = |c: &Config| match &c.sources["s"].sinks[0] {
        SinkConfig::Nats(n) => n.clone(),
        o => panic!("{o:?}"),
    };
    // The bare switch still reads, and `true` means the system's roots.
    let c = parse("true", "").expect("tls: true");
    assert_eq!(nats(&c).tls, NatsTls::Enabled(true));
    assert_eq!(
        nats(&c).tls.settings().as_deref(),
        Some(&SinkTls::default())
    );
    let c = parse("false", "").expect("tls: false");
    assert!(nats(&c).tls.settings().is_none());
    let c = parse(
        "{ca_file: /etc/ca.pem, cert_file: /etc/c.pem, key_pem: \"-----BEGIN PRIVATE KEY-----\\nx\\n\", server_name: nats.internal}",
        "",
    )
    .expect("settings");
    let t = nats(&c).tls.settings().expect("on").into_owned();
    assert_eq!(
        t.ca_file.as_deref(),
        Some(std::path::Path::new("/etc/ca.pem"))
    );
    assert_eq!(t.server_name.as_deref(), Some("nats.internal"));
    // Every form survives the operator's serialise-and-parse.
    for tls in ["true", "false", "{ca_file: /etc/ca.pem}"] {
        let c = parse(tls, "").expect(tls);
        let back = crate::from_yaml_str(&c.to_yaml(), &crate::interpolate::SystemLookup)
            .expect("round trip");
        assert_eq!(back, c, "{tls}");
    }
    // A typo inside the map is named, not lost in "no variant matched".
    let m = parse("{ca_flie: /etc/ca.pem}", "").unwrap_err().to_string();
    assert!(m.contains("ca_flie"), "{m}");
    // The shared checks, under the sink's path.
    let m = parse("{cert_file: /etc/c.pem}", "")
        .unwrap_err()
        .to_string();
    assert!(m.contains("sinks[0].tls.key_file"), "{m}");
    let m = parse("{insecure_skip_verify: true}", "")
        .unwrap_err()
        .to_string();
    assert!(m.contains("egress.allow_insecure_tls"), "{m}");
    parse("{insecure_skip_verify: true}", ", allow_insecure_tls: true").expect("allowed");
}

#[test]
fn nats_credentials_file_is_one_form_of_auth() {
    let ok = NatsSinkConfig::new(vec!["nats://127.0.0.1:4222".into()], "a.b");
    let mut n = ok.clone();
    n.auth = Some(NatsAuth {
        credentials_file: Some("/etc/ankusa/user.creds".into()),
        ..Default::default()
    });
    check(SinkConfig::Nats(n)).unwrap();
    let mut n = ok.clone();
    n.auth = Some(NatsAuth {
        credentials_file: Some("/etc/ankusa/user.creds".into()),
        nkey_seed: Some("SUAX".into()),
        ..Default::default()
    });
    assert!(msg(check(SinkConfig::Nats(n))).contains("credentials_file"));
    let mut n = ok;
    n.auth = Some(NatsAuth {
        credentials_file: Some("".into()),
        ..Default::default()
    });
    assert!(msg(check(SinkConfig::Nats(n))).contains(".auth.credentials_file"));
}

#[test]
fn sqs_and_pubsub_take_the_shared_tls_settings_over_https_only() {
    let parse = |sink: &str, egress: &str| {
        let y = format!(
            "egress: {{allow_loopback: true{egress}}}\nsources:\n  s:\n    sinks:\n      - {sink}\n"
        );
        crate::from_yaml_str(&y, &crate::interpolate::SystemLookup).and_then(|c| {
            crate::validate(&c)?;
            Ok(c)
        })
    };
    let tls = "tls: {ca_file: /etc/ankusa/ca.pem, server_name: sqs.internal}";
    let c = parse(
        &format!("{{type: sqs, queue_url: \"https://127.0.0.1:4443/1/q\", {tls}}}"),
        "",
    )
    .expect("sqs over https with a CA");
    let SinkConfig::Sqs(s) = &c.sources["s"].sinks[0] else {
        panic!("an sqs sink")
    };
    let t = s.tls.as_ref().expect("tls");
    assert_eq!(
        t.ca_file.as_deref(),
        Some(std::path::Path::new("/etc/ankusa/ca.pem"))
    );
    assert_eq!(t.server_name.as_deref(), Some("sqs.internal"));
    parse(
        &format!(
            "{{type: google_pubsub, project: p, topic: hooks, auth: none, endpoint: \"https://127.0.0.1:8443\", {tls}}}"
        ),
        "",
    )
    .expect("pubsub over https with a CA");
    // Google's own endpoint (the default) is https too.
    parse(
        &format!("{{type: google_pubsub, project: p, topic: hooks, {tls}}}"),
        "",
    )
    .expect("pubsub with the default endpoint");

    // Plaintext endpoints would ignore the settings: named.
    let e = parse(
        &format!("{{type: sqs, queue_url: \"http://127.0.0.1:5000/1/q\", {tls}}}"),
        "",
    )
    .expect_err("sqs over http")
    .to_string();
    assert!(
        e.contains("sources.s.sinks[0].tls") && e.contains("https://"),
        "{e}"
    );
    let e = parse(
        &format!(
            "{{type: sqs, queue_url: \"https://sqs.us-east-1.amazonaws.com/1/q\", endpoint: \"http://127.0.0.1:5000\", {tls}}}"
        ),
        "",
    )
    .expect_err("sqs endpoint over http")
    .to_string();
    assert!(e.contains("sources.s.sinks[0].tls"), "{e}");
    let e = parse(
        &format!(
            "{{type: google_pubsub, project: p, topic: hooks, auth: none, endpoint: \"http://127.0.0.1:8085\", {tls}}}"
        ),
        "",
    )
    .expect_err("pubsub over http")
    .to_string();
    assert!(
        e.contains("sources.s.sinks[0].tls") && e.contains("https://"),
        "{e}"
    );

    // The shared checks apply: insecure_skip_verify only under egress.allow_insecure_tls.
    let insecure =
        "{type: sqs, queue_url: \"https://127.0.0.1:4443/1/q\", tls: {insecure_skip_verify: true}}";
    let e = parse(insecure, "").expect_err("refused").to_string();
    assert!(
        e.contains("sources.s.sinks[0].tls.insecure_skip_verify")
            && e.contains("egress.allow_insecure_tls"),
        "{e}"
    );
    parse(insecure, ", allow_insecure_tls: true").expect("allowed by egress");
    let e = parse(
        "{type: google_pubsub, project: p, topic: hooks, tls: {cert_file: /etc/c.pem}}",
        "",
    )
    .expect_err("a certificate without its key")
    .to_string();
    assert!(e.contains("sources.s.sinks[0].tls.key_file"), "{e}");
}

/// Every file a sink reads is typed `FilePath`, so `file_options` finds it (the operator's
/// refusal and the gateway's own-directory check rest on that): a bare path type in a sink's
/// config would be a file option both of them miss.
#[test]
fn sink_file_options_are_typed_file_path() {
    let sources = [
        ("http.rs", include_str!("http.rs")),
        ("kafka.rs", include_str!("kafka.rs")),
        ("log.rs", include_str!("log.rs")),
        ("mod.rs", include_str!("mod.rs")),
        ("nats.rs", include_str!("nats.rs")),
        ("pubsub.rs", include_str!("pubsub.rs")),
        ("rabbitmq.rs", include_str!("rabbitmq.rs")),
        ("redis.rs", include_str!("redis.rs")),
        ("routing.rs", include_str!("routing.rs")),
        ("shared.rs", include_str!("shared.rs")),
        ("sqs.rs", include_str!("sqs.rs")),
        ("tls.rs", include_str!("tls.rs")),
    ];
    for (name, text) in sources {
        let text = text.split("#[cfg(test)]").next().unwrap_or(text);
        for bare in ["PathBuf", "std::path", "OsString"] {
            assert!(
                !text.contains(bare),
                "{name} names {bare}: type file options as FilePath"
            );
        }
    }
    let found: Vec<String> = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/src/sinks"))
        .expect("sinks dir")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".rs") && n != "tests.rs" && n != "url_tests.rs")
        .collect();
    assert_eq!(found.len(), sources.len(), "a new sink file: add it here");

    let y = "sources:\n  s:\n    sinks:\n      - type: kafka\n        brokers: [\"b:9093\"]\n        \
             topic: t\n        sasl: {mechanism: oauthbearer, token_file: /t}\n        \
             tls: {ca_file: /ca.pem, cert_file: /c.pem, key_file: /c.key}\n";
    let cfg = crate::from_yaml_str(y, &crate::interpolate::SystemLookup).expect("parses");
    let mut files = crate::file_options(&cfg);
    files.sort();
    assert_eq!(
        files,
        [
            "sources.s.sinks[0].sasl.token_file",
            "sources.s.sinks[0].tls.ca_file",
            "sources.s.sinks[0].tls.cert_file",
            "sources.s.sinks[0].tls.key_file",
        ]
    );
}

/// `filter`, `on_filter_error` and `transform` on every sink type: compiled at load, errors
/// naming the key and the position, and refused where they cannot apply.
#[test]
fn filters_and_transforms_are_compiled_at_load() {
    let load = |sink: &str| {
        let y = format!("sources:\n  s:\n    sinks:\n      - {sink}\n");
        crate::from_yaml_str(&y, &crate::interpolate::SystemLookup)
            .and_then(|c| crate::validate(&c).map(|()| c))
    };
    let c = load(
        "{type: rabbitmq, url: \"amqp://mq:5672\", exchange: x, filter: 'body.type == \"a\"', on_filter_error: skip, transform: {body: 'body.data', headers: '{\"x-t\": body.type}'}}",
    )
    .expect("loads");
    let r = c.sources["s"].sinks[0].routing();
    assert_eq!(r.filter, Some("body.type == \"a\""));
    assert_eq!(r.on_filter_error, crate::OnFilterError::Skip);
    let compiled = r.compile("p").expect("compiles");
    assert!(compiled.reads_body() && compiled.transforms());

    for (sink, field, words) in [
        (
            "{type: log, filter: 'body.type =='}",
            "sources.s.sinks[0].filter",
            "line 1",
        ),
        (
            "{type: log, filter: '\"a\"'}",
            "sources.s.sinks[0].filter",
            "bool",
        ),
        (
            "{type: log, on_filter_error: skip}",
            "sources.s.sinks[0].on_filter_error",
            "filter",
        ),
        (
            "{type: log, transform: {}}",
            "sources.s.sinks[0].transform",
            "body, headers",
        ),
        (
            "{type: log, transform: {headers: 'size'}}",
            "sources.s.sinks[0].transform.headers",
            "map",
        ),
        (
            "{type: log, transform: {bodyy: 'x'}}",
            "sources.s.sinks[0]",
            "bodyy",
        ),
    ] {
        let e = load(sink).expect_err(sink).to_string();
        assert!(e.contains(field) && e.contains(words), "{sink}: {e}");
    }
    // Where they cannot apply: a direct source (every sink confirms the hook as received) and
    // the lifecycle sinks (every sink gets every event).
    for (y, field) in [
        (
            "wal: {type: none}\nsources:\n  s:\n    sinks:\n      - {type: rabbitmq, url: \"amqp://mq:5672\", exchange: x, filter: 'size > 1'}\n",
            "sources.s.sinks[0].filter",
        ),
        (
            "lifecycle:\n  sinks: [{type: log, transform: {body: 'body'}}]\nsources:\n  s:\n    sinks: [{type: log}]\n",
            "lifecycle.sinks[0]",
        ),
    ] {
        let e = crate::from_yaml_str(y, &crate::interpolate::SystemLookup)
            .and_then(|c| crate::validate(&c))
            .expect_err(y)
            .to_string();
        assert!(e.contains(field), "{y}: {e}");
    }
}

/// Every example of docs/filters.md loads: the full config at the top (with its sinks'
/// interpolations stubbed) and each fragment of sink keys as a log sink's.
#[test]
fn the_filter_docs_examples_compile() {
    let doc = include_str!("../../../docs/filters.md");
    let blocks: Vec<&str> = doc
        .split("```yaml\n")
        .skip(1)
        .filter_map(|b| b.split("```").next())
        .collect();
    assert!(blocks.len() >= 7, "examples found: {}", blocks.len());
    let mut fragments = 0;
    for block in blocks {
        if block.starts_with("sources:") {
            continue; // the overview's full config: its keys are the fragments' keys
        }
        let entry: serde_yaml_ng::Value = serde_yaml_ng::from_str(block).expect("yaml");
        let mut sink = serde_yaml_ng::Mapping::new();
        sink.insert("type".into(), "log".into());
        if let serde_yaml_ng::Value::Mapping(m) = entry {
            sink.extend(m);
        }
        let y = format!(
            "sources:\n  s:\n    sinks:\n      - {}\n",
            serde_json::to_string(&sink).expect("json")
        );
        let c = crate::from_yaml_str(&y, &crate::interpolate::SystemLookup)
            .and_then(|c| crate::validate(&c).map(|()| c))
            .unwrap_or_else(|e| panic!("{block}: {e}"));
        assert!(!c.sources["s"].sinks[0].routing().is_plain(), "{block}");
        fragments += 1;
    }
    assert!(fragments >= 6, "{fragments}");
}
