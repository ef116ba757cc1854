//! `POST /v1/sources/{id}/filters/test`: a dry run of sink filters and transforms (the
//! source's as configured, or ones given in the request) over a sample hook or over the hooks
//! the archive holds from a window. Computed from real traffic, nothing delivered or stored:
//! the answer counts what each sink would get and shows its first transformed outputs.
//! Node-wide (archived bodies of every tenant): a tenant-limited token is refused.
//!
//! It imports the admin state and extractors, `api_error`, the archive, and the routing
//! (`hook::route`) and transform (`dispatch::transform`) the delivery path runs.

use std::collections::BTreeMap;
use std::sync::Arc;

use ankusa_api::{
    DEFAULT_FILTER_TEST_LIMIT, FilterTest, FilterTestResult, FilterTestWindow,
    MAX_FILTER_TEST_LIMIT, MAX_FILTER_TEST_SAMPLES, SampleHook, SinkTestResult, TestSample,
};
use ankusa_config::{CompiledRouting, SinkRouting};
use ankusa_core::{Envelope, now_ms};
use axum::extract::{Path, State};
use axum::routing::post;
use axum::{Json, Router};

use super::caller::{HooksRead, NodeCaller};
use super::params::JsonBody;
use super::state::AdminState;
use crate::api_error::ApiError;
use crate::archive::ArchiveError;
use crate::dispatch::transform;
use crate::hook::route::{Decision, activation, decide, json_body};
use crate::live::LiveSource;

/// Archived segments one dry run reads at most (the answer says `truncated` past it).
const MAX_SEGMENTS: usize = 256;
/// Segment rows listed per store read.
const LIST: usize = 64;
/// Bytes of a non-JSON sample shown.
const SAMPLE_TEXT_BYTES: usize = 4096;

pub fn router() -> Router<Arc<AdminState>> {
    Router::new().route("/v1/sources/{id}/filters/test", post(filters_test))
}

async fn filters_test(
    State(s): State<Arc<AdminState>>,
    _: NodeCaller<HooksRead>,
    Path(id): Path<String>,
    JsonBody(req): JsonBody<FilterTest>,
) -> Result<Json<FilterTestResult>, ApiError> {
    let live = s.config.live();
    let source = live
        .sources
        .get(&id)
        .ok_or(ApiError::UnknownSource)?
        .clone();
    let routes = routes(&source, &req)?;
    let samples = req.samples.unwrap_or(3);
    if samples > MAX_FILTER_TEST_SAMPLES {
        return Err(invalid(
            "samples",
            format!("must be <= {MAX_FILTER_TEST_SAMPLES}"),
        ));
    }
    let mut run = Run::new(&source, routes, samples);
    match (&req.hook, &req.archive) {
        (Some(h), None) => {
            let env = sample_envelope(&source, h)?;
            run.examine(&env, None);
        }
        (None, Some(w)) => run = archive_window(&s, &source, w, run).await?,
        _ => {
            return Err(ApiError::InvalidBody {
                message: "give exactly one of hook, archive".into(),
            });
        }
    }
    Ok(Json(run.result))
}

fn invalid(field: &str, message: impl Into<String>) -> ApiError {
    ApiError::InvalidFilter {
        field: field.into(),
        message: message.into(),
    }
}

/// The routing to try: the request's (compiled here, errors naming `sinks[<i>].filter`...)
/// or the source's.
fn routes(source: &LiveSource, req: &FilterTest) -> Result<Vec<CompiledRouting>, ApiError> {
    let Some(tries) = &req.sinks else {
        return Ok((0..source.sinks.len())
            .map(|i| source.routes.get(i).cloned().unwrap_or_default())
            .collect());
    };
    if tries.len() != source.sinks.len() {
        return Err(invalid(
            "sinks",
            format!(
                "must have one entry per sink of the source ({}), got {}",
                source.sinks.len(),
                tries.len()
            ),
        ));
    }
    tries
        .iter()
        .enumerate()
        .map(|(i, t)| {
            SinkRouting {
                filter: t.filter.as_deref(),
                on_filter_error: t.on_filter_error,
                transform: t.transform.as_ref(),
            }
            .compile(&format!("sinks[{i}]"))
            .map_err(|e| invalid(e.field.as_deref().unwrap_or("sinks"), e.message))
        })
        .collect()
}

/// The sample as a hook the source received now.
fn sample_envelope(source: &LiveSource, h: &SampleHook) -> Result<Envelope, ApiError> {
    let body = match (&h.body, &h.body_text) {
        (Some(v), None) => serde_json::to_vec(v).unwrap_or_default(),
        (None, Some(t)) => t.clone().into_bytes(),
        (None, None) => Vec::new(),
        (Some(_), Some(_)) => {
            return Err(invalid("hook", "give at most one of body, body_text"));
        }
    };
    let tenant = h.tenant.clone().unwrap_or_else(|| source.tenant().into());
    if !ankusa_config::valid_id(&tenant) {
        return Err(invalid("hook.tenant", "must match [A-Za-z0-9_-]{1,64}"));
    }
    let mut env = Envelope::new(tenant, source.id.clone(), body.into());
    env.received_at = now_ms();
    env.headers = h
        .headers
        .iter()
        .map(|(k, v)| (k.to_ascii_lowercase(), v.clone()))
        .collect();
    Ok(env)
}

/// The archived hooks of `source` received in the window, up to `limit`. Each segment's hooks
/// are evaluated on a blocking thread: up to `limit` hooks, each under the cost limit per
/// sink, must not hold an async worker (and the admin requests queued on it).
async fn archive_window(
    s: &AdminState,
    source: &LiveSource,
    w: &FilterTestWindow,
    mut run: Run,
) -> Result<Run, ApiError> {
    if w.from >= w.to {
        return Err(invalid("archive.to", "must be after archive.from"));
    }
    let limit = w.limit.unwrap_or(DEFAULT_FILTER_TEST_LIMIT);
    if limit == 0 || limit > MAX_FILTER_TEST_LIMIT {
        return Err(invalid(
            "archive.limit",
            format!("must be 1 to {MAX_FILTER_TEST_LIMIT}"),
        ));
    }
    let archive = s.archive.as_ref().ok_or(ApiError::ArchiveNotConfigured)?;
    let mut first = 0u64;
    let mut segments = 0usize;
    loop {
        let rows = s
            .store(move |store| store.archive_segments(first, LIST))
            .await?;
        let Some(last) = rows.last().map(|r| r.first_seq) else {
            return Ok(run);
        };
        for row in rows.iter().filter(|r| r.overlaps(w.from, w.to)) {
            if segments >= MAX_SEGMENTS {
                run.result.truncated = true;
                return Ok(run);
            }
            segments += 1;
            let records = match archive.read_segment(row).await {
                Ok(r) => r,
                Err(ArchiveError::Corrupt(_)) => {
                    run.result.corrupt_segments += 1;
                    continue;
                }
                Err(e) => {
                    tracing::warn!(segment = %row.key, error = %e, "archive read failed");
                    return Err(ApiError::ArchiveUnavailable);
                }
            };
            let (id, window) = (source.id.clone(), w.clone());
            let (back, full) = tokio::task::spawn_blocking(move || {
                for rec in &records {
                    let env = &rec.envelope;
                    let wanted = env.source_id == id
                        && env.received_at >= window.from
                        && env.received_at < window.to
                        && window.tenant.as_ref().is_none_or(|t| *t == env.tenant);
                    if !wanted {
                        continue;
                    }
                    if run.result.examined >= limit {
                        run.result.truncated = true;
                        return (run, true);
                    }
                    run.examine(env, Some(env.id.to_string()));
                }
                (run, false)
            })
            .await
            .map_err(|_| ApiError::ArchiveUnavailable)?;
            run = back;
            if full {
                return Ok(run);
            }
        }
        first = last + 1;
    }
}

/// The counts and samples being gathered.
struct Run {
    routes: Vec<CompiledRouting>,
    /// Whether any expression reads `body` (the JSON is parsed only then).
    reads_body: bool,
    samples: usize,
    result: FilterTestResult,
}

impl Run {
    fn new(source: &LiveSource, routes: Vec<CompiledRouting>, samples: usize) -> Run {
        let sinks = (0..routes.len())
            .map(|i| SinkTestResult {
                index: i as u16,
                name: source
                    .cfg
                    .sink_names
                    .get(i)
                    .cloned()
                    .unwrap_or_else(|| format!("sinks[{i}]")),
                ..Default::default()
            })
            .collect();
        Run {
            reads_body: routes.iter().any(CompiledRouting::reads_body),
            routes,
            samples,
            result: FilterTestResult {
                source: source.id.clone(),
                sinks,
                ..Default::default()
            },
        }
    }

    fn examine(&mut self, env: &Envelope, hook_id: Option<String>) {
        self.result.examined += 1;
        let body = if self.reads_body {
            json_body(env)
        } else {
            None
        };
        let act = activation(env, body.as_ref());
        let hook = Arc::new(env.clone());
        for (route, out) in self.routes.iter().zip(&mut self.result.sinks) {
            let d = decide(route, &act);
            if let Decision::Error { class, .. } = d {
                *out.filter_errors.entry(class.to_string()).or_default() += 1;
            }
            if !d.delivers() {
                out.filtered += 1;
                continue;
            }
            out.matched += 1;
            if !route.transforms() && out.samples.len() >= self.samples {
                continue;
            }
            match transform::apply(route, &hook) {
                Ok(t) if out.samples.len() < self.samples => {
                    out.samples
                        .push(sample(&t.hook.body, t.headers, hook_id.clone()));
                }
                Ok(_) => {}
                Err(class) => {
                    *out.transform_errors.entry(class.to_string()).or_default() += 1;
                }
            }
        }
    }
}

fn sample(body: &[u8], headers: Vec<(String, String)>, hook_id: Option<String>) -> TestSample {
    let (body, body_text) = match serde_json::from_slice(body) {
        Ok(v) => (v, None),
        Err(_) => {
            let text = String::from_utf8_lossy(body);
            let end = text.floor_char_boundary(SAMPLE_TEXT_BYTES);
            (serde_json::Value::Null, Some(text[..end].to_string()))
        }
    };
    TestSample {
        hook_id,
        body,
        body_text,
        headers: headers.into_iter().collect::<BTreeMap<_, _>>(),
    }
}
