//! Whole-config validation: the defaults, and the rules between sections (admin off loopback,
//! tenant_path sources, sinks against `egress`, the metadata token's hosts).

use crate::testing::{log_source, with_source};
use crate::*;

#[test]
fn a_metadata_token_goes_to_google_or_a_listed_host_only() {
    use crate::{GooglePubsubSinkConfig, PubsubAuth, SecretUrl};
    let with = |endpoint: Option<&str>, auth: PubsubAuth, hosts: &[&str]| {
        let mut ps = GooglePubsubSinkConfig::new("proj", "topic");
        ps.auth = auth;
        ps.endpoint = endpoint.map(SecretUrl::new);
        if auth == PubsubAuth::Token {
            ps.token = Some(crate::Secret::new("t0ken"));
        }
        let mut c = with_source(SourceConfig::with_sinks(vec![SinkConfig::GooglePubsub(ps)]));
        c.egress.metadata_token_hosts = hosts.iter().map(|h| h.to_string()).collect();
        validate(&c)
    };
    let m = PubsubAuth::Metadata;
    with(None, m, &[]).unwrap();
    with(Some("https://pubsub.googleapis.com"), m, &[]).unwrap();
    with(Some("https://europe-west1-pubsub.googleapis.com"), m, &[]).unwrap();
    for bad in [
        "https://collector.example.com",
        "http://pubsub.googleapis.com",
        "https://googleapis.com.example.com",
        "https://pubsub.googleapis.com.evil.test",
    ] {
        let e = with(Some(bad), m, &[]).unwrap_err();
        assert_eq!(
            e.field.as_deref(),
            Some("sources.s.sinks[0].endpoint"),
            "{bad}"
        );
        assert!(!e.to_string().contains("example.com") && !e.to_string().contains("evil"));
    }
    with(
        Some("https://psc.example.internal"),
        m,
        &["psc.example.internal"],
    )
    .unwrap();
    with(
        Some("https://collector.example.com"),
        PubsubAuth::Token,
        &[],
    )
    .unwrap();
    // The emulator on loopback: refused by the default egress policy (the field and the
    // class named, not the address), allowed with egress.allow_loopback.
    let e = with(Some("http://127.0.0.1:8085"), PubsubAuth::None, &[]).unwrap_err();
    assert_eq!(e.field.as_deref(), Some("sources.s.sinks[0].endpoint"));
    assert!(e.message.contains("loopback") && !e.to_string().contains("127.0.0.1"));
    let mut ps = GooglePubsubSinkConfig::new("proj", "topic");
    ps.auth = PubsubAuth::None;
    ps.endpoint = Some(SecretUrl::new("http://127.0.0.1:8085"));
    let mut c = with_source(SourceConfig::with_sinks(vec![SinkConfig::GooglePubsub(ps)]));
    c.egress.allow_loopback = true;
    validate(&c).unwrap();
    let e = with(None, m, &["https://x"]).unwrap_err();
    assert_eq!(e.field.as_deref(), Some("egress.metadata_token_hosts[0]"));
}

#[test]
fn broker_addresses_written_as_refused_literals_are_refused_by_field_and_class() {
    use crate::{
        GooglePubsubSinkConfig, KafkaSinkConfig, NatsSinkConfig, PubsubAuth, RabbitmqSinkConfig,
        RedisSinkConfig, SecretUrl, SqsSinkConfig,
    };
    let check = |sink: SinkConfig, egress: EgressConfig| {
        let mut c = with_source(SourceConfig::with_sinks(vec![sink]));
        c.egress = egress;
        validate(&c)
    };
    let kafka = |b: &[&str]| {
        SinkConfig::Kafka(KafkaSinkConfig::new(
            b.iter().map(|s| s.to_string()).collect(),
            "hooks",
        ))
    };
    let mut sqs = SqsSinkConfig::new("https://sqs.us-east-1.amazonaws.com/1/q");
    sqs.endpoint = Some(SecretUrl::new("http://[fd00:ec2::254]:4566"));
    let mut pubsub = GooglePubsubSinkConfig::new("proj", "topic");
    pubsub.auth = PubsubAuth::None;
    pubsub.endpoint = Some(SecretUrl::new("http://169.254.169.254"));
    let cases = [
        (
            kafka(&["kafka.example:9092", "127.0.0.1:9092"]),
            "brokers[1]",
            "loopback",
        ),
        (
            SinkConfig::Rabbitmq(RabbitmqSinkConfig::new(
                "amqp://guest:s3cret@10.1.2.3:5672/%2f",
                "ex",
            )),
            "url",
            "private",
        ),
        (
            SinkConfig::Nats(NatsSinkConfig::new(vec!["nats://[::1]:4222".into()], "a.b")),
            "servers[0]",
            "loopback",
        ),
        (
            SinkConfig::Redis(RedisSinkConfig::new("redis://:s3cret@192.168.0.9/0", "c")),
            "url",
            "private",
        ),
        (SinkConfig::Sqs(sqs), "endpoint", "private"),
        (SinkConfig::GooglePubsub(pubsub), "endpoint", "link_local"),
        (kafka(&["0.0.0.0:9092"]), "brokers[0]", "not_unicast"),
    ];
    for (sink, field, class) in cases {
        let e = check(sink.clone(), EgressConfig::default()).unwrap_err();
        assert_eq!(
            e.field.as_deref(),
            Some(format!("sources.s.sinks[0].{field}").as_str()),
            "{e}"
        );
        let text = e.to_string();
        assert!(text.contains(&format!("({class})")), "{text}");
        for value in [
            "127.0.0.1",
            "10.1.2.3",
            "::1",
            "192.168",
            "fd00",
            "169.254",
            "s3cret",
        ] {
            assert!(!text.contains(value), "{text} shows {value}");
        }
        // The flag of its class (or a CIDR covering it) lets the same config load.
        let open = EgressConfig {
            allow_loopback: class == "loopback",
            allow_private: class == "private",
            allow_link_local: class == "link_local",
            allow_cidrs: if class == "not_unicast" {
                vec!["0.0.0.0/32".into()]
            } else {
                vec![]
            },
            ..Default::default()
        };
        check(sink.clone(), open).unwrap();
        // Another class's flag does not.
        let other = EgressConfig {
            allow_loopback: class != "loopback",
            allow_private: class != "private",
            allow_link_local: class != "link_local",
            ..Default::default()
        };
        assert!(check(sink, other).is_err(), "{field} {class}");
    }
    // A name is not resolved at load: the sink checks what it resolves to on each connect.
    check(kafka(&["localhost:9092"]), EgressConfig::default()).unwrap();
    check(
        SinkConfig::Redis(RedisSinkConfig::new("redis://redis.internal:6379/0", "c")),
        EgressConfig::default(),
    )
    .unwrap();
}

#[test]
fn defaults_are_valid() {
    validate(&Config::default()).unwrap();
    validate(&with_source(log_source())).unwrap();
}

#[test]
fn unsigned_http_sink_is_refused() {
    let s = SourceConfig::with_sinks(vec![SinkConfig::Http(HttpSinkConfig::new(
        "https://x.test/h",
    ))]);
    let e = validate(&with_source(s)).unwrap_err();
    assert_eq!(e.field.as_deref(), Some("sources.s.sinks[0].secret"));
    let mut h = HttpSinkConfig::new("https://x.test/h");
    h.secret = Some(Secrets::one("whsec_!!notbase64"));
    let e = validate(&with_source(SourceConfig::with_sinks(vec![
        SinkConfig::Http(h),
    ])))
    .unwrap_err();
    assert!(e.message.contains("base64"), "{e}");
}

#[test]
fn shared_unverified_source_under_tenant_path_is_refused() {
    let mut c = with_source(log_source());
    c.http.routing = Routing::TenantPath;
    assert!(validate(&c).is_err());
    c.sources.get_mut("s").unwrap().trust_url_tenant = true;
    validate(&c).unwrap();
}

#[test]
fn open_admin_off_loopback_is_refused() {
    let mut c = Config::default();
    c.admin.ip = "0.0.0.0".parse().unwrap();
    assert_eq!(
        validate(&c).unwrap_err().field.as_deref(),
        Some("admin.tokens")
    );
}

#[test]
fn a_metrics_read_token_is_known_and_an_unknown_scope_is_named() {
    let mut c = Config::default();
    c.admin.tokens = vec![AdminToken {
        token: "scrape-token-0123456789".into(),
        scopes: vec!["metrics:read".into()],
    }];
    validate(&c).unwrap();
    c.admin.tokens[0].scopes.push("metrics:write".into());
    let e = validate(&c).unwrap_err();
    assert_eq!(e.field.as_deref(), Some("admin.tokens[0].scopes[1]"));
    assert!(e.message.contains("metrics:read"), "{e}");
}

#[test]
fn lifecycle_sinks_follow_the_source_rules_and_are_refused_under_direct_mode() {
    let mut c = Config {
        lifecycle: Some(LifecycleConfig::with_sinks(vec![signed(
            "https://events.example.com/in",
        )])),
        ..Default::default()
    };
    validate(&c).unwrap();
    // A literal loopback address is refused by the default egress policy, named by its path.
    c.lifecycle = Some(LifecycleConfig::with_sinks(vec![
        signed("https://events.example.com/in"),
        SinkConfig::Nats(NatsSinkConfig::new(
            vec!["nats://127.0.0.1:4222".into()],
            "ankusa.lifecycle",
        )),
    ]));
    let e = validate(&c).unwrap_err();
    assert!(
        e.field
            .as_deref()
            .is_some_and(|f| f.starts_with("lifecycle.sinks[1].servers")),
        "{e}"
    );
    assert!(!e.to_string().contains("127.0.0.1"), "{e}");
    c.lifecycle = Some(LifecycleConfig::with_sinks(vec![signed(
        "https://events.example.com/in",
    )]));
    c.wal.wal_type = WalType::None;
    let e = validate(&c).unwrap_err();
    assert_eq!(e.field.as_deref(), Some("lifecycle"), "{e}");
}

fn signed(url: &str) -> SinkConfig {
    let mut h = HttpSinkConfig::new(url);
    h.secret = Some(Secrets::one("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"));
    SinkConfig::Http(h)
}
