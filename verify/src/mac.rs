//! Shared HMAC helper: HMAC-SHA256 / HMAC-SHA512 / HMAC-SHA1 keyed once per secret (the
//! keyed state is cloned per message), computed over a signed string given as parts, and a
//! constant-time comparison against the candidate signatures taken from a request.

use ankusa_config::{HmacHash, MAX_SECRETS};
use hmac::{Hmac, Mac};
use subtle::ConstantTimeEq;

use crate::VerifyFailure;

/// One keyed HMAC. Deliberately not `Debug`: it holds key material.
#[derive(Clone)]
pub(crate) enum MacKey {
    Sha256(Hmac<sha2::Sha256>),
    Sha512(Hmac<sha2::Sha512>),
    Sha1(Hmac<sha1::Sha1>),
}

impl MacKey {
    /// `None` only if the HMAC implementation refuses the key (it accepts every length).
    pub(crate) fn new(hash: HmacHash, key: &[u8]) -> Option<MacKey> {
        Some(match hash {
            HmacHash::Sha256 => MacKey::Sha256(Mac::new_from_slice(key).ok()?),
            HmacHash::Sha512 => MacKey::Sha512(Mac::new_from_slice(key).ok()?),
            HmacHash::Sha1 => MacKey::Sha1(Mac::new_from_slice(key).ok()?),
        })
    }

    /// The MAC of the concatenation of `parts`.
    pub(crate) fn compute(&self, parts: &[&[u8]]) -> Vec<u8> {
        fn run<M: Mac + Clone>(keyed: &M, parts: &[&[u8]]) -> Vec<u8> {
            let mut m = keyed.clone();
            for p in parts {
                m.update(p);
            }
            m.finalize().into_bytes().to_vec()
        }
        match self {
            MacKey::Sha256(m) => run(m, parts),
            MacKey::Sha512(m) => run(m, parts),
            MacKey::Sha1(m) => run(m, parts),
        }
    }
}

/// Constant-time equality (lengths are not secret: a length mismatch is simply unequal).
pub(crate) fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    a.ct_eq(b).into()
}

/// The keys of a rotation list, newest first, or the reason they cannot be used.
#[derive(Clone)]
pub(crate) struct KeyRing(Result<Vec<MacKey>, VerifyFailure>);

impl KeyRing {
    /// Keys every secret with `decode` (secret text → key bytes). Fails closed
    /// (`BadSecret`) on an empty list, more than `MAX_SECRETS`, a secret that does not decode,
    /// or an empty key: one unusable secret makes the whole list unusable.
    pub(crate) fn build(
        hash: HmacHash,
        secrets: &[impl AsRef<str>],
        decode: impl Fn(&str) -> Result<Vec<u8>, VerifyFailure>,
    ) -> KeyRing {
        if secrets.is_empty() || secrets.len() > MAX_SECRETS {
            return KeyRing(Err(VerifyFailure::BadSecret));
        }
        let keys = secrets
            .iter()
            .map(|s| {
                let key = decode(s.as_ref())?;
                if key.is_empty() {
                    return Err(VerifyFailure::BadSecret);
                }
                MacKey::new(hash, &key).ok_or(VerifyFailure::BadSecret)
            })
            .collect();
        KeyRing(keys)
    }

    /// Raw keys: each secret's own bytes.
    pub(crate) fn raw(hash: HmacHash, secrets: &[impl AsRef<str>]) -> KeyRing {
        KeyRing::build(hash, secrets, |s| Ok(s.as_bytes().to_vec()))
    }

    pub(crate) fn len(&self) -> usize {
        self.0.as_ref().map_or(0, Vec::len)
    }

    /// The usable keys, or `BadSecret`.
    pub(crate) fn keys(&self) -> Result<&[MacKey], VerifyFailure> {
        self.0.as_deref().map_err(Clone::clone)
    }
}

/// Index of the first key whose MAC over `parts` equals one of `candidates` (every key is
/// tried; each comparison is constant-time).
pub(crate) fn find_match(
    keys: &[MacKey],
    parts: &[&[u8]],
    candidates: &[Vec<u8>],
) -> Option<usize> {
    if candidates.is_empty() {
        return None;
    }
    keys.iter().position(|k| {
        let expected = k.compute(parts);
        // No short-circuit across candidates: the position of a match stays untimed.
        candidates
            .iter()
            .fold(false, |hit, c| ct_eq(&expected, c) | hit)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    // RFC 4231 test case 2 (HMAC-SHA256 / HMAC-SHA512, key "Jefe") and RFC 2202 test case 2
    // (HMAC-SHA1, key "Jefe"), data "what do ya want for nothing?".
    #[test]
    fn rfc_vectors() {
        let data: &[&[u8]] = &[b"what do ya want ", b"for nothing?"];
        let h = |hash| {
            hex::encode(
                MacKey::new(hash, b"Jefe")
                    .map(|k| k.compute(data))
                    .unwrap_or_default(),
            )
        };
        assert_eq!(
            h(HmacHash::Sha256),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        assert_eq!(
            h(HmacHash::Sha512),
            "164b7a7bfcf819e2e395fbe73b56e0a387bd64222e831fd610270cd7ea2505549758bf75c05a994a6d034f65f8f0e6fdcaeab1a34d4a6b4b636e070a38bce737"
        );
        assert_eq!(
            h(HmacHash::Sha1),
            "effcdf6ae5eb2fa2d27416d5f184df9c259a7c79"
        );
    }

    #[test]
    fn ct_eq_lengths() {
        assert!(ct_eq(b"abc", b"abc"));
        assert!(!ct_eq(b"abc", b"abd"));
        assert!(!ct_eq(b"abc", b"ab"));
        assert!(!ct_eq(b"", b"a"));
    }

    #[test]
    fn keyring_fails_closed() {
        let none: [&str; 0] = [];
        assert_eq!(
            KeyRing::raw(HmacHash::Sha256, &none).keys().err(),
            Some(VerifyFailure::BadSecret)
        );
        let with_empty = ["ok", ""];
        assert_eq!(
            KeyRing::raw(HmacHash::Sha256, &with_empty).keys().err(),
            Some(VerifyFailure::BadSecret)
        );
        let nine = ["k"; 9];
        assert_eq!(
            KeyRing::raw(HmacHash::Sha256, &nine).keys().err(),
            Some(VerifyFailure::BadSecret)
        );
        let eight = ["k"; 8];
        assert_eq!(KeyRing::raw(HmacHash::Sha256, &eight).len(), 8);
    }

    #[test]
    fn near_misses_do_not_match() {
        let ring = KeyRing::raw(HmacHash::Sha256, &["k"]);
        let keys = ring.keys().unwrap_or_default();
        let good = keys[0].compute(&[b"msg"]);
        assert_eq!(
            find_match(keys, &[b"msg"], std::slice::from_ref(&good)),
            Some(0)
        );
        let mut last_bit = good.clone();
        if let Some(b) = last_bit.last_mut() {
            *b ^= 1;
        }
        let truncated = good[..good.len() - 1].to_vec();
        let extended = [good.clone(), vec![0]].concat();
        for bad in [last_bit, truncated, extended, vec![good[0]]] {
            assert_eq!(find_match(keys, &[b"msg"], &[bad]), None);
        }
    }

    #[test]
    fn no_candidates_never_match() {
        let ring = KeyRing::raw(HmacHash::Sha256, &["k"]);
        let keys = ring.keys().unwrap_or_default();
        assert_eq!(find_match(keys, &[b"x"], &[]), None);
        assert_eq!(find_match(keys, &[b"x"], &[vec![]]), None);
    }
}
