/**
 * The admin API's wire types, key for key as the gateway writes and reads them (the Rust
 * definitions are `api/src/dlq.rs`, `api/src/replay.rs`, `api/src/store.rs`; the routes are
 * described in docs/admin-api.md). They keep the API's snake_case names, so what you read here
 * is what `curl` shows. Unix times are milliseconds; ids are strings.
 */

/** A dead letter's error class. */
export type ErrorClass = 'permanent' | 'throttled' | 'transient';

/** Which dead letters a request or a replay job means; set fields combine with AND. */
export interface DeadFilter {
  tenant?: string;
  source_id?: string;
  /** One hook (a UUID). */
  id?: string;
  /** A sink index of the source. */
  sink?: number;
  error_class?: ErrorClass;
  /** Dead-lettered at or after (unix ms). */
  since?: number;
  /** Dead-lettered at or before (unix ms). */
  until?: number;
}

/** `GET /v1/dlq` parameters. */
export interface DlqQuery {
  tenant?: string;
  source_id?: string;
  sink?: number;
  error_class?: ErrorClass;
  since?: number;
  until?: number;
  /** 1 to 1000; default 100. */
  limit?: number;
  /** The `next_cursor` of the previous page (with the same filters). */
  cursor?: string;
}

/** One dead letter of `GET /v1/dlq`. */
export interface DeadEntry {
  id: string;
  seq: number;
  tenant: string;
  source_id: string;
  sink: number;
  sink_type: string;
  error_class: ErrorClass;
  /** The last error, `<sink type>: <error>`. */
  reason: string | null;
  attempts: number;
  dead_at: number;
  first_attempt_at: number | null;
  received_at: number | null;
  size: number;
  /** The replay job whose delivery died again. */
  replay_id: string | null;
}

/** `GET /v1/dlq`: newest first. */
export interface DeadPage {
  entries: DeadEntry[];
  /** Opaque position after this page; `null` when the scan reached the end. */
  next_cursor: string | null;
  /** Exact where it is free (a counter, or a filtered first page that reached the end). */
  total: number | null;
  /** Keys this request examined (at most 10 000). */
  examined: number;
}

export type ReplayKind = 'dlq' | 'quarantine' | 'archive' | 'lifecycle';

/**
 * `POST /v1/replays`. Give the filter nested (`filter`) or its keys at the top level, not
 * both. Unknown keys are refused by the API (`400 invalid_body`).
 */
export interface CreateReplay {
  /** A lowercase hyphenated UUID; absent: the gateway makes a UUIDv7. */
  job_id?: string;
  /** Default `dlq`. */
  kind?: ReplayKind;
  filter?: DeadFilter;
  tenant?: string;
  source_id?: string;
  id?: string;
  sink?: number;
  error_class?: ErrorClass;
  since?: number;
  until?: number;
  /** Rows moved per second at most, 1 to 100000 (default 1000). */
  rate?: number;
  /** Moves only while dispatch's oldest due row is at most this late (default 2000). */
  max_lag_ms?: number;
  /** Consecutive dead letters among its deliveries that pause the job (default 20). */
  pause_after_dead?: number;
  /** `archive` jobs: received at or after (unix ms); required there. */
  from?: number;
  /** `archive` jobs: received before (unix ms); required there. */
  to?: number;
  /** `archive` jobs: the sink indexes to send to; absent: all. */
  sinks?: number[];
  /** `dlq` and `archive` jobs: send whether or not each sink's current filter takes the hook. */
  ignore_filters?: boolean;
}

export type JobState = 'running' | 'paused' | 'cancelled' | 'completed';

/** The states `PATCH /v1/replays/{id}` accepts. */
export type PatchableJobState = 'running' | 'paused' | 'cancelled';

/** An `archive` job's window and sink subset. */
export interface ArchiveWindow {
  from: number;
  to: number;
  /** Absent: every sink of the source. */
  sinks?: number[];
}

/** A replay job as the gateway stores and shows it. */
export interface ReplayJob {
  id: string;
  kind: string;
  filter: DeadFilter;
  rate: number;
  max_lag_ms: number;
  pause_after_dead: number;
  state: JobState;
  created_at: number;
  updated_at: number;
  completed_at?: number;
  /** Opaque scan position. */
  cursor?: string;
  moved: number;
  scanned: number;
  /** `quarantine` jobs: entries released as hooks; `archive` jobs: hooks queued again. */
  released: number;
  skipped: number;
  archive?: ArchiveWindow;
  corrupt_segments?: number;
  /** Why the job paused itself. */
  reason?: string;
  /** The sinks' filters are not evaluated (a targeted replay). */
  ignore_filters?: boolean;
}

/** A job with its progress: `GET /v1/replays/{id}`, and the answer to a create or a patch. */
export interface JobView extends ReplayJob {
  /** Moved rows since delivered. */
  delivered: number;
  /** Moved rows dead again. */
  failed: number;
  /** Moved rows not yet settled. */
  outstanding: number;
  /** `completed` and nothing outstanding. */
  done: boolean;
}

/** `GET /v1/replays`: newest first. */
export interface JobList {
  jobs: JobView[];
}

/** What `AdminClient.createReplay` resolves to. */
export interface ReplayCreated {
  /** `true` for a new job (`202`); `false` when the same `job_id` and filter existed (`200`). */
  created: boolean;
  job: JobView;
}

/** `GET /v1/quarantine` parameters. */
export interface QuarantineQuery {
  tenant?: string;
  source_id?: string;
  /** One entry (a UUID). */
  id?: string;
  /** Received at or after (unix ms). */
  since?: number;
  /** Received at or before (unix ms). */
  until?: number;
  /** 1 to 1000; default 100. */
  limit?: number;
  cursor?: string;
}

/** One entry of the quarantine pen, without its body. */
export interface PenEntry {
  id: string;
  source_id: string;
  tenant: string;
  received_at: number;
  /** Why verification failed (`no_matching_signature`, ...). */
  reason: string;
  /** What the entry counts against `quarantine.max_bytes`. */
  size: number;
  method: string;
  path: string;
  /** The tenant came from the URL (`routing: tenant_path`). */
  url_tenant: boolean;
}

/** `GET /v1/quarantine`: newest first. */
export interface QuarantinePage {
  entries: PenEntry[];
  /** The whole pen's entries and bytes, only when no filter is set. */
  total: number | null;
  bytes: number | null;
  next_cursor: string | null;
}
