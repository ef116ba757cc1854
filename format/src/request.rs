//! The edge's request grammars: which source (and tenant) a path names, and the W3C
//! `traceparent` header.

use ankusa_config::Routing;

/// Splits `{prefix}/:source` or `{prefix}/:tenant/:source`. The parts are slices of `path`
/// with no `/` in them; their charset is the caller's to check (`valid_id` for the tenant, the
/// source lookup for the source), so that each refusal keeps its own answer.
pub fn route<'a>(
    path: &'a str,
    prefix: &str,
    routing: Routing,
) -> Option<(Option<&'a str>, &'a str)> {
    let rest = if prefix == "/" {
        path.strip_prefix('/')?
    } else {
        path.strip_prefix(prefix)?.strip_prefix('/')?
    };
    let mut parts = rest.split('/');
    match routing {
        Routing::Path => {
            let source = parts.next()?;
            parts.next().is_none().then_some((None, source))
        }
        Routing::TenantPath => {
            let tenant = parts.next()?;
            let source = parts.next()?;
            parts.next().is_none().then_some((Some(tenant), source))
        }
    }
}

/// W3C traceparent: `version-traceid(32 hex)-parentid(16 hex)-flags(2 hex)`.
pub fn valid_traceparent(v: &str) -> bool {
    let parts: Vec<&str> = v.split('-').collect();
    let hex = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit());
    parts.len() >= 4
        && hex(parts[0], 2)
        && hex(parts[1], 32)
        && hex(parts[2], 16)
        && hex(parts[3], 2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes() {
        assert_eq!(
            route("/webhooks/gh", "/webhooks", Routing::Path),
            Some((None, "gh"))
        );
        assert_eq!(route("/webhooks/gh/x", "/webhooks", Routing::Path), None);
        assert_eq!(route("/webhooksgh", "/webhooks", Routing::Path), None);
        assert_eq!(
            route("/webhooks/acme/gh", "/webhooks", Routing::TenantPath),
            Some((Some("acme"), "gh"))
        );
        assert_eq!(
            route("/webhooks/acme", "/webhooks", Routing::TenantPath),
            None
        );
        assert_eq!(route("/in/gh", "/in", Routing::Path), Some((None, "gh")));
    }

    #[test]
    fn traceparent_grammar() {
        assert!(valid_traceparent(
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        ));
        assert!(!valid_traceparent("00-xyz-00f067aa0ba902b7-01"));
    }
}
