/**
 * What every form of a hook shares — an HTTP delivery, a queue message, a redeemed hook — and
 * the two decisions a consumer makes on it: the key to dedupe on, and whether to trust it.
 */

/** The gateway's ingest verification of the provider's signature. */
export interface Verification {
  /** `ok`, `failed` or `skipped`; kept as sent, even a status this SDK does not know. */
  status: string;
  /** `true` when the hook was let through despite a failed check (fail open, flagged). */
  flagged: boolean;
}

/** The fields `idempotencyKey` and `isTrusted` read. */
export interface HookIdentity {
  idempotencyKey: string;
  replayId: string | null;
  verification: Verification | null;
}

export interface IdempotencyKeyOptions {
  /**
   * Append `#replay:<replay_id>` when the hook is a replay, so a replay is processed again
   * rather than dropped as a duplicate. Default `false`.
   */
  includeReplay?: boolean;
}

/** The key to dedupe on: the gateway's idempotency key, with the replay id when asked. */
export function idempotencyKey(hook: HookIdentity, options: IdempotencyKeyOptions = {}): string {
  if (options.includeReplay && hook.replayId) return `${hook.idempotencyKey}#replay:${hook.replayId}`;
  return hook.idempotencyKey;
}

/**
 * Whether the gateway verified the provider's signature: `true` only for status `ok` and not
 * flagged. A failed, skipped or flagged hook, an unknown status and a missing verification (a
 * node older than the field) are all `false`.
 */
export function isTrusted(hook: Pick<HookIdentity, 'verification'>): boolean {
  const v = hook.verification;
  return v != null && v.status === 'ok' && v.flagged === false;
}
