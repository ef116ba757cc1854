//! The hard limits of a filter program: how large an expression may be, and what one
//! evaluation may spend and build. The public ones are re-exported from the crate root.

/// Longest expression text, in bytes.
pub const MAX_SOURCE_BYTES: usize = 4096;
/// Most AST nodes after macro expansion (`x.all(v, p)` expands to about eight).
pub const MAX_NODES: usize = 512;
/// Deepest recursion the parser allows (nested parentheses, calls, list literals...).
pub const MAX_DEPTH: u16 = 32;
/// The cost limit callers use unless they have a reason to pick another.
pub const DEFAULT_MAX_COST: u64 = 100_000;
/// Largest string, list or map one evaluation may build, and largest output (strings by
/// bytes; lists and maps estimated at 16 bytes an element plus the bytes of their strings).
pub const MAX_VALUE_BYTES: usize = 1 << 20;
/// Most entries a `Kind::Headers` program may produce.
pub const MAX_HEADERS: usize = 64;

/// Macros inside macros multiply their iteration counts; two levels cover `list.exists(x,
/// x.items.all(i, ...))` while a third only serves blow-ups.
pub(crate) const MAX_COMPREHENSION_NESTING: usize = 2;
/// Checker and evaluator recurse over the tree; `a.b.c...` chains are not bounded by the
/// parser's depth, so the tree's own depth is capped to keep their stacks small.
pub(crate) const MAX_AST_DEPTH: usize = 128;
/// Equality and output conversion recurse into values; a body parsed by serde_json is at
/// most 128 deep, but an `Activation` may hold any `serde_json::Value`.
pub(crate) const MAX_VALUE_DEPTH: usize = 256;
/// The size estimate of one list element or map entry, before the bytes of its strings.
pub(crate) const ELEM_BYTES: usize = 16;
/// `regex` limits on a compiled `matches()` pattern and on its lazy DFA's cache.
pub(crate) const MAX_REGEX_BYTES: usize = 1 << 20;
/// Compiled pattern size per unit of `matches()` cost weight. When the lazy DFA gives up
/// (Unicode `\b` on non-ASCII text, a thrashing cache) the regex crate falls back to an NFA
/// simulation whose work per input byte grows with the pattern's size: measured up to
/// 5.5 µs a byte for a 1 MiB pattern in a release build. Weighting the scan by size keeps
/// the default budget's worst case near 35 ms whatever the pattern.
pub(crate) const REGEX_WEIGHT_UNIT: usize = 8 << 10;
