//! Side by side, one run: this gateway and the peers a user would pick instead to take signed
//! webhooks into RabbitMQ, under the same load generator (64 keep-alive connections, 1 KiB
//! bodies signed the GitHub way: `X-Hub-Signature-256`, HMAC-SHA256 of the body, which every
//! peer here verifies), each publishing to a fresh durable queue on 127.0.0.1:5672.
//!
//! Cases (what a 2xx means is stated per row in docs/benchmarks.md):
//! - `ankusa_direct`: `wal.type: none`, a `201` after RabbitMQ confirmed;
//! - `ankusa_disk`: `wal.type: disk`, a `201` after the synced commit, delivery with confirms
//!   after (the case runs until the queue holds every hook answered 2xx), 64 attempts at once
//!   to the sink (as many as the peers get connections); `ankusa_disk_defaults` the same with
//!   the default `dispatch` settings (8 attempts at once per sink key);
//! - `node_amqplib_confirm` / `node_amqplib_noconfirm`: `bench/compare/amqp-bridge.mjs`, the
//!   bridge a team writes with Node.js and amqplib, a `200` after the broker's confirm / after
//!   the publish was handed to the socket; one process per core (`cluster`);
//! - `webhook_amqp_publish`: adnanh/webhook (Debian's `webhook`) running Debian's
//!   `amqp-publish` per hook, a `200` after the command exited.
//!
//! Every case ends by counting the queue: `queued` against `answered_2xx` (every 2xx the load
//! generator got, warm-up included) says whether a peer lost what it acknowledged. CPU per hook
//! is the CPU a process group used over the case (load, and drain for `ankusa_disk`) over the
//! hooks answered 2xx. Where hooks are still being delivered when the load stops
//! (`ankusa_disk`), a `<case>_drain` line gives that delivery's rate and CPU per hook alone.
//!
//! A peer runs when `bench/compare/run` installed it: `COMPARE_BRIDGE` (the bridge script,
//! amqplib in a `node_modules` beside it), `COMPARE_WEBHOOK` (the `webhook` binary); a missing
//! one prints a `skipped` line. `COMPARE_CASES=<case>,<case>` runs only those cases.
//!
//! `bench/compare/run [seconds]`

use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ankusa_bench::cpu::{CpuProbe, Procs, cpu_line, pids_named, process_tree};
use ankusa_bench::*;
use hmac::{Hmac, Mac};
use http_body_util::Full;
use hyper::Request;
use lapin::options::QueueDeclareOptions;
use lapin::types::FieldTable;
use lapin::{Channel, Connection, ConnectionProperties};
use serde_json::json;
use sha2::Sha256;

const SECRET: &str = "It's a Secret to Everybody";
const CONNECTIONS: usize = 64;
const RABBIT: &str = "amqp://guest:guest@127.0.0.1:5672/%2f";
const ROUTING_KEY: &str = "ankusa.bench";
/// `dispatch` for 64 attempts at once to the one sink (the defaults allow 8 per sink key).
const SINK_64: &str =
    "{concurrency: 64, sink_concurrency: 64, tenants: {default: {concurrency: 64}}}";

/// A GitHub-style signed POST of a 1 KiB body to `path`.
fn github_request(path: &str, n: u64) -> Request<Full<bytes::Bytes>> {
    let body = body_1k(n);
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(SECRET.as_bytes()).expect("any key");
    mac.update(&body);
    let sig = format!("sha256={}", hex::encode(mac.finalize().into_bytes()));
    Request::post(path)
        .header("host", "bench")
        .header("content-type", "application/json")
        .header("x-github-event", "push")
        .header("x-github-delivery", format!("bench-{n}"))
        .header("x-hub-signature-256", sig)
        .body(Full::new(body))
        .expect("request")
}

/// A peer under test: where it takes the hooks and the process that does.
struct Peer {
    addr: SocketAddr,
    path: &'static str,
    owner: Owner,
}

enum Owner {
    /// A peer's process and every process it starts (killed together on drop), and the
    /// directory of its configuration when it has one.
    Tree {
        child: ChildGuard,
        _config: Option<tempfile::TempDir>,
    },
    Gateway(GatewayProc),
}

impl Peer {
    /// The processes whose CPU is the peer's.
    fn procs(&self) -> Procs {
        match &self.owner {
            Owner::Tree { child, .. } => Procs::Tree(child.0.id()),
            Owner::Gateway(g) => Procs::Pids(vec![g.child.0.id()]),
        }
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        if let Owner::Tree { child, .. } = &self.owner {
            for pid in process_tree(child.0.id()).into_iter().skip(1) {
                // SAFETY: kill(2) on a pid this run started (a worker of the peer).
                unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
            }
        }
    }
}

fn node_bridge(script: &str, exchange: &str, confirm: bool) -> anyhow::Result<Peer> {
    let port = free_port();
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut child = ChildGuard(
        Command::new("node")
            .arg(script)
            .env("PORT", port.to_string())
            .env("AMQP_URL", RABBIT)
            .env("EXCHANGE", exchange)
            .env("ROUTING_KEY", ROUTING_KEY)
            .env("SECRET", SECRET)
            .env("CONFIRM", if confirm { "1" } else { "0" })
            .env("WORKERS", workers.to_string())
            .stdout(Stdio::null())
            .spawn()?,
    );
    wait_listening(addr, &mut child.0, Duration::from_secs(30))?;
    // The workers connect to RabbitMQ after the port is bound by the primary.
    std::thread::sleep(Duration::from_secs(1));
    Ok(Peer {
        addr,
        path: "/",
        owner: Owner::Tree {
            child,
            _config: None,
        },
    })
}

fn webhook_peer(bin: &str, exchange: &str) -> anyhow::Result<Peer> {
    let port = free_port();
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let dir = tempfile::tempdir()?;
    let arg = |s: String| json!({"source": "string", "name": s});
    let hooks = json!([{
        "id": "bench",
        "execute-command": "amqp-publish",
        "include-command-output-in-response": true,
        "pass-arguments-to-command": [
            arg(format!("--url={RABBIT}")),
            arg(format!("--exchange={exchange}")),
            arg(format!("--routing-key={ROUTING_KEY}")),
            arg("--persistent".into()),
            arg("--content-type=application/json".into()),
            arg("--body".into()),
            {"source": "entire-payload"},
        ],
        "trigger-rule": {"match": {
            "type": "payload-hmac-sha256",
            "secret": SECRET,
            "parameter": {"source": "header", "name": "X-Hub-Signature-256"},
        }},
    }]);
    let file = dir.path().join("hooks.json");
    std::fs::write(&file, serde_json::to_vec(&hooks)?)?;
    let mut child = ChildGuard(
        Command::new(bin)
            .arg("-hooks")
            .arg(&file)
            .args(["-ip", "127.0.0.1", "-port", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?,
    );
    wait_listening(addr, &mut child.0, Duration::from_secs(30))?;
    Ok(Peer {
        addr,
        path: "/hooks/bench",
        owner: Owner::Tree {
            child,
            _config: Some(dir),
        },
    })
}

/// The gateway with one RabbitMQ sink; `dispatch` is its `dispatch:` section (YAML flow map).
fn gateway_peer(wal: &str, dispatch: &str, exchange: &str) -> anyhow::Result<Peer> {
    let g = start_gateway(&format!(
        "node: {{roles: [edge, dispatch]}}\nwal: {{type: {wal}}}\ndispatch: {dispatch}\negress: {{allow_loopback: true}}\nsources:\n  bench:\n    verify: {{type: github, secret: \"{SECRET}\"}}\n    sinks:\n      - type: rabbitmq\n        url: {RABBIT}\n        exchange: {exchange}\n        routing_key: {ROUTING_KEY}\n"
    ))?;
    Ok(Peer {
        addr: g.ingest,
        path: "/webhooks/bench",
        owner: Owner::Gateway(g),
    })
}

async fn queue_depth(ch: &Channel, queue: &str) -> anyhow::Result<u64> {
    let q = ch
        .queue_declare(
            queue.into(),
            QueueDeclareOptions {
                passive: true,
                durable: true,
                ..Default::default()
            },
            FieldTable::default(),
        )
        .await?;
    Ok(u64::from(q.message_count()))
}

/// Waits until `queue` holds `want` messages or stops growing for 10 s; returns the depth and
/// when it was last reached.
async fn settle(ch: &Channel, queue: &str, want: u64) -> anyhow::Result<(u64, Instant)> {
    let (mut depth, mut at) = (queue_depth(ch, queue).await?, Instant::now());
    while depth < want && at.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let d = queue_depth(ch, queue).await?;
        if d != depth {
            (depth, at) = (d, Instant::now());
        }
    }
    Ok((depth, at))
}

struct Case<'a> {
    rt: &'a tokio::runtime::Runtime,
    ch: &'a Channel,
    duration: Duration,
    summary: serde_json::Map<String, serde_json::Value>,
}

impl Case<'_> {
    /// Drives `peer` (a process tree `procs`), then counts its queue.
    fn run(&mut self, name: &str, peer: &Peer, queue: &str) -> anyhow::Result<()> {
        let path = peer.path;
        let make: MakeRequest = Arc::new(move |n| github_request(path, n));
        let groups = || {
            vec![
                ("broker", Procs::Pids(pids_named("beam.smp"))),
                ("peer", peer.procs()),
                ("loadgen", Procs::Pids(vec![std::process::id()])),
            ]
        };
        let probe = CpuProbe::start_procs(groups());
        let started = Instant::now();
        let mut r = self.rt.block_on(closed_loop(
            peer.addr,
            CONNECTIONS,
            Duration::from_secs(2),
            self.duration,
            None,
            make,
        ))?;
        // What is still to deliver when the load stops is delivered with no ingest beside it:
        // its CPU is the delivery's alone.
        let (at_stop, stopped) = (
            self.rt.block_on(queue_depth(self.ch, queue))?,
            Instant::now(),
        );
        let drain_probe = CpuProbe::start_procs(groups());
        let (queued, last) = self.rt.block_on(settle(self.ch, queue, r.all_ok))?;
        let drain_cpu = drain_probe.finish_hooks(queued.saturating_sub(at_stop));
        let cpu = probe.finish_hooks(r.all_ok);
        let mut line = r.line(name, CONNECTIONS);
        line["answered_2xx"] = json!(r.all_ok);
        line["queued"] = json!(queued);
        line["lost"] = json!(r.all_ok.saturating_sub(queued));
        line["delivered_per_s"] =
            json!((queued as f64 / last.duration_since(started).as_secs_f64()).round());
        let (rate, p99) = (r.per_sec().round(), r.latencies.quantile_ms(0.99));
        emit(line);
        let peer_us = cpu.get("peer_us_per_hook").cloned();
        cpu_line(name, cpu);
        let drained = queued.saturating_sub(at_stop);
        if drained >= 1000 {
            let secs = last.saturating_duration_since(stopped).as_secs_f64();
            let mut line = serde_json::Map::new();
            line.insert("case".into(), json!(format!("{name}_drain")));
            line.insert("delivered_after_the_load".into(), json!(drained));
            line.insert("per_s".into(), json!((drained as f64 / secs).round()));
            line.extend(drain_cpu);
            emit(serde_json::Value::Object(line));
        }
        self.summary.insert(format!("{name}_per_s"), json!(rate));
        self.summary.insert(format!("{name}_p99_ms"), json!(p99));
        if let Some(us) = peer_us {
            self.summary.insert(format!("{name}_us_per_hook"), us);
        }
        Ok(())
    }
}

fn skipped(name: &str, why: &str) {
    emit(json!({"case": name, "skipped": why}));
}

fn main() -> anyhow::Result<()> {
    let rt = runtime()?;
    let (_conn, ch) = rt.block_on(async {
        let conn = Connection::connect(RABBIT, ConnectionProperties::default()).await?;
        let ch = conn.create_channel().await?;
        anyhow::Ok((conn, ch))
    })?;
    let mut case = Case {
        rt: &rt,
        ch: &ch,
        duration: seconds_arg(),
        summary: serde_json::Map::new(),
    };
    let bridge = std::env::var("COMPARE_BRIDGE").ok();
    let webhook = std::env::var("COMPARE_WEBHOOK").ok();
    let cases = [
        "ankusa_direct",
        "ankusa_disk",
        "ankusa_disk_defaults",
        "node_amqplib_confirm",
        "node_amqplib_noconfirm",
        "webhook_amqp_publish",
    ];
    // `COMPARE_CASES=a,b` runs only those (e.g. to profile one).
    let only = std::env::var("COMPARE_CASES").ok();
    let only: Option<Vec<&str>> = only.as_deref().map(|o| o.split(',').collect());
    for name in cases {
        if only.as_ref().is_some_and(|o| !o.contains(&name)) {
            continue;
        }
        let sfx = suffix();
        let (exchange, queue) = (
            format!("bench.compare.{sfx}"),
            format!("bench.compare.q.{sfx}"),
        );
        rt.block_on(ankusa_testkit::brokers::rabbit_topology(
            &ch,
            &exchange,
            &queue,
            "#",
            FieldTable::default(),
        ))?;
        let peer = match name {
            "ankusa_direct" => gateway_peer("none", "{}", &exchange).map(Some),
            // As many attempts at once towards the broker as the peers get connections.
            "ankusa_disk" => gateway_peer("disk", SINK_64, &exchange).map(Some),
            "ankusa_disk_defaults" => gateway_peer("disk", "{}", &exchange).map(Some),
            "node_amqplib_confirm" | "node_amqplib_noconfirm" => bridge
                .as_deref()
                .map(|b| node_bridge(b, &exchange, name == "node_amqplib_confirm"))
                .transpose(),
            _ => webhook
                .as_deref()
                .map(|w| webhook_peer(w, &exchange))
                .transpose(),
        };
        let ran = match peer {
            Ok(Some(peer)) => case.run(name, &peer, &queue),
            Ok(None) => {
                skipped(name, "not installed: bench/compare/run installs the peers");
                Ok(())
            }
            Err(e) => Err(e),
        };
        rt.block_on(ankusa_testkit::brokers::rabbit_teardown(
            &ch, &exchange, &queue,
        ))?;
        ran?;
    }
    let mut summary = case.summary;
    summary.insert("case".into(), json!("summary"));
    emit(serde_json::Value::Object(summary));
    Ok(())
}
