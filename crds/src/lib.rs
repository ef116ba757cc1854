//! Ankusa's custom resources.
