//! `ankusa check-config` refuses exactly what a start of `ankusa run` refuses (issue 27): over
//! generated configs (intake log type, SASL mechanism and TLS material; archive storage of each
//! store type, a missing GCS key, Azure without credentials;
//! backups; sink types and their options; admin TLS files present, missing or damaged; OTLP
//! trace export on, off or refused), both
//! run on the real binary and their verdicts must agree: `run` exits 78 (a config error) at
//! start iff `check-config` exits 78, and then with the same message. `run` is stopped as soon
//! as it has started (it logs `ankusa started` once everything is built) or has exited.
//!
//! Nothing leaves the machine: brokers, NATS servers, S3, GCS and Azure endpoints and HTTP
//! receivers are a closed loopback port; listeners take free loopback ports; each case has its
//! own temp dir.

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use ankusa_testkit::pki::Ca;
use common::*;
use proptest::prelude::*;

/// Generated cases: each starts the binary twice (a fraction of a second; about 1.5 s when the
/// boot restore tries a closed S3 port).
const CASES: u32 = 40;

#[derive(Debug, Clone, Copy)]
enum Pem {
    /// A CA certificate in a readable file.
    Valid,
    /// A file that is not PEM.
    Damaged,
    /// A path where there is no file.
    Missing,
    /// Inline, not PEM.
    InlineDamaged,
}

#[derive(Debug, Clone)]
enum Intake {
    None,
    Kafka {
        mechanism: Option<&'static str>,
        tls: Option<Pem>,
    },
    JetStream {
        tls: Option<Pem>,
    },
}

#[derive(Debug, Clone, Copy)]
enum Storage {
    None,
    Local,
    S3,
    /// Anonymous, at a closed port.
    Gcs,
    /// A service-account key file that is not there (refused when the store is built).
    GcsKeyMissing,
    /// A SAS, at a closed port.
    AzureSas,
    /// No SAS, no key and no workload identity in the environment (refused when built).
    AzureNoAuth,
}

#[derive(Debug, Clone, Copy)]
enum Backup {
    Off,
    /// Its own local store.
    OwnLocal,
    /// The archive's store (refused without `storage`).
    Shared,
    /// Its own S3 store (a closed port: the boot restore fails, which is no config error).
    OwnS3,
}

#[derive(Debug, Clone, Copy)]
enum SinkKind {
    Log,
    Http,
    KafkaOauth,
    KafkaTls(Pem),
    RedisTls(Pem),
    Nats,
}

#[derive(Debug, Clone, Copy)]
enum AdminTls {
    None,
    Valid,
    MissingKey,
    DamagedCert,
}

/// `telemetry.otlp`: off, a collector at a closed port (the exporter is built; nothing is
/// contacted at start), or a sampling ratio out of range.
#[derive(Debug, Clone, Copy)]
enum Telemetry {
    Off,
    ClosedCollector,
    RatioOutOfRange,
}

#[derive(Debug, Clone)]
struct Case {
    intake: Intake,
    storage: Storage,
    backup: Backup,
    sinks: Vec<SinkKind>,
    admin_tls: AdminTls,
    telemetry: Telemetry,
}

fn pem() -> impl Strategy<Value = Pem> {
    prop_oneof![
        6 => Just(Pem::Valid),
        2 => Just(Pem::Damaged),
        2 => Just(Pem::Missing),
        1 => Just(Pem::InlineDamaged),
    ]
}

fn intake() -> impl Strategy<Value = Intake> {
    let mechanism = prop_oneof![
        Just(None),
        Just(Some("plain")),
        Just(Some("scram_sha_512")),
        Just(Some("oauthbearer")),
    ];
    prop_oneof![
        2 => Just(Intake::None),
        4 => (mechanism, proptest::option::of(pem()))
            .prop_map(|(mechanism, tls)| Intake::Kafka { mechanism, tls }),
        1 => proptest::option::of(pem()).prop_map(|tls| Intake::JetStream { tls }),
    ]
}

fn case() -> impl Strategy<Value = Case> {
    let storage = prop_oneof![
        3 => Just(Storage::None),
        3 => Just(Storage::Local),
        3 => Just(Storage::S3),
        1 => Just(Storage::Gcs),
        1 => Just(Storage::GcsKeyMissing),
        1 => Just(Storage::AzureSas),
        1 => Just(Storage::AzureNoAuth),
    ];
    let backup = prop_oneof![
        4 => Just(Backup::Off),
        2 => Just(Backup::OwnLocal),
        1 => Just(Backup::Shared),
        1 => Just(Backup::OwnS3),
    ];
    let sink = prop_oneof![
        Just(SinkKind::Log),
        Just(SinkKind::Http),
        Just(SinkKind::KafkaOauth),
        pem().prop_map(SinkKind::KafkaTls),
        pem().prop_map(SinkKind::RedisTls),
        Just(SinkKind::Nats),
    ];
    let admin_tls = prop_oneof![
        3 => Just(AdminTls::None),
        3 => Just(AdminTls::Valid),
        1 => Just(AdminTls::MissingKey),
        1 => Just(AdminTls::DamagedCert),
    ];
    let telemetry = prop_oneof![
        3 => Just(Telemetry::Off),
        2 => Just(Telemetry::ClosedCollector),
        1 => Just(Telemetry::RatioOutOfRange),
    ];
    (
        intake(),
        storage,
        backup,
        proptest::collection::vec(sink, 1..3),
        admin_tls,
        telemetry,
    )
        .prop_map(
            |(intake, storage, backup, sinks, admin_tls, telemetry)| Case {
                intake,
                storage,
                backup,
                sinks,
                admin_tls,
                telemetry,
            },
        )
}

/// The files a case may name, outside the config's, the data's and the admin TLS directories
/// (a sink may not read those).
struct Files {
    ca: String,
    damaged: String,
    missing: String,
    admin_cert: String,
    admin_key: String,
    admin_damaged: String,
}

fn files(dir: &Path, ca: &Ca) -> Files {
    let tls = dir.join("tls");
    let admin = dir.join("admin-tls");
    std::fs::create_dir_all(&tls).unwrap();
    std::fs::create_dir_all(&admin).unwrap();
    let pair = ca.server(&["localhost"], false);
    let write = |p: &Path, text: &str| {
        std::fs::write(p, text).unwrap();
        path_str(p)
    };
    Files {
        ca: write(&tls.join("ca.pem"), &ca.pem),
        damaged: write(&tls.join("damaged.pem"), "not a certificate\n"),
        missing: path_str(&tls.join("absent.pem")),
        admin_cert: write(&admin.join("tls.crt"), &pair.cert),
        admin_key: write(&admin.join("tls.key"), &pair.key),
        admin_damaged: write(
            &admin.join("damaged.crt"),
            "-----BEGIN CERTIFICATE-----\nAAAA\n",
        ),
    }
}

/// The `tls:` of a sink or intake log, as a YAML flow map.
fn tls_yaml(p: Pem, f: &Files) -> String {
    match p {
        Pem::Valid => format!("{{ca_file: \"{}\"}}", f.ca),
        Pem::Damaged => format!("{{ca_file: \"{}\"}}", f.damaged),
        Pem::Missing => format!("{{ca_file: \"{}\"}}", f.missing),
        Pem::InlineDamaged => "{ca_pem: \"not a certificate\"}".into(),
    }
}

fn kafka_yaml(
    closed: u16,
    topic: &str,
    mechanism: Option<&str>,
    tls: Option<Pem>,
    f: &Files,
) -> String {
    let protocol = match (mechanism.is_some(), tls.is_some()) {
        (false, false) => "plaintext",
        (false, true) => "ssl",
        (true, false) => "sasl_plaintext",
        (true, true) => "sasl_ssl",
    };
    let mut y = format!(
        "{{brokers: [\"127.0.0.1:{closed}\"], topic: {topic}, security_protocol: {protocol}"
    );
    match mechanism {
        Some("oauthbearer") => y.push_str(", sasl: {mechanism: oauthbearer, token: t0ken}"),
        Some(m) => y.push_str(&format!(
            ", sasl: {{mechanism: {m}, username: u, password: p4ssword}}"
        )),
        None => {}
    }
    if let Some(p) = tls {
        y.push_str(&format!(", tls: {}", tls_yaml(p, f)));
    }
    y.push('}');
    y
}

fn config(c: &Case, dir: &Path, f: &Files, ports: (u16, u16), closed: u16) -> String {
    let data = path_str(&dir.join("data"));
    let mut y = format!(
        "node: {{instance: parity-0, data_dir: \"{data}\"}}\n\
         log: {{level: info, format: text}}\n\
         http: {{ip: 127.0.0.1, port: {}}}\n\
         egress: {{allow_http: true, allow_loopback: true}}\n",
        ports.0
    );
    y.push_str(&format!("admin:\n  ip: 127.0.0.1\n  port: {}\n", ports.1));
    match c.admin_tls {
        AdminTls::None => {}
        AdminTls::Valid => y.push_str(&format!(
            "  tls: {{cert_file: \"{}\", key_file: \"{}\"}}\n",
            f.admin_cert, f.admin_key
        )),
        AdminTls::MissingKey => y.push_str(&format!(
            "  tls: {{cert_file: \"{}\", key_file: \"{}.absent\"}}\n",
            f.admin_cert, f.admin_key
        )),
        AdminTls::DamagedCert => y.push_str(&format!(
            "  tls: {{cert_file: \"{}\", key_file: \"{}\"}}\n",
            f.admin_damaged, f.admin_key
        )),
    }
    match &c.intake {
        Intake::None => {}
        Intake::Kafka { mechanism, tls } => {
            y.push_str("wal: {type: dual}\n");
            y.push_str(&format!(
                "intake:\n  kafka: {}\n",
                kafka_yaml(closed, "ankusa-intake", *mechanism, *tls, f)
            ));
        }
        Intake::JetStream { tls } => {
            y.push_str("wal: {type: dual}\n");
            let tls = tls.map(|p| format!(", tls: {}", tls_yaml(p, f)));
            y.push_str(&format!(
                "intake:\n  jetstream: {{servers: [\"nats://127.0.0.1:{closed}\"], subject: ankusa-intake{}}}\n",
                tls.unwrap_or_default()
            ));
        }
    }
    let s3 = |endpoint: &str| {
        format!(
            "{{bucket: hooks, endpoint: \"{endpoint}\", access_key_id: AKIAPARITY, secret_access_key: s3cret}}"
        )
    };
    let local = |name: &str| format!("{{dir: \"{}\"}}", path_str(&dir.join(name)));
    match c.storage {
        Storage::None => {}
        Storage::Local => y.push_str(&format!(
            "storage: {{type: local, local: {}}}\n",
            local("archive")
        )),
        Storage::S3 => y.push_str(&format!(
            "storage: {{type: s3, s3: {}}}\n",
            s3(&format!("http://127.0.0.1:{closed}"))
        )),
        Storage::Gcs => y.push_str(&format!(
            "storage: {{type: gcs, gcs: {{bucket: hooks, endpoint: \"http://127.0.0.1:{closed}\", anonymous: true}}}}\n"
        )),
        Storage::GcsKeyMissing => y.push_str(&format!(
            "storage: {{type: gcs, gcs: {{bucket: hooks, endpoint: \"http://127.0.0.1:{closed}\", credentials: \"{}\"}}}}\n",
            path_str(&dir.join("absent-key.json"))
        )),
        Storage::AzureSas => y.push_str(&format!(
            "storage: {{type: azure, azure: {{account: acct, container: hooks, endpoint: \"http://127.0.0.1:{closed}/acct\", sas_token: \"sv=2021-08-06&sig=c2ln\"}}}}\n"
        )),
        Storage::AzureNoAuth => y.push_str(
            "storage: {type: azure, azure: {account: acct, container: hooks}}\n",
        ),
    }
    match c.backup {
        Backup::Off => {}
        Backup::OwnLocal => y.push_str(&format!(
            "backup: {{enabled: true, store: {{type: local, local: {}}}}}\n",
            local("backups")
        )),
        Backup::Shared => y.push_str("backup: {enabled: true}\n"),
        Backup::OwnS3 => y.push_str(&format!(
            "backup: {{enabled: true, store: {{type: s3, s3: {}}}}}\n",
            s3(&format!("http://127.0.0.1:{closed}"))
        )),
    }
    match c.telemetry {
        Telemetry::Off => {}
        Telemetry::ClosedCollector => y.push_str(&format!(
            "telemetry: {{otlp: {{endpoint: \"http://127.0.0.1:{closed}\", headers: {{authorization: t0ken}}}}}}\n"
        )),
        Telemetry::RatioOutOfRange => y.push_str(&format!(
            "telemetry: {{otlp: {{endpoint: \"http://127.0.0.1:{closed}\", sampling_ratio: 2}}}}\n"
        )),
    }
    y.push_str("sources:\n  parity:\n    sinks:\n");
    for s in &c.sinks {
        let sink = match s {
            SinkKind::Log => "{type: log}".to_string(),
            SinkKind::Http => format!(
                "{{type: http, url: \"http://127.0.0.1:{closed}/hooks\", allow_unsigned: true}}"
            ),
            SinkKind::KafkaOauth => format!(
                "{{type: kafka, {}",
                &kafka_yaml(closed, "hooks", Some("oauthbearer"), None, f)[1..]
            ),
            SinkKind::KafkaTls(p) => format!(
                "{{type: kafka, {}",
                &kafka_yaml(closed, "hooks", None, Some(*p), f)[1..]
            ),
            SinkKind::RedisTls(p) => format!(
                "{{type: redis, url: \"rediss://127.0.0.1:{closed}\", channel: hooks, tls: {}}}",
                tls_yaml(*p, f)
            ),
            SinkKind::Nats => {
                format!("{{type: nats, servers: [\"nats://127.0.0.1:{closed}\"], subject: hooks}}")
            }
        };
        y.push_str(&format!("      - {sink}\n"));
    }
    y
}

fn command(config: &Path) -> Command {
    let mut c = Command::new(BIN);
    c.arg("--config").arg(config);
    // Nothing of the environment the tests run in reaches the config (nor the blob stores'
    // credentials: a workload identity, a metadata server).
    for (k, _) in std::env::vars() {
        if k.starts_with("ANKUSA_")
            || k.starts_with("AZURE_")
            || k == "GCE_METADATA_HOST"
            || k == "RUST_LOG"
        {
            c.env_remove(k);
        }
    }
    c
}

/// `check-config`'s verdict: `Ok(())`, or the refusal's message (exit 78).
fn check_config(config: &Path) -> Result<(), String> {
    let out = command(config)
        .arg("check-config")
        .output()
        .expect("run check-config");
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    match out.status.code() {
        Some(0) => Ok(()),
        Some(78) => Err(stderr
            .lines()
            .find_map(|l| l.strip_prefix("ankusa: config refused: "))
            .unwrap_or_else(|| panic!("a refusal names its reason: {stderr}"))
            .to_string()),
        other => panic!("check-config exited {other:?}: {stderr}"),
    }
}

/// How a start of `run` ended.
#[derive(Debug)]
enum Run {
    /// Everything built; it serves.
    Started,
    /// Exited 78 (a config error) with this output.
    Refused(String),
    /// Exited otherwise (a store, a restore, a port): not a config refusal.
    Failed(i32, String),
}

fn start_run(config: &Path) -> Run {
    let mut child = command(config)
        .arg("run")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn run");
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut log = String::new();
    let outcome = loop {
        match rx.recv_timeout(Duration::from_millis(20)) {
            Ok(line) => {
                let started = line.contains("ankusa started");
                log.push_str(&line);
                log.push('\n');
                if started {
                    break Run::Started;
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            // The process closed its stderr: it is exiting.
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                let status = child.wait().expect("wait");
                break match status.code() {
                    Some(78) => Run::Refused(log.clone()),
                    code => Run::Failed(code.unwrap_or(-1), log.clone()),
                };
            }
        }
        assert!(
            Instant::now() < deadline,
            "run neither started nor exited within 30 s:\n{log}"
        );
    };
    let _ = child.kill();
    let _ = child.wait();
    drop(rx);
    let _ = reader.join();
    outcome
}

proptest! {
    #![proptest_config(ProptestConfig { cases: CASES, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn check_config_refuses_what_run_refuses(c in case()) {
        let dir = tempfile::tempdir().unwrap();
        let ca = Ca::new("parity CA");
        let f = files(dir.path(), &ca);
        let cfg_dir = dir.path().join("config");
        std::fs::create_dir_all(&cfg_dir).unwrap();
        let path = cfg_dir.join("ankusa.yml");
        let yaml = config(&c, dir.path(), &f, (free_port(), free_port()), free_port());
        std::fs::write(&path, &yaml).unwrap();

        let check = check_config(&path);
        let run = start_run(&path);
        eprintln!(
            "case: check-config {} / run {}: {c:?}",
            match &check { Ok(()) => "accepts".to_string(), Err(e) => format!("refuses ({e})") },
            match &run { Run::Started => "started", Run::Refused(_) => "refused", Run::Failed(..) => "failed" }
        );
        match (&check, &run) {
            (Ok(()), Run::Started) => {}
            // Not a config refusal (a backup that cannot be fetched from a closed port): shown,
            // not compared.
            (Ok(()), Run::Failed(code, log)) => {
                eprintln!("run exited {code} (not a config refusal):\n{log}");
            }
            (Err(why), Run::Refused(log)) => prop_assert!(
                log.contains(why.as_str()),
                "both refuse, for different reasons:\ncheck-config: {why}\nrun:\n{log}\nconfig:\n{yaml}"
            ),
            _ => prop_assert!(
                false,
                "check-config and run disagree:\ncheck-config: {check:?}\nrun: {run:?}\nconfig:\n{yaml}"
            ),
        }
    }
}
