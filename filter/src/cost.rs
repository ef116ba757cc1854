//! The cost meter of one evaluation and the size check of built values. Every charge is made
//! before the work it pays for, so an expression over budget stops before allocating.

use crate::error::EvalError;
use crate::limits::MAX_VALUE_BYTES;

pub(crate) struct Meter {
    used: u64,
    max: u64,
}

impl Meter {
    pub(crate) fn new(max: u64) -> Self {
        Meter { used: 0, max }
    }

    pub(crate) fn charge(&mut self, units: u64) -> Result<(), EvalError> {
        self.used = self.used.saturating_add(units);
        if self.used > self.max {
            Err(EvalError::CostExceeded)
        } else {
            Ok(())
        }
    }

    /// Charges `n` units: one per list element or map entry created, or per item compared.
    pub(crate) fn charge_count(&mut self, n: usize) -> Result<(), EvalError> {
        self.charge(u64::try_from(n).unwrap_or(u64::MAX))
    }

    /// Charges for scanning or creating a string (or bytes) of `len` bytes: ceil(len / 8).
    pub(crate) fn charge_len(&mut self, len: usize) -> Result<(), EvalError> {
        self.charge(u64::try_from(len).unwrap_or(u64::MAX).div_ceil(8))
    }

    #[cfg(test)]
    pub(crate) fn used(&self) -> u64 {
        self.used
    }
}

/// Refuses a value whose (estimated) size passes `MAX_VALUE_BYTES`.
pub(crate) fn check_size(bytes: usize) -> Result<(), EvalError> {
    if bytes > MAX_VALUE_BYTES {
        Err(EvalError::ValueTooLarge)
    } else {
        Ok(())
    }
}
