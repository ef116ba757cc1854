//! Process wiring: opens the store, builds the live config, starts dispatch, the replayer,
//! group commit and the listeners, watches the config file, and drains on SIGTERM.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ankusa_config::{Config, Role};
use ankusa_core::ClaimCheck;
use ankusa_sinks::SinkBuilder;
use ankusa_sinks::http::HttpPools;
use ankusa_store::{LaneId, Store, store_path};
use tokio::net::TcpListener;

use crate::admin::AdminState;
use crate::archive::Archive;
use crate::archive::dlq_bounds::DlqGuard;
use crate::backup::Backup;
use crate::claim_check::Claims;
use crate::commit::{CommitListener, Committer};
use crate::direct::Direct;
use crate::dispatch::{self, Dispatcher};
use crate::edge::ratelimit::RateLimiter;
use crate::edge::{Ack, Clock, EdgeState, SystemClock};
use crate::intake::Intake;
use crate::live::{ConfigHandle, Live};
use crate::metrics::Metrics;
use crate::metrics::collect::Scrape;
use crate::probes::Probes;
use crate::quarantine::Pen;
use crate::replay::Replayer;
use crate::serve::{Listener, serve};

/// Where the config came from.
pub enum ConfigSource {
    File(PathBuf),
    Embedded,
}

/// The config the gateway runs without a file: one demo source that accepts anything and
/// logs it, data under `./ankusa-data`.
pub const EMBEDDED_CONFIG: &str = include_str!("embedded.yml");

struct NoDispatch;
impl CommitListener for NoDispatch {
    fn committed(&self, _: &[String], _: u64, _: &[LaneId]) {}
}

/// Whether a directory is absent or holds nothing.
fn dir_is_empty(p: &std::path::Path) -> bool {
    match std::fs::read_dir(p) {
        Ok(mut entries) => entries.next().is_none(),
        Err(_) => true,
    }
}

/// How long a clean stop waits for its final backup.
const FINAL_BACKUP_TIMEOUT: Duration = Duration::from_secs(120);

/// Starts everything and serves until SIGTERM/SIGINT, then drains.
pub async fn run(config: Config, file_hash: String, source: ConfigSource) -> anyhow::Result<()> {
    // Read before anything is restored or created: an empty store under `wal.type: dual` is
    // rebuilt from the intake log.
    let fresh_store = dir_is_empty(&store_path(&config));
    // An absent or empty store with backups on is restored from the latest backup first; an
    // unreadable backup refuses to start (`store_restore_failed`) rather than start empty.
    let restored = crate::backup::restore_if_empty(&config).await?;
    let store = {
        let path = store_path(&config);
        tokio::task::spawn_blocking(move || Store::open(&path)).await??
    };
    let store = Arc::new(store);
    let metrics = Arc::new(Metrics::new());
    let pen = {
        let (store, metrics) = (store.clone(), metrics.clone());
        tokio::task::spawn_blocking(move || Pen::start(store, &metrics.registry)).await??
    };
    let archive = match &config.storage {
        Some(cfg) => Some(
            Archive::start(store.clone(), cfg, &config.node.instance, metrics.clone())
                .map_err(|e| anyhow::anyhow!(e))?,
        ),
        None => {
            let s = store.clone();
            let dropped =
                tokio::task::spawn_blocking(move || crate::archive::drop_stale_obligations(&s))
                    .await??;
            if dropped > 0 {
                tracing::warn!(
                    dropped,
                    "storage is not configured: archive obligations of hooks accepted while it was were dropped"
                );
            }
            None
        }
    };
    let intake = match (&config.wal.wal_type, &config.intake) {
        (ankusa_config::WalType::Dual, Some(cfg)) => Some(
            Intake::start(cfg, &config.node.instance, store.clone(), &metrics.registry)
                .await
                .map_err(|e| anyhow::anyhow!(e))?,
        ),
        _ => None,
    };
    let backup = if config.backup.enabled {
        // Under `wal.type: dual` every manifest records where a rebuild from the log starts.
        let mark: Option<Arc<dyn crate::backup::IntakeMark>> = intake.clone().map(|i| {
            Arc::new(crate::intake::IntakeWatermark(i)) as Arc<dyn crate::backup::IntakeMark>
        });
        Some(
            Backup::start(
                store.clone(),
                &config,
                metrics.clone(),
                mark,
                restored.as_ref(),
            )
            .map_err(|e| anyhow::anyhow!(e))?,
        )
    } else {
        None
    };
    let dlq = DlqGuard::new(store.clone(), metrics.clone());
    let sinks = Arc::new(SinkBuilder::with_pools(HttpPools::new(
        &config.egress.pools,
    )));
    // Broker connections unused for their idle_timeout_ms are closed.
    tokio::spawn(sinks.clone().run_reaper(Duration::from_secs(30)));
    let live = Live::build(config.clone(), file_hash, 1, &sinks)?;
    let path = match &source {
        ConfigSource::File(p) => Some(p.clone()),
        ConfigSource::Embedded => None,
    };
    let handle = ConfigHandle::new(live, path, sinks.clone());
    {
        let pools = sinks.pools().clone();
        handle.on_reload(Box::new(move |live| {
            pools.set_config(&live.config.egress.pools)
        }));
    }
    metrics.config.generation.set(1);
    // Lifecycle events: producers get the emitter now, the writer starts once group commit
    // does (below).
    let (events, events_rx) = crate::lifecycle::Emitter::channel(handle.clone(), metrics.clone());
    crate::lifecycle::watch_reloads(&handle, events.clone());
    if config.egress.pools.pool_size < config.dispatch.concurrency {
        // Each receiver gets at most pool_size connections: attempts beyond that wait for one,
        // so one receiver's deliveries top out at pool_size / its latency.
        tracing::warn!(
            pool_size = config.egress.pools.pool_size,
            concurrency = config.dispatch.concurrency,
            "egress.pools.pool_size is below dispatch.concurrency: deliveries to one HTTP receiver are capped at pool_size in flight"
        );
    }

    let claim_check = if config.claim_check.enabled {
        Some(claims(&config, &metrics)?)
    } else {
        None
    };
    // Direct mode (`wal.type: none`) stores no hook: no dispatch, replay or group commit run,
    // the edge publishes each hook itself.
    let direct = config.wal.wal_type == ankusa_config::WalType::None;
    let (dispatcher, replayer) = if config.has_role(Role::Dispatch) && !direct {
        let (feedback, settled) = dispatch::feedback::feedback();
        let d = Dispatcher::start(dispatch::Context {
            store: store.clone(),
            config: handle.clone(),
            metrics: metrics.clone(),
            tokio: tokio::runtime::Handle::current(),
            claim_check: claim_check.clone().map(|c| c as Arc<dyn ClaimCheck>),
            feedback: Some(feedback),
            lifecycle: Some(events.clone()),
        })?;
        let r = Replayer::start(
            store.clone(),
            d.clone(),
            settled,
            crate::replay::Reports {
                metrics: metrics.clone(),
                events: Some(events.clone()),
            },
            handle.clone(),
            pen.clone(),
            archive.clone(),
        )
        .await?;
        (Some(d), Some(r))
    } else {
        (None, None)
    };
    let commit = if config.has_role(Role::Edge) && !direct {
        let listener: Arc<dyn CommitListener> = match &dispatcher {
            Some(d) => d.clone(),
            None => Arc::new(NoDispatch),
        };
        Some(Committer::start(
            store.clone(),
            &config.batcher,
            metrics.clone(),
            listener,
            intake.clone(),
        ))
    } else {
        None
    };
    if let Some(d) = &dispatcher {
        // Lifecycle hooks commit through the edge's group commit, or their own when this node
        // takes no ingest; without dispatch nothing would deliver them, so no writer runs.
        let commit = commit.clone().unwrap_or_else(|| {
            Committer::start(
                store.clone(),
                &config.batcher,
                metrics.clone(),
                d.clone(),
                None,
            )
        });
        crate::lifecycle::writer::spawn(
            events_rx,
            crate::lifecycle::writer::Writer {
                store: store.clone(),
                commit,
                config: handle.clone(),
                metrics: metrics.clone(),
            },
        );
        crate::lifecycle::spawn_count_flush(events.clone());
    }
    // One state per listener, each holding exactly what its routes use.
    let probes = Arc::new(Probes::new(handle.clone(), store.clone(), intake.clone()));
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);

    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    // Every listener is bound before any serves: `/ready` on one port then means every port
    // accepts connections.
    let mut bound: Vec<(TcpListener, axum::Router, Listener)> = Vec::new();
    let ack = match &commit {
        Some(c) => Some(Ack::Commit(c.clone())),
        None if direct && config.has_role(Role::Edge) => Some(Ack::Direct(Direct::new(
            &config.wal,
            claim_check.clone().map(|c| c as Arc<dyn ClaimCheck>),
            metrics.clone(),
        ))),
        None => None,
    };
    if let Some(ack) = ack {
        // `fleet` (refused under wal.type none): the client forwarding keyed hooks to their
        // owner, and the listener other pods forward to.
        let fleet = match &config.fleet {
            Some(f) if !direct => Some(Arc::new(crate::fleet::FleetClient::new(f)?)),
            _ => None,
        };
        let edge = Arc::new(EdgeState {
            config: handle.clone(),
            ack,
            pen: pen.clone(),
            dlq: dlq.clone(),
            intake_retry_after: intake
                .as_ref()
                .map(|i| u64::from(i.retry_after_s()))
                .unwrap_or(2),
            limiter: RateLimiter::default(),
            client_limiter: RateLimiter::default(),
            body_budget: EdgeState::body_budget(config.http.max_inflight_body_bytes),
            metrics: metrics.clone(),
            clock: clock.clone(),
            lifecycle: Some(events.clone()),
            fleet: fleet.clone(),
        });
        let addr = SocketAddr::new(config.http.ip, config.http.port);
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|e| anyhow::anyhow!("cannot bind ingest {addr}: {e}"))?;
        tracing::info!(addr = %listener.local_addr()?, "ingest listening");
        bound.push((
            listener,
            crate::edge::router(edge.clone(), crate::probes::router(probes.clone())),
            Listener {
                name: "ingest",
                limits: config.http.connections.clone(),
                metrics: metrics.clone(),
                tls: None,
                http2: false,
            },
        ));
        if let Some(f) = config.fleet.as_ref().filter(|_| fleet.is_some()) {
            let ca = Arc::new(crate::tls::load_ca("fleet.tls", &f.tls.ca_file)?);
            let acceptor = crate::tls::ReloadingCert::load_files(
                "fleet.tls",
                &f.tls.cert_file,
                &f.tls.key_file,
            )?
            .mutual_acceptor(&ca)?;
            let addr = SocketAddr::new(f.ip, f.port);
            let listener = TcpListener::bind(addr)
                .await
                .map_err(|e| anyhow::anyhow!("cannot bind fleet {addr}: {e}"))?;
            tracing::info!(addr = %listener.local_addr()?, members = f.members.len(), "fleet listening");
            bound.push((
                listener,
                crate::edge::fleet_router(edge.clone(), store.clone(), config.http.max_body_bytes),
                Listener {
                    name: "fleet",
                    limits: ankusa_config::ConnectionLimits::internal(),
                    metrics: metrics.clone(),
                    tls: Some(acceptor),
                    http2: true,
                },
            ));
        }
    }
    if config.admin.enabled {
        let tls = match &config.admin.tls {
            Some(t) => Some(crate::tls::ReloadingCert::load(t)?.acceptor()?),
            None => None,
        };
        let addr = SocketAddr::new(config.admin.ip, config.admin.port);
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|e| anyhow::anyhow!("cannot bind admin {addr}: {e}"))?;
        tracing::info!(addr = %listener.local_addr()?, tls = tls.is_some(), "admin listening");
        bound.push((
            listener,
            crate::admin::router(
                AdminState {
                    config: handle.clone(),
                    store: store.clone(),
                    metrics: metrics.clone(),
                    scrape: Scrape {
                        metrics: metrics.clone(),
                        store: store.clone(),
                        config: handle.clone(),
                        commit: commit.clone(),
                        pen: pen.clone(),
                        dlq: dlq.clone(),
                        archive: archive.clone(),
                        backup: backup.clone(),
                        probes: probes.clone(),
                    },
                    sink_health: dispatcher.as_ref().map(|d| d.health.clone()),
                    replayer: replayer.clone(),
                    pen: pen.clone(),
                    archive: archive.clone(),
                    dlq: dlq.clone(),
                    backup: backup.clone(),
                    intake: intake.clone(),
                    dead_letter_resume: Default::default(),
                },
                crate::probes::router(probes.clone()),
            ),
            Listener {
                name: "admin",
                limits: config.admin.connections.clone(),
                metrics: metrics.clone(),
                tls,
                http2: false,
            },
        ));
    }
    if let Some(c) = &claim_check {
        let addr = SocketAddr::new(config.claim_check.ip, config.claim_check.port);
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|e| anyhow::anyhow!("cannot bind claim check {addr}: {e}"))?;
        tracing::info!(addr = %listener.local_addr()?, "claim check listening");
        bound.push((
            listener,
            crate::claim_check::router(c.clone()),
            Listener {
                name: "claim_check",
                limits: config.claim_check.connections.clone(),
                metrics: metrics.clone(),
                tls: None,
                http2: false,
            },
        ));
        if let (Some(days), Some(files)) = (config.claim_check.retention_days, c.local_files()) {
            tokio::spawn(async move {
                loop {
                    let f = files.clone();
                    match tokio::task::spawn_blocking(move || f.sweep(days)).await {
                        Ok(Ok(n)) if n > 0 => tracing::info!(deleted = n, "expired claims deleted"),
                        Ok(Err(e)) => tracing::warn!(error = %e, "claim sweep failed"),
                        _ => {}
                    }
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                }
            });
        }
    }
    let names: Vec<&'static str> = bound.iter().map(|(_, _, l)| l.name).collect();
    let servers: Vec<_> = bound
        .into_iter()
        .map(|(listener, router, opts)| {
            tokio::spawn(serve(listener, router, opts, stop_rx.clone()))
        })
        .collect();
    // Cannot be set twice: this is the only place, and `run` runs once per process.
    let _ = probes.serving.set(names);
    if !direct {
        dlq.start(handle.clone());
    }
    if let Some(i) = &intake {
        // A store that started empty (or from a backup) is rebuilt from the log first; until
        // the rebuild and the boot reconcile are done, new hooks get 503 and /ready says
        // `recovering`.
        // From the backup's watermark when restored from one (the whole log when the backup
        // has none: taken under `disk`, or with the log away).
        let rebuild_from = if let Some(r) = &restored {
            Some(
                r.intake
                    .as_ref()
                    .and_then(crate::intake::watermark_from)
                    .unwrap_or_default(),
            )
        } else if fresh_store {
            Some(Default::default())
        } else {
            None
        };
        let i = i.clone();
        tokio::spawn(async move {
            i.recover(rebuild_from).await;
            i.run_reconciler().await;
        });
    }
    spawn_reload_triggers(handle.clone(), metrics.clone());
    spawn_housekeeping(handle.clone(), commit.clone(), pen.clone(), metrics.clone());
    crate::quarantine::expire::spawn(store.clone(), pen.clone(), handle.clone(), move || {
        clock.now_ms()
    });
    if direct {
        tracing::warn!(
            instance = %config.node.instance,
            publish_timeout_ms = config.wal.publish_timeout_ms,
            "ankusa started in direct mode (wal.type none): a 201 means every sink of the source confirmed the hook; nothing is kept on this node, there is no retry, DLQ or replay"
        );
    } else if intake.is_some() {
        tracing::info!(
            instance = %config.node.instance,
            data_dir = %config.node.data_dir.display(),
            "ankusa started: a 201 means the hook is fsynced to this node's store AND confirmed by the intake log (wal.type dual): durable to the loss of this host"
        );
    } else {
        tracing::warn!(
            instance = %config.node.instance,
            data_dir = %config.node.data_dir.display(),
            "ankusa started: a 201 means the hook is fsynced to this node's store; durable to power loss on THIS host only"
        );
    }

    shutdown_signal().await;
    tracing::info!("shutting down: refusing new requests, draining");
    let _ = stop_tx.send(true);
    for s in servers {
        let _ = tokio::time::timeout(Duration::from_secs(10), s).await;
    }
    if let Some(b) = &commit {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
        while b.queued() > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    if let Some(d) = dispatcher {
        tokio::task::spawn_blocking(move || d.shutdown(Duration::from_secs(5))).await?;
    }
    if let Some(b) = &backup {
        // Nothing is committed or delivered any more: this backup holds every acked hook.
        match tokio::time::timeout(FINAL_BACKUP_TIMEOUT, b.final_backup()).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => tracing::error!(error = %e, "the final backup failed"),
            Err(_) => tracing::error!(
                timeout_s = FINAL_BACKUP_TIMEOUT.as_secs(),
                "the final backup did not finish in time; LATEST names the previous backup"
            ),
        }
    }
    tracing::info!("stopped");
    Ok(())
}

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(error = %e, "cannot listen for SIGTERM");
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

/// SIGHUP and changes of the config file (including Kubernetes' symlink swap of a mounted
/// Secret) reload the config; a poll of the file every 2 s backs up the watcher. Only a change
/// of the file's bytes since it was last read reloads (SIGHUP always does), so our own reads
/// and unrelated events in the directory do nothing, and a config pushed over the admin API is
/// not undone by a file that did not change.
fn spawn_reload_triggers(config: Arc<ConfigHandle>, metrics: Arc<Metrics>) {
    let (tx, mut rx) = tokio::sync::mpsc::channel::<&'static str>(16);
    {
        let tx = tx.clone();
        tokio::spawn(async move {
            use tokio::signal::unix::{SignalKind, signal};
            let Ok(mut hup) = signal(SignalKind::hangup()) else {
                return;
            };
            while hup.recv().await.is_some() {
                let _ = tx.send("sighup").await;
            }
        });
    }
    let Some(path) = config.path().cloned() else {
        tokio::spawn(async move {
            while rx.recv().await.is_some() {
                tracing::info!(
                    "SIGHUP ignored: the gateway runs the embedded config, there is no file to reload"
                );
            }
        });
        return;
    };
    let watch_dir = path
        .parent()
        .map(|p| p.to_path_buf())
        .unwrap_or_else(|| PathBuf::from("."));
    let watcher = {
        let tx = tx.clone();
        notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
            use notify::EventKind;
            use notify::event::ModifyKind;
            let relevant = res.is_ok_and(|ev| match ev.kind {
                EventKind::Create(_) | EventKind::Remove(_) => true,
                EventKind::Modify(ModifyKind::Metadata(_)) => false,
                EventKind::Modify(_) => true,
                _ => false,
            });
            if relevant {
                let _ = tx.try_send("file");
            }
        })
    };
    let watcher = match watcher {
        Ok(mut w) => {
            use notify::Watcher;
            match w.watch(&watch_dir, notify::RecursiveMode::NonRecursive) {
                Ok(()) => Some(w),
                Err(e) => {
                    tracing::warn!(error = %e, dir = %watch_dir.display(), "cannot watch the config directory; polling only");
                    None
                }
            }
        }
        Err(e) => {
            tracing::warn!(error = %e, "no file watcher; polling only");
            None
        }
    };
    {
        let tx = tx.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(2)).await;
                let _ = tx.send("poll").await;
            }
        });
    }
    tokio::spawn(async move {
        let _keep = watcher;
        let digest = |b: &[u8]| {
            use sha2::{Digest, Sha256};
            Sha256::digest(b).to_vec()
        };
        let mut last = tokio::fs::read(&path).await.ok().map(|b| digest(&b));
        while let Some(why) = rx.recv().await {
            // Coalesce a burst of events (a symlink swap is several).
            tokio::time::sleep(Duration::from_millis(50)).await;
            let mut forced = why == "sighup";
            while let Ok(more) = rx.try_recv() {
                forced |= more == "sighup";
            }
            let bytes = match tokio::fs::read(&path).await {
                Ok(b) => b,
                Err(e) => {
                    tracing::warn!(error = %e, path = %path.display(), "cannot read the config file; keeping the current config");
                    continue;
                }
            };
            let now = Some(digest(&bytes));
            if now == last && !forced {
                continue;
            }
            last = now;
            let result = config
                .reload_from_text(&String::from_utf8_lossy(&bytes))
                .await;
            match result {
                Ok(true) => {
                    metrics.config.reloads.with_label_values(&["ok"]).inc();
                    metrics
                        .config
                        .generation
                        .set(config.live().generation as i64);
                    tracing::info!(trigger = why, "config reloaded");
                }
                // Typical on Kubernetes: the operator pushed this config over the admin API
                // before the kubelet swapped the mounted Secret.
                Ok(false) => {
                    tracing::info!(
                        trigger = why,
                        "config file changed; the gateway runs it already"
                    )
                }
                Err(_) => {
                    metrics.config.reloads.with_label_values(&["error"]).inc();
                }
            }
        }
    });
}

/// Pool sweeps and store gauges.
fn spawn_housekeeping(
    config: Arc<ConfigHandle>,
    commit: Option<Arc<Committer>>,
    pen: Arc<Pen>,
    metrics: Arc<Metrics>,
) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(5));
        loop {
            tick.tick().await;
            config.sinks().pools().sweep();
            if let Some(c) = &commit {
                metrics.commit.queued.set(c.queued() as i64);
            }
            crate::quarantine::gauges(&pen, &metrics);
        }
    });
}

/// The claim check's store: `claim_check.store` when set (a blob store the fleet shares),
/// else the node's data dir (the directory keeps the name it had when the claim check wrote
/// there first).
fn claims(config: &Config, metrics: &Metrics) -> anyhow::Result<Arc<Claims>> {
    let cc = &config.claim_check;
    let claims = match &cc.store {
        None => {
            let dir = config
                .node
                .data_dir
                .join(&config.node.instance)
                .join("claims");
            Claims::local(dir, cc.tokens.clone())?
        }
        Some(block) => {
            let store = crate::claim_check::store_of(block)?;
            let claims = Claims::in_store(
                store,
                cc,
                config.http.max_body_bytes,
                metrics.claims.clone(),
            )?;
            tracing::info!(
                store = claims.kind(),
                "claims are kept in a shared blob store"
            );
            claims
        }
    };
    if let Some(review) = &cc.token_review {
        claims.set_token_review(crate::claim_check::TokenReviewer::new(
            review,
            metrics.claims.clone(),
        )?);
        tracing::info!(
            service_accounts = review.service_accounts.len(),
            "claim readers may present ServiceAccount tokens (TokenReview)"
        );
    }
    Ok(claims)
}
