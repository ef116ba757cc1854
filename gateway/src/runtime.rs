//! The running configuration and its hot reload.
//!
//! A `Runtime` is a config with everything built from it (verifiers, sinks). Requests take a
//! snapshot at their start, so one in flight finishes on the config it started with; a reload
//! builds a complete new `Runtime` and swaps it in atomically, or refuses and keeps the old
//! one. Listener addresses, the data dir and the batcher are read once at start: a reload
//! that changes them applies everything else and reports those fields as needing a restart.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use ankusa_config::{Config, ConfigError, SourceConfig};
use arc_swap::ArcSwap;
use serde::Serialize;

use ankusa_core::Sink;
use ankusa_core::now_ms;
use ankusa_sinks::SinkBuilder;

/// A source with its verifier and sinks built.
pub struct SourceRt {
    pub id: String,
    pub cfg: SourceConfig,
    pub verifier: Option<ankusa_verify::Verifier>,
    pub sinks: Vec<Arc<dyn Sink>>,
    /// Type names of `sinks`, bound into each delivery row at ack.
    pub sink_types: Vec<&'static str>,
}

impl SourceRt {
    /// The tenant of a hook of this source when the URL names none.
    pub fn tenant(&self) -> &str {
        self.cfg.tenant.as_deref().unwrap_or("default")
    }
}

pub struct Runtime {
    pub config: Config,
    /// `Config::hash` of the file as written; what the operator compares.
    pub file_hash: String,
    pub generation: u64,
    pub loaded_at: u64,
    pub sources: HashMap<String, Arc<SourceRt>>,
}

impl Runtime {
    pub fn build(
        config: Config,
        file_hash: String,
        generation: u64,
        factory: &SinkBuilder,
    ) -> Result<Runtime, ConfigError> {
        let mut sources = HashMap::new();
        for (id, s) in &config.sources {
            let verifier = ankusa_verify::Verifier::new(&s.verify)
                .map_err(|e| ConfigError::field(format!("sources.{id}.verify"), e.to_string()))?;
            let mut sinks = Vec::with_capacity(s.sinks.len());
            let mut sink_types = Vec::with_capacity(s.sinks.len());
            for (i, sc) in s.sinks.iter().enumerate() {
                let field = format!("sources.{id}.sinks[{i}]");
                sinks.push(factory.build(&config, s, &field, sc)?);
                sink_types.push(sc.type_name());
            }
            sources.insert(
                id.clone(),
                Arc::new(SourceRt {
                    id: id.clone(),
                    cfg: s.clone(),
                    verifier,
                    sinks,
                    sink_types,
                }),
            );
        }
        Ok(Runtime {
            config,
            file_hash,
            generation,
            loaded_at: now_ms(),
            sources,
        })
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct ReloadError {
    pub at: u64,
    pub message: String,
}

/// Reported by `/v1/status`: what the operator reads to know a pod runs its config.
#[derive(Debug, Clone, Serialize)]
pub struct Status {
    pub config_hash: String,
    pub generation: u64,
    pub loaded_at: u64,
    pub last_reload_error: Option<ReloadError>,
    pub restart_required: Vec<String>,
    pub sources: Vec<String>,
    pub config_path: Option<String>,
}

/// Run after every successful reload, before the new runtime is installed.
pub type ReloadHook = Box<dyn Fn(&Runtime) + Send + Sync>;

pub struct ConfigHandle {
    current: ArcSwap<Runtime>,
    path: Option<PathBuf>,
    factory: Arc<SinkBuilder>,
    generation: AtomicU64,
    last_error: Mutex<Option<ReloadError>>,
    restart_required: Mutex<Vec<String>>,
    reload_lock: tokio::sync::Mutex<()>,
    /// The config fixed at start (listeners, data dir, batcher).
    started: Config,
    on_reload: Mutex<Vec<ReloadHook>>,
}

impl ConfigHandle {
    pub fn new(
        runtime: Runtime,
        path: Option<PathBuf>,
        factory: Arc<SinkBuilder>,
    ) -> Arc<ConfigHandle> {
        let started = runtime.config.clone();
        let generation = runtime.generation;
        Arc::new(ConfigHandle {
            current: ArcSwap::from_pointee(runtime),
            path,
            factory,
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
        &self.factory
    }

    /// The current runtime; hold the `Arc` for the whole request.
    pub fn snapshot(&self) -> Arc<Runtime> {
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

    /// Installs a config pushed over the admin API (already interpolated YAML text).
    pub async fn reload_from_text(&self, text: &str) -> Result<bool, ConfigError> {
        let _guard = self.reload_lock.lock().await;
        let loaded = (|| {
            let file =
                ankusa_config::from_yaml_str(text, &ankusa_config::interpolate::SystemLookup)?;
            let file_hash = file.hash();
            let mut config = file;
            ankusa_config::apply_env_overrides(
                &mut config,
                &ankusa_config::interpolate::SystemLookup,
            )?;
            ankusa_config::validate(&config)?;
            Ok(ankusa_config::Loaded { config, file_hash })
        })();
        self.install(loaded)
    }

    fn install(
        &self,
        loaded: Result<ankusa_config::Loaded, ConfigError>,
    ) -> Result<bool, ConfigError> {
        let result = loaded.and_then(|l| {
            let cur = self.snapshot();
            if l.file_hash == cur.file_hash {
                return Ok(None);
            }
            let mut config = l.config;
            let restart = self.pin_start_fields(&mut config);
            let generation = self.generation.load(Ordering::SeqCst) + 1;
            Runtime::build(config, l.file_hash, generation, &self.factory)
                .map(|rt| Some((rt, restart)))
        });
        match result {
            Ok(None) => {
                *self.last_error.lock().unwrap_or_else(|p| p.into_inner()) = None;
                Ok(false)
            }
            Ok(Some((rt, restart))) => {
                tracing::info!(generation = rt.generation, hash = %rt.file_hash, "config reloaded");
                if !restart.is_empty() {
                    tracing::warn!(fields = ?restart, "config fields changed that take effect only after a restart");
                }
                for f in self
                    .on_reload
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .iter()
                {
                    f(&rt);
                }
                self.generation.store(rt.generation, Ordering::SeqCst);
                self.current.store(Arc::new(rt));
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

    /// Keeps the start-time values of fields a running process cannot change, and names them.
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
        pin!(claim_check, "claim_check");
        pin!(batcher, "batcher");
        pin!(log, "log");
        changed
    }

    pub fn status(&self) -> Status {
        let rt = self.snapshot();
        let mut sources: Vec<String> = rt.sources.keys().cloned().collect();
        sources.sort();
        Status {
            config_hash: rt.file_hash.clone(),
            generation: rt.generation,
            loaded_at: rt.loaded_at,
            last_reload_error: self
                .last_error
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone(),
            restart_required: self
                .restart_required
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone(),
            sources,
            config_path: self.path.as_ref().map(|p| p.display().to_string()),
        }
    }
}
