/**
 * Claim references: `urn:ankusa:claim:v1:<tenant>:<claim_id>`, each part `[A-Za-z0-9_-]{1,64}`
 * — the form a queue message names a checked-in body by.
 */

import { InvalidClaimRefError } from './errors.js';

export interface ClaimRef {
  /** The reference as written. */
  urn: string;
  tenant: string;
  claimId: string;
}

// Anchored on both ends; JavaScript's `$` (without the m flag) matches only at the very end,
// so a trailing newline is refused.
const CLAIM_REF = /^urn:ankusa:claim:v1:([A-Za-z0-9_-]{1,64}):([A-Za-z0-9_-]{1,64})$/;

/** The tenant and claim id of a claim reference, or `null` when it is not one. */
export function matchClaimRef(ref: unknown): ClaimRef | null {
  if (typeof ref !== 'string' || ref.length > 200) return null;
  const m = CLAIM_REF.exec(ref);
  return m ? { urn: ref, tenant: m[1] as string, claimId: m[2] as string } : null;
}

/** Parses a claim reference; throws `InvalidClaimRefError` (field `claim`). */
export function parseClaimRef(ref: string): ClaimRef {
  const parsed = matchClaimRef(ref);
  if (!parsed) {
    throw new InvalidClaimRefError(
      'claim: not a reference of the form urn:ankusa:claim:v1:<tenant>:<claim_id> ([A-Za-z0-9_-]{1,64} each)',
    );
  }
  return parsed;
}
