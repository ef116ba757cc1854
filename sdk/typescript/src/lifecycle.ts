/**
 * The node's lifecycle and operational events (docs/lifecycle.md): CloudEvents 1.0 in JSON
 * structured mode, delivered over HTTP (`application/cloudevents+json`) or as the inline body
 * of a queue message of the reserved source `ankusa:lifecycle`.
 */

import { type BodyInput, toBytes } from './bytes.js';
import { LifecycleEventError } from './errors.js';
import { isObject, own, parseJson } from './message.js';

/** The reserved source (and tenant) of lifecycle hooks. */
export const LIFECYCLE_SOURCE = 'ankusa:lifecycle';

/** The event types of docs/lifecycle.md's catalogue. */
export const LIFECYCLE_EVENT_TYPES = [
  'io.ankusa.source.created',
  'io.ankusa.source.updated',
  'io.ankusa.source.deleted',
  'io.ankusa.hook.dead_lettered',
  'io.ankusa.sink.breaker_opened',
  'io.ankusa.sink.breaker_closed',
  'io.ankusa.replay.succeeded',
  'io.ankusa.replay.failed',
  'io.ankusa.replay.paused',
  'io.ankusa.quarantine.held',
  'io.ankusa.quarantine.released',
] as const;

export type LifecycleEventType = (typeof LIFECYCLE_EVENT_TYPES)[number];

const KNOWN: ReadonlySet<string> = new Set(LIFECYCLE_EVENT_TYPES);

export interface LifecycleEvent {
  /** A UUIDv7, unique per event and kept by a re-emit: dedupe on it. */
  id: string;
  /** A catalogue type, or a newer one this SDK does not know (`known: false`). */
  type: string;
  /** `/ankusa/<node.instance>`. */
  source: string;
  /** RFC 3339, UTC, milliseconds. */
  time: string;
  subject: string | null;
  specversion: '1.0';
  datacontenttype: string | null;
  traceparent: string | null;
  /** The event's own fields, or `null`. */
  data: Record<string, unknown> | null;
  /** Whether `type` is in the catalogue this SDK was built with. */
  known: boolean;
}

/** What `decodeLifecycleEvent` takes besides bytes: a decoded message or a redeemed hook. */
export interface LifecycleCarrier {
  sourceId: string;
  body: Uint8Array | null;
}

/**
 * Decodes a lifecycle CloudEvent: the bytes of an HTTP delivery's body, or a decoded queue
 * message (or redeemed hook) of the source `ankusa:lifecycle`, whose body is the event.
 * Throws `LifecycleEventError`.
 */
export function decodeLifecycleEvent(input: BodyInput | LifecycleCarrier): LifecycleEvent {
  if (isCarrier(input)) {
    if (input.sourceId !== LIFECYCLE_SOURCE) {
      throw new LifecycleEventError(
        'not_a_lifecycle_event',
        'source_id',
        `source_id: a lifecycle event comes from the source ${LIFECYCLE_SOURCE}`,
      );
    }
    if (input.body === null) {
      throw new TypeError('the message carries a claim: redeem it with toHook(message, claimClient) and pass the hook');
    }
    return decodeEvent(input.body);
  }
  return decodeEvent(toBytes(input));
}

function isCarrier(x: unknown): x is LifecycleCarrier {
  return (
    typeof x === 'object' && x !== null && !ArrayBuffer.isView(x) && !(x instanceof ArrayBuffer) && 'sourceId' in x
  );
}

function decodeEvent(bytes: Uint8Array): LifecycleEvent {
  const parsed = parseJson(bytes);
  if (!parsed) throw new LifecycleEventError('invalid_json', null, 'event: not UTF-8 JSON');
  const e = parsed.value;
  if (!isObject(e)) throw new LifecycleEventError('not_an_object', null, 'event: JSON, but not an object');
  if (own(e, 'specversion') !== '1.0') {
    throw new LifecycleEventError('unsupported_specversion', 'specversion', 'specversion: must be "1.0"');
  }
  const id = required(e, 'id');
  const source = required(e, 'source');
  const type = required(e, 'type');
  const time = own(e, 'time');
  if (typeof time !== 'string') throw invalid('time', 'a string');
  const subject = optional(e, 'subject');
  const datacontenttype = optional(e, 'datacontenttype');
  const traceparent = optional(e, 'traceparent');
  const data = own(e, 'data');
  if (data !== undefined && data !== null && !isObject(data)) throw invalid('data', 'an object or null');
  return {
    id,
    type,
    source,
    time,
    subject,
    specversion: '1.0',
    datacontenttype,
    traceparent,
    data: (data as Record<string, unknown> | null | undefined) ?? null,
    known: KNOWN.has(type),
  };
}

function invalid(field: string, expected: string): LifecycleEventError {
  return new LifecycleEventError('invalid_field', field, `${field}: must be ${expected}`);
}

function required(e: Record<string, unknown>, key: string): string {
  const v = own(e, key);
  if (typeof v !== 'string' || v === '') throw invalid(key, 'a non-empty string');
  return v;
}

function optional(e: Record<string, unknown>, key: string): string | null {
  const v = own(e, key);
  if (v === undefined || v === null) return null;
  if (typeof v !== 'string') throw invalid(key, 'a string or null');
  return v;
}
