//! Header lookup over whatever a framework hands a receiver: an [`http::HeaderMap`], a slice
//! or `Vec` of name/value pairs, a `HashMap` or `BTreeMap`. Names are matched without regard to
//! ASCII case, as HTTP defines them.

use std::collections::{BTreeMap, HashMap};
use std::hash::BuildHasher;

/// Read access to a request's headers, names case-insensitive.
pub trait Headers {
    /// The first value of `name`, when present and readable as UTF-8 (a value that is not
    /// counts as absent).
    fn header(&self, name: &str) -> Option<&str>;

    /// Whether `name` is present at all, readable or not (a flag fails closed on presence).
    fn has_header(&self, name: &str) -> bool {
        self.header(name).is_some()
    }
}

impl<T: Headers + ?Sized> Headers for &T {
    fn header(&self, name: &str) -> Option<&str> {
        (**self).header(name)
    }
    fn has_header(&self, name: &str) -> bool {
        (**self).has_header(name)
    }
}

impl Headers for http::HeaderMap {
    fn header(&self, name: &str) -> Option<&str> {
        // `HeaderMap::get` lowercases a `&str` name itself; UTF-8 rather than `to_str`'s visible
        // ASCII so an obs-text value reads as what was sent.
        self.get(name)
            .and_then(|v| std::str::from_utf8(v.as_bytes()).ok())
    }
    fn has_header(&self, name: &str) -> bool {
        self.contains_key(name)
    }
}

fn find<'a, K, V>(pairs: impl IntoIterator<Item = (&'a K, &'a V)>, name: &str) -> Option<&'a str>
where
    K: AsRef<str> + ?Sized + 'a,
    V: AsRef<str> + ?Sized + 'a,
{
    pairs
        .into_iter()
        .find(|(k, _)| k.as_ref().eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_ref())
}

impl<K: AsRef<str>, V: AsRef<str>> Headers for [(K, V)] {
    fn header(&self, name: &str) -> Option<&str> {
        find(self.iter().map(|(k, v)| (k, v)), name)
    }
}

impl<K: AsRef<str>, V: AsRef<str>, const N: usize> Headers for [(K, V); N] {
    fn header(&self, name: &str) -> Option<&str> {
        self.as_slice().header(name)
    }
}

impl<K: AsRef<str>, V: AsRef<str>> Headers for Vec<(K, V)> {
    fn header(&self, name: &str) -> Option<&str> {
        self.as_slice().header(name)
    }
}

impl<K: AsRef<str>, V: AsRef<str>, S: BuildHasher> Headers for HashMap<K, V, S> {
    fn header(&self, name: &str) -> Option<&str> {
        find(self.iter(), name)
    }
}

impl<K: AsRef<str>, V: AsRef<str>> Headers for BTreeMap<K, V> {
    fn header(&self, name: &str) -> Option<&str> {
        find(self.iter(), name)
    }
}

/// A header's value when present and not empty: the contract treats an empty value as absent.
pub(crate) fn non_empty<'a, H: Headers + ?Sized>(h: &'a H, name: &str) -> Option<&'a str> {
    h.header(name).filter(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_in_any_case_over_every_container() {
        let pairs = [("Webhook-Id", "a"), ("X-ANKUSA-ID", "b")];
        assert_eq!(pairs.header("webhook-id"), Some("a"));
        assert_eq!(pairs.as_slice().header("x-ankusa-id"), Some("b"));
        let v: Vec<(String, String)> = vec![("K".into(), "v".into())];
        assert_eq!(v.header("k"), Some("v"));
        let m: HashMap<&str, &str> = [("Content-Type", "x")].into_iter().collect();
        assert_eq!(m.header("content-type"), Some("x"));
        let mut hm = http::HeaderMap::new();
        hm.insert("webhook-id", "z".parse().unwrap());
        assert_eq!(hm.header("Webhook-ID"), Some("z"));
        assert!(hm.has_header("WEBHOOK-ID"));
        // By reference, as generic callers pass it.
        fn owned<H: Headers>(h: H, name: &str) -> Option<String> {
            h.header(name).map(String::from)
        }
        assert_eq!(owned(&hm, "webhook-id").as_deref(), Some("z"));
    }
}
