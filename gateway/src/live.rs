//! The running configuration and its hot reload.
//!
//! `Live` is a config with everything built from it (verifiers, sinks). A request takes the
//! current `Live` at its start and finishes on it, so a reload never changes a request half
//! way; a reload builds a complete new `Live` and swaps it in atomically, or refuses and keeps
//! the old one. Listener addresses, the data dir, group commit, `wal`/`intake`, `storage` and
//! `backup` (`pin_start_fields`) are read once at start: a reload that changes them applies
//! everything else, keeps their start values, and reports them as needing a restart
//! (`restart_required` of the reload's answer and of `GET /v1/status`, a warning, and the
//! `ankusa_config_restart_required` gauge).

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use ankusa_api::{ReloadError, Status};
use ankusa_config::{CompiledRouting, Config, ConfigError, SinkConfig, SourceConfig};
use ankusa_core::{Sink, now_ms};
use ankusa_sinks::SinkBuilder;
use arc_swap::ArcSwap;

/// The reserved source of lifecycle events (the `lifecycle` module): built from `lifecycle.sinks`,
/// never in `Live::sources` (so ingest answers `404` for it; a configured id cannot contain a
/// `:`), found by dispatch through `Live::source`.
pub const LIFECYCLE_SOURCE: &str = "ankusa:lifecycle";
/// The tenant lifecycle hooks are dispatched under: a tenant of their own, so dispatch's
/// per-tenant windows keep a failing lifecycle sink's rows from holding any tenant's room (the
/// tenant an event concerns is in the event and the trail, not here).
pub const LIFECYCLE_TENANT: &str = "ankusa:lifecycle";

/// A source with its verifier and sinks built.
pub struct LiveSource {
    pub id: String,
    pub cfg: SourceConfig,
    pub verifier: Option<ankusa_verify::Verifier>,
    pub sinks: Vec<Arc<dyn Sink>>,
    /// Type names of `sinks`, bound into each delivery row at ack.
    pub sink_types: Vec<&'static str>,
    /// A digest of each sink's config: a reload that changes it ends the sink's recorded
    /// failure (`dispatch::health`), one that leaves it keeps it.
    pub sink_digests: Vec<u64>,
    /// Each sink entry's `filter` and `transform`, compiled (`route`).
    pub routes: Vec<CompiledRouting>,
}

impl LiveSource {
    /// The tenant of a hook of this source when the URL names none.
    pub fn tenant(&self) -> &str {
        self.cfg.tenant.as_deref().unwrap_or("default")
    }

    /// Answers every URL tenant (no tenant of its own, or `default`).
    pub fn shared(&self) -> bool {
        self.cfg.tenant.as_deref().is_none_or(|t| t == "default")
    }
}

/// The config in force, with everything built from it.
pub struct Live {
    pub config: Config,
    /// `Config::hash` of the file as written; what the operator compares.
    pub file_hash: String,
    pub generation: u64,
    pub loaded_at: u64,
    pub sources: HashMap<String, Arc<LiveSource>>,
    /// `http.trusted_proxies`, parsed.
    pub trusted_proxies: Vec<(IpAddr, u8)>,
    /// The lifecycle events' internal source (`LIFECYCLE_SOURCE`), when `lifecycle` is set.
    pub lifecycle: Option<Arc<LiveSource>>,
}

impl Live {
    pub fn build(
        config: Config,
        file_hash: String,
        generation: u64,
        sinks: &SinkBuilder,
    ) -> Result<Live, ConfigError> {
        let mut sources = HashMap::new();
        for (id, s) in &config.sources {
            let verifier = ankusa_verify::Verifier::new(&s.verify)
                .map_err(|e| ConfigError::field(format!("sources.{id}.verify"), e.to_string()))?;
            let mut built = Vec::with_capacity(s.sinks.len());
            let mut sink_types = Vec::with_capacity(s.sinks.len());
            let mut sink_digests = Vec::with_capacity(s.sinks.len());
            let mut routes = Vec::with_capacity(s.sinks.len());
            for (i, sc) in s.sinks.iter().enumerate() {
                let field = format!("sources.{id}.sinks[{i}]");
                built.push(sinks.build(&config, s, &field, sc)?);
                sink_types.push(sc.type_name());
                sink_digests.push(sink_digest(sc));
                routes.push(sc.routing().compile(&field)?);
            }
            sources.insert(
                id.clone(),
                Arc::new(LiveSource {
                    id: id.clone(),
                    cfg: s.clone(),
                    verifier,
                    sinks: built,
                    sink_types,
                    sink_digests,
                    routes,
                }),
            );
        }
        let lifecycle = match &config.lifecycle {
            Some(l) => Some(Arc::new(lifecycle_source(&config, l, sinks)?)),
            None => None,
        };
        let trusted_proxies = config
            .http
            .trusted_proxies
            .iter()
            .filter_map(|c| ankusa_config::parse_cidr(c))
            .collect();
        Ok(Live {
            config,
            file_hash,
            generation,
            loaded_at: now_ms(),
            sources,
            trusted_proxies,
            lifecycle,
        })
    }

    /// The source a delivery row belongs to: a configured one, or the lifecycle source. What
    /// dispatch reads; the edge reads `sources` only.
    pub fn source(&self, id: &str) -> Option<&Arc<LiveSource>> {
        match self.sources.get(id) {
            Some(s) => Some(s),
            None if id == LIFECYCLE_SOURCE => self.lifecycle.as_ref(),
            None => None,
        }
    }
}

/// The internal source of `lifecycle`: its sinks built like a source's (errors named
/// `lifecycle.sinks[i]`), no verifier, `dispatch.retry` as it is (no override).
fn lifecycle_source(
    config: &Config,
    l: &ankusa_config::LifecycleConfig,
    sinks: &SinkBuilder,
) -> Result<LiveSource, ConfigError> {
    let cfg = SourceConfig::with_sinks(l.sinks.clone());
    let mut built = Vec::with_capacity(l.sinks.len());
    let mut routes = Vec::with_capacity(l.sinks.len());
    for (i, sc) in l.sinks.iter().enumerate() {
        let field = format!("lifecycle.sinks[{i}]");
        built.push(sinks.build(config, &cfg, &field, sc)?);
        routes.push(sc.routing().compile(&field)?);
    }
    Ok(LiveSource {
        id: LIFECYCLE_SOURCE.to_string(),
        verifier: None,
        sinks: built,
        sink_types: l.sinks.iter().map(SinkConfig::type_name).collect(),
        sink_digests: l.sinks.iter().map(sink_digest).collect(),
        routes,
        cfg,
    })
}

/// A digest of a sink's config (its serialised form: key order is fixed, secrets included, so
/// a rotated credential counts as a change). Kept in memory only.
pub fn sink_digest(sc: &SinkConfig) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    serde_json::to_vec(sc).unwrap_or_default().hash(&mut h);
    h.finish()
}

/// Run after every successful reload, before the new `Live` is installed.
pub type ReloadHook = Box<dyn Fn(&Live) + Send + Sync>;

pub struct ConfigHandle {
    current: ArcSwap<Live>,
    path: Option<PathBuf>,
    sinks: Arc<SinkBuilder>,
    generation: AtomicU64,
    last_error: Mutex<Option<ReloadError>>,
    restart_required: Mutex<Vec<String>>,
    reload_lock: tokio::sync::Mutex<()>,
    /// The config fixed at start (listeners, data dir, group commit).
    started: Config,
    on_reload: Mutex<Vec<ReloadHook>>,
}

impl ConfigHandle {
    pub fn new(live: Live, path: Option<PathBuf>, sinks: Arc<SinkBuilder>) -> Arc<ConfigHandle> {
        let started = live.config.clone();
        let generation = live.generation;
        Arc::new(ConfigHandle {
            current: ArcSwap::from_pointee(live),
            path,
            sinks,
            generation: AtomicU64::new(generation),
            last_error: Mutex::new(None),
            restart_required: Mutex::new(Vec::new()),
            reload_lock: tokio::sync::Mutex::new(()),
            started,
            on_reload: Mutex::new(Vec::new()),
        })
    }

    /// What builds sinks (and owns their pools, connections and batchers).
    pub fn sinks(&self) -> &Arc<SinkBuilder> {
        &self.sinks
    }

    /// The config in force; hold the `Arc` for the whole request.
    pub fn live(&self) -> Arc<Live> {
        self.current.load_full()
    }

    pub fn path(&self) -> Option<&PathBuf> {
        self.path.as_ref()
    }

    /// Runs `f` after every successful reload (e.g. to resize pools).
    pub fn on_reload(&self, f: ReloadHook) {
        self.on_reload
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(f);
    }

    /// Reloads from the config file. Returns whether the config changed.
    pub async fn reload_from_file(&self) -> Result<bool, ConfigError> {
        let Some(path) = self.path.clone() else {
            return Err(ConfigError::general(
                "the gateway runs the embedded config; there is no file to reload",
            ));
        };
        let _guard = self.reload_lock.lock().await;
        let loaded = tokio::task::spawn_blocking(move || ankusa_config::load_file(&path))
            .await
            .map_err(|e| ConfigError::general(e.to_string()))?;
        self.install(loaded)
    }

    /// Installs a config pushed over the admin API: rendered YAML, taken literally (no
    /// `${...}` is resolved; `$${` is a `${`).
    pub async fn reload_from_text(&self, text: &str) -> Result<bool, ConfigError> {
        let _guard = self.reload_lock.lock().await;
        let loaded = (|| {
            let file = ankusa_config::from_rendered_yaml(text)?;
            let file_hash = file.hash();
            let mut config = file;
            ankusa_config::apply_env_overrides(
                &mut config,
                &ankusa_config::interpolate::SystemLookup,
            )?;
            ankusa_config::validate(&config)?;
            // A pushed config is held to the same rule as the file: no sink reads the
            // gateway's own files.
            ankusa_config::check_file_options(&config, self.path.as_deref())?;
            Ok(ankusa_config::Loaded { config, file_hash })
        })();
        self.install(loaded)
    }

    fn install(
        &self,
        loaded: Result<ankusa_config::Loaded, ConfigError>,
    ) -> Result<bool, ConfigError> {
        let result = loaded.and_then(|l| {
            let cur = self.live();
            if l.file_hash == cur.file_hash {
                return Ok(None);
            }
            let mut config = l.config;
            let restart = self.pin_start_fields(&mut config);
            // `wal` is pinned to the started mode: a config written for another mode is held to
            // the started one's rule (a direct node's sources need a durable sink).
            ankusa_config::direct_sources(&config)?;
            let generation = self.generation.load(Ordering::SeqCst) + 1;
            Live::build(config, l.file_hash, generation, &self.sinks)
                .map(|live| Some((live, restart)))
        });
        match result {
            Ok(None) => {
                *self.last_error.lock().unwrap_or_else(|p| p.into_inner()) = None;
                Ok(false)
            }
            Ok(Some((live, restart))) => {
                tracing::info!(generation = live.generation, hash = %live.file_hash, "config reloaded");
                if !restart.is_empty() {
                    tracing::warn!(
                        restart_required = %restart.join(", "),
                        "config keys changed since start that only a restart applies; the running values stay until then"
                    );
                }
                for f in self
                    .on_reload
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .iter()
                {
                    f(&live);
                }
                self.generation.store(live.generation, Ordering::SeqCst);
                self.current.store(Arc::new(live));
                *self.last_error.lock().unwrap_or_else(|p| p.into_inner()) = None;
                *self
                    .restart_required
                    .lock()
                    .unwrap_or_else(|p| p.into_inner()) = restart;
                Ok(true)
            }
            Err(e) => {
                tracing::error!(error = %e, "config reload refused; the previous config stays");
                *self.last_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(ReloadError {
                    at: now_ms(),
                    message: e.to_string(),
                });
                Err(e)
            }
        }
    }

    /// Keys changed since start that only a restart applies (empty: none).
    pub fn restart_required(&self) -> Vec<String> {
        self.restart_required
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Keeps the start-time values of fields a running process cannot change, and names them.
    /// The list is the operator's too: it rolls the pods when one of these changes
    /// (`operator/src/resources/statefulset.rs`, `RESTART_PINNED`).
    fn pin_start_fields(&self, c: &mut Config) -> Vec<String> {
        let s = &self.started;
        let mut changed = Vec::new();
        macro_rules! pin {
            ($($path:ident).+, $name:expr) => {
                if c.$($path).+ != s.$($path).+ {
                    changed.push($name.to_string());
                    c.$($path).+ = s.$($path).+.clone();
                }
            };
        }
        pin!(node.instance, "node.instance");
        pin!(node.data_dir, "node.data_dir");
        pin!(node.roles, "node.roles");
        pin!(http.ip, "http.ip");
        pin!(http.port, "http.port");
        pin!(admin.enabled, "admin.enabled");
        pin!(admin.ip, "admin.ip");
        pin!(admin.port, "admin.port");
        pin!(admin.connections, "admin.connections");
        pin!(admin.tls, "admin.tls");
        pin!(http.connections, "http.connections");
        pin!(http.max_inflight_body_bytes, "http.max_inflight_body_bytes");
        pin!(claim_check, "claim_check");
        pin!(wal, "wal");
        pin!(intake, "intake");
        pin!(storage, "storage");
        pin!(backup, "backup");
        pin!(batcher, "batcher");
        pin!(log, "log");
        // The OpenTelemetry exporter is built once, before the runtime.
        pin!(telemetry, "telemetry");
        // The fleet's listener and client are built at start; its members, handover window,
        // dedupe policy and Retry-After reload (a scale changes the members).
        match (&mut c.fleet, &s.fleet) {
            (Some(now), Some(then)) => {
                let start = (
                    &then.ip,
                    then.port,
                    &then.tls,
                    then.max_in_flight,
                    then.timeout_ms,
                );
                if (
                    &now.ip,
                    now.port,
                    &now.tls,
                    now.max_in_flight,
                    now.timeout_ms,
                ) != start
                {
                    changed.push("fleet".to_string());
                    now.ip = then.ip;
                    now.port = then.port;
                    now.tls = then.tls.clone();
                    now.max_in_flight = then.max_in_flight;
                    now.timeout_ms = then.timeout_ms;
                }
            }
            (None, None) => {}
            (now, then) => {
                changed.push("fleet".to_string());
                *now = then.clone();
            }
        }
        changed
    }

    /// `GET /v1/status`: what the operator reads to know a pod runs its config.
    pub fn status(&self) -> Status {
        let live = self.live();
        let mut sources: Vec<String> = live.sources.keys().cloned().collect();
        sources.sort();
        Status {
            instance: live.config.node.instance.clone(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            config_hash: live.file_hash.clone(),
            generation: live.generation,
            loaded_at: live.loaded_at,
            last_reload_error: self
                .last_error
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone(),
            restart_required: self.restart_required(),
            sources,
            config_path: self.path.as_ref().map(|p| p.display().to_string()),
            roles: live.config.node.roles.clone(),
            // Dispatch's to fill (`admin::status`): the config knows nothing of deliveries.
            failing_sinks: Vec::new(),
            // The admin's to fill, from the pen, the archive and the DLQ.
            quarantine: None,
            archive: None,
            dlq: None,
            backup: None,
            intake: None,
        }
    }
}
