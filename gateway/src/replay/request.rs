//! A create request checked into the job it makes: a kind this release replays, the filter of
//! that kind (an archived hook has no dead time, sink or error class; a pen entry no sink or
//! error class), an archive window only with an archive on this node, a rate within
//! `ankusa_api::check_rate`, a `job_id` that is a lowercase hyphenated UUID. Pure: a refusal
//! names the field, never echoes the value. Imports nothing of the crate besides its parent.

use ankusa_api::{
    ArchiveWindow, CreateReplay, DEFAULT_MAX_LAG_MS, DEFAULT_PAUSE_AFTER_DEAD, DEFAULT_RATE,
    DeadFilter, JobState, KIND_ARCHIVE, KIND_DLQ, KIND_LIFECYCLE, KIND_QUARANTINE, ReplayJob,
};

use super::{ReplayError, invalid};

/// A create request that passed its checks.
pub(super) struct NewJob {
    pub id: String,
    kind: String,
    filter: DeadFilter,
    window: Option<ArchiveWindow>,
    rate: u32,
    max_lag_ms: u64,
    pause_after_dead: u32,
    ignore_filters: bool,
}

impl NewJob {
    /// Whether `job` is this request made earlier (same id, kind, filter and window): a create
    /// repeated with its `job_id` returns the job it made.
    pub fn same_as(&self, job: &ReplayJob) -> bool {
        // A lifecycle job without `until` took its creation time as `until`.
        let until_defaulted = self.kind == KIND_LIFECYCLE && self.filter.until.is_none();
        let mut filter = self.filter.clone();
        if until_defaulted {
            filter.until = job.filter.until;
        }
        job.kind == self.kind
            && job.filter == filter
            && job.archive == self.window
            && job.ignore_filters == self.ignore_filters
    }

    /// The job, running from `now`.
    pub fn into_job(self, now: u64) -> ReplayJob {
        let mut filter = self.filter;
        if self.kind == KIND_LIFECYCLE && filter.until.is_none() {
            // The window ends where the job starts: events it emits itself are not re-sent.
            filter.until = Some(now);
        }
        ReplayJob {
            id: self.id,
            kind: self.kind,
            filter,
            rate: self.rate,
            max_lag_ms: self.max_lag_ms,
            pause_after_dead: self.pause_after_dead,
            state: JobState::Running,
            created_at: now,
            updated_at: now,
            completed_at: None,
            cursor: None,
            moved: 0,
            scanned: 0,
            released: 0,
            skipped: 0,
            archive: self.window,
            corrupt_segments: 0,
            reason: None,
            ignore_filters: self.ignore_filters,
        }
    }
}

/// Checks a create request; `archive`: this node has an archive (`storage`); `lifecycle`: it
/// has `lifecycle` on.
pub(super) fn check(
    req: CreateReplay,
    archive: bool,
    lifecycle: bool,
) -> Result<NewJob, ReplayError> {
    if ![KIND_DLQ, KIND_QUARANTINE, KIND_ARCHIVE, KIND_LIFECYCLE].contains(&req.kind.as_str()) {
        return Err(invalid(
            "kind",
            "unsupported kind; this release replays kind dlq, archive, quarantine or lifecycle",
        ));
    }
    let filter = req.filter()?;
    // A trail event is chosen by its time (`since`, `until`) and tenant only.
    if req.kind == KIND_LIFECYCLE {
        if !lifecycle {
            return Err(invalid(
                "kind",
                "kind lifecycle needs lifecycle events (lifecycle is not configured on this node)",
            ));
        }
        for (set, field) in [
            (filter.source_id.is_some(), "source_id"),
            (filter.id.is_some(), "id"),
            (filter.sink.is_some(), "sink"),
            (filter.error_class.is_some(), "error_class"),
        ] {
            if set {
                return Err(invalid(
                    field,
                    "is not a filter of kind lifecycle (use since, until and tenant)",
                ));
            }
        }
        if filter.since.is_none() {
            return Err(invalid("since", "is required for kind lifecycle (unix ms)"));
        }
    }
    let window = req.archive_window()?;
    // An archived hook is chosen by its source, tenant, id and receive time (`from`, `to`):
    // it has no dead time, sink or error class of its own.
    if req.kind == KIND_ARCHIVE {
        if !archive {
            return Err(invalid(
                "kind",
                "kind archive needs an archive (storage is not configured on this node)",
            ));
        }
        for (set, field) in [
            (filter.sink.is_some(), "sink"),
            (filter.error_class.is_some(), "error_class"),
            (filter.since.is_some(), "since"),
            (filter.until.is_some(), "until"),
        ] {
            if set {
                return Err(invalid(
                    field,
                    "is not a filter of kind archive (use from, to and sinks)",
                ));
            }
        }
    }
    // A released pen entry is accepted as the edge would accept it now, filters included;
    // lifecycle sinks take no filter.
    if req.ignore_filters.is_some() && ![KIND_DLQ, KIND_ARCHIVE].contains(&req.kind.as_str()) {
        return Err(invalid(
            "ignore_filters",
            "is an option of kind dlq and archive only",
        ));
    }
    // A pen entry has no sink and no error class yet.
    if req.kind == KIND_QUARANTINE {
        if filter.sink.is_some() {
            return Err(invalid("sink", "is not a filter of kind quarantine"));
        }
        if filter.error_class.is_some() {
            return Err(invalid("error_class", "is not a filter of kind quarantine"));
        }
    }
    let rate = req.rate.unwrap_or(DEFAULT_RATE);
    ankusa_api::check_rate(rate).map_err(|m| invalid("rate", m))?;
    let id = match &req.job_id {
        Some(id) => {
            let parsed = uuid::Uuid::parse_str(id)
                .map_err(|_| invalid("job_id", "must be a lowercase UUID"))?;
            if parsed.hyphenated().to_string() != *id {
                return Err(invalid("job_id", "must be a lowercase hyphenated UUID"));
            }
            id.clone()
        }
        None => uuid::Uuid::now_v7().to_string(),
    };
    Ok(NewJob {
        id,
        kind: req.kind,
        filter,
        window,
        rate,
        max_lag_ms: req.max_lag_ms.unwrap_or(DEFAULT_MAX_LAG_MS),
        pause_after_dead: req
            .pause_after_dead
            .unwrap_or(DEFAULT_PAUSE_AFTER_DEAD)
            .max(1),
        ignore_filters: req.ignore_filters.unwrap_or(false),
    })
}
