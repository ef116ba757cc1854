/**
 * A small, typed client of the gateway's admin API: dead letters, replay jobs and the
 * quarantine pen. Bearer tokens (tenant-limited ones work the same way: the API holds them to
 * their tenants); over TLS with a private CA, pass `ankusa/node`'s `nodeFetchWithCa(...)` as
 * `fetch`. Every failure is an `AdminError` carrying the API's JSON `error` code.
 */

import { AdminError } from '../errors.js';
import { type FetchLike, DeadlineExceeded, normalizeBaseUrl, readAtMost, resolveFetch, withDeadline } from '../http.js';
import type {
  CreateReplay,
  DeadPage,
  DlqQuery,
  JobList,
  JobView,
  PatchableJobState,
  QuarantinePage,
  QuarantineQuery,
  ReplayCreated,
} from './types.js';

export const DEFAULT_ADMIN_TIMEOUT_MS = 10_000;

/** Admin answers are pages of at most 1000 entries; anything past this is not an answer. */
const MAX_ANSWER_BYTES = 64 * 1024 * 1024;

export interface AdminClientOptions {
  /** The admin API, e.g. `http://127.0.0.1:4002` or `https://ankusa-admin:4002`. */
  baseUrl: string;
  /** The bearer token (`admin.tokens`); omit only on an open, loopback-only API. */
  token?: string;
  /** A fetch to use instead of the global one (`nodeFetchWithCa` for a CA bundle). */
  fetch?: FetchLike;
  /** Bounds each call (connection, headers and body). Default 10000. */
  timeoutMs?: number;
}

type Query = Record<string, string | number | undefined | null>;

interface Answer {
  status: number;
  json: unknown;
}

export class AdminClient {
  readonly baseUrl: string;
  readonly timeoutMs: number;
  readonly #token: string | undefined;
  readonly #fetch: FetchLike;

  constructor(options: AdminClientOptions) {
    this.baseUrl = normalizeBaseUrl(options.baseUrl, 'AdminClient');
    this.timeoutMs = options.timeoutMs ?? DEFAULT_ADMIN_TIMEOUT_MS;
    if (!(this.timeoutMs > 0)) throw new TypeError('AdminClient: timeoutMs must be > 0');
    this.#token = options.token;
    this.#fetch = resolveFetch(options.fetch);
  }

  /** `GET /v1/dlq`: a page of dead letters, newest first. Follow `next_cursor` until `null`. */
  async listDlq(query: DlqQuery = {}): Promise<DeadPage> {
    return (await this.#call('GET', '/v1/dlq', { query: query as Query })).json as DeadPage;
  }

  /** `POST /v1/replays`: creates a replay job (or finds the same `job_id` and filter again). */
  async createReplay(request: CreateReplay): Promise<ReplayCreated> {
    const a = await this.#call('POST', '/v1/replays', { body: request });
    return { created: a.status === 202, job: a.json as JobView };
  }

  /** `GET /v1/replays`: every job the token may see, newest first. */
  async listReplays(): Promise<JobList> {
    return (await this.#call('GET', '/v1/replays')).json as JobList;
  }

  /** `GET /v1/replays/{id}`. */
  async getReplay(id: string): Promise<JobView> {
    return (await this.#call('GET', `/v1/replays/${encodeURIComponent(id)}`)).json as JobView;
  }

  /** `PATCH /v1/replays/{id}`: pause, resume (`running`) or cancel a job. */
  async patchReplay(id: string, state: PatchableJobState): Promise<JobView> {
    return (await this.#call('PATCH', `/v1/replays/${encodeURIComponent(id)}`, { body: { state } })).json as JobView;
  }

  /** `GET /v1/quarantine`: the pen's entries, newest first, without bodies. */
  async listQuarantine(query: QuarantineQuery = {}): Promise<QuarantinePage> {
    return (await this.#call('GET', '/v1/quarantine', { query: query as Query })).json as QuarantinePage;
  }

  async #call(method: string, path: string, options: { query?: Query; body?: unknown } = {}): Promise<Answer> {
    const url = this.baseUrl + path + queryString(options.query);
    const headers: Record<string, string> = { accept: 'application/json' };
    if (this.#token !== undefined) headers.authorization = `Bearer ${this.#token}`;
    const init: RequestInit = { method, headers, redirect: 'manual' };
    if (options.body !== undefined) {
      headers['content-type'] = 'application/json';
      init.body = JSON.stringify(options.body);
    }
    const where = `${method} ${path}`;
    let status = 0;
    let retryAfter: string | null = null;
    let bytes: Uint8Array | null;
    try {
      ({ status, retryAfter, bytes } = await withDeadline(this.timeoutMs, async (signal) => {
        const response = await this.#fetch(url, { ...init, signal });
        return {
          status: response.status,
          retryAfter: response.headers.get('retry-after'),
          bytes: await readAtMost(response, MAX_ANSWER_BYTES),
        };
      }));
    } catch (e) {
      const timeout = e instanceof DeadlineExceeded;
      throw new AdminError(
        timeout ? 'timeout' : 'transport_error',
        `${where}: ${timeout ? `no answer within ${this.timeoutMs} ms` : 'no connection'}`,
        { retryable: true, cause: e },
      );
    }
    const json = bytes === null ? undefined : parse(bytes);
    if (status >= 200 && status < 300) {
      if (json === undefined) {
        throw new AdminError('invalid_response', `${where}: answered ${status} without a JSON body`, { status });
      }
      return { status, json };
    }
    throw errorOf(where, status, json, retryAfter);
  }
}

function queryString(query: Query | undefined): string {
  if (!query) return '';
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) {
    if (v !== undefined && v !== null) params.append(k, String(v));
  }
  const s = params.toString();
  return s ? `?${s}` : '';
}

function parse(bytes: Uint8Array): unknown {
  try {
    return JSON.parse(new TextDecoder().decode(bytes)) as unknown;
  } catch {
    return undefined;
  }
}

function errorOf(where: string, status: number, json: unknown, retryAfter: string | null): AdminError {
  const body = typeof json === 'object' && json !== null && !Array.isArray(json) ? (json as Record<string, unknown>) : null;
  const code = typeof body?.error === 'string' ? body.error : 'http_error';
  const field = typeof body?.field === 'string' ? body.field : null;
  const detail = typeof body?.message === 'string' ? `: ${body.message}` : typeof body?.scope === 'string' ? ` (scope ${body.scope})` : '';
  const retryAfterS = retryAfter !== null && /^[0-9]{1,9}$/.test(retryAfter) ? Number(retryAfter) : null;
  return new AdminError(code, `${where}: ${status} ${code}${field ? ` (${field})` : ''}${detail}`, {
    status,
    field,
    retryable: status === 408 || status === 429 || status >= 500,
    body,
    retryAfterS,
  });
}
