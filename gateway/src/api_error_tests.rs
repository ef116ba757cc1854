//! `ApiError` against docs/admin-api.md: the doc's three error tables (the admin API's
//! `Errors`, `Ingest status codes`, the claim port's) are parsed here, and each variant's
//! status, extra fields, `Retry-After` and `Allow` must be what its table says, and each code a
//! table lists must be one a variant answers. A change to either side alone fails.

use std::collections::{BTreeSet, HashMap};

use axum::response::IntoResponse;

use super::*;

const DOC: &str = include_str!("../../docs/admin-api.md");

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Table {
    Admin,
    Ingest,
    Claim,
}

/// One documented error: its status, the fields beside `error`, `Retry-After` (`Some("<s>")`
/// when it varies) and whether `Allow: POST` is sent.
#[derive(Debug, Clone, PartialEq)]
struct Row {
    status: u16,
    extra: BTreeSet<String>,
    retry_after: Option<String>,
    allow: bool,
}

/// The lines of the table that follows `heading` (the first table after it).
fn table(heading: &str) -> Vec<&'static str> {
    let from = DOC
        .find(heading)
        .unwrap_or_else(|| panic!("{heading} is not in the doc"));
    DOC[from..]
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .skip(2)
        .collect()
}

fn backticked(cell: &str) -> Vec<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .map(String::from)
        .collect()
}

/// Every documented error of a table, by code.
fn documented(t: Table) -> HashMap<String, Vec<Row>> {
    let heading = match t {
        Table::Admin => "## Errors",
        Table::Ingest => "## Ingest status codes",
        Table::Claim => "**Range.**",
    };
    let mut out: HashMap<String, Vec<Row>> = HashMap::new();
    for line in table(heading) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let status: u16 = cells[1].trim_matches('`').parse().expect("a status");
        let retry_after = line.split_once("Retry-After: ").map(|(_, rest)| {
            rest.split(['`', ' ', ';', '.'])
                .next()
                .unwrap_or("")
                .to_string()
        });
        let allow = line.contains("`Allow: POST`");
        let (codes, extra) = match line.split_once("{\"error\":\"") {
            // `{"error":"<code>","<field>":...}` (ingest, claim port).
            Some((_, json)) => {
                let (code, rest) = json.split_once('"').expect("a quoted code");
                let object = rest.split('}').next().unwrap_or("");
                let extra: BTreeSet<String> = object
                    .split('"')
                    .collect::<Vec<_>>()
                    .windows(2)
                    .filter(|w| w[1].starts_with(':'))
                    .map(|w| w[0].to_string())
                    .collect();
                (vec![code.to_string()], extra)
            }
            // `| status | `code`, `code` | `field`, `field` | when |` (admin API).
            None if t == Table::Admin => (
                backticked(cells[2]),
                backticked(cells[3]).into_iter().collect(),
            ),
            None => continue,
        };
        for code in codes {
            out.entry(code).or_default().push(Row {
                status,
                extra: extra.clone(),
                retry_after: retry_after.clone(),
                allow,
            });
        }
    }
    out
}

/// Each variant, as each listener answers it.
fn answered() -> Vec<(Table, ApiError)> {
    use ApiError::*;
    use Table::*;
    vec![
        (Admin, ApiError::filter("limit", "must be 1..=1000")),
        (
            Admin,
            InvalidBody {
                message: "m".into(),
            },
        ),
        (Admin, InvalidId),
        (
            Admin,
            InvalidState {
                message: "job is completed".into(),
            },
        ),
        (
            Admin,
            InvalidConfig {
                field: None,
                message: "m".into(),
            },
        ),
        (
            Admin,
            RetryExceedsClaimExpiry {
                field: Some("sources.s.retry.max_elapsed_ms".into()),
                message: "m".into(),
            },
        ),
        (Admin, Unauthorized),
        (Admin, ApiError::forbidden("dlq:write")),
        (Admin, TokenRequired { message: "m" }),
        (Admin, HookNotFound),
        (Admin, ReplayNotFound),
        (Admin, ArchiveNotConfigured),
        (Admin, HookNotArchived),
        (Admin, RoleNotEnabled { role: "dispatch" }),
        (Admin, TooManyJobs { max_live_jobs: 64 }),
        (Admin, ArchiveCorrupt),
        (
            Admin,
            StoreUnavailable {
                class: Some("io_error"),
            },
        ),
        (Admin, ArchiveUnavailable),
        (Admin, WalDisabled),
        (Ingest, ClientRateLimited { retry_after: 2 }),
        (
            Ingest,
            InvalidHeader {
                header: "x-forwarded-for".into(),
            },
        ),
        (Ingest, QuarantineRateLimited { retry_after: 3 }),
        (Ingest, QuarantineFull),
        (Ingest, PayloadTooLarge { max_body_bytes: 8 }),
        (Ingest, BodyReadFailed { reason: "timeout" }),
        (Ingest, InvalidSignature),
        (Ingest, NotFound),
        (Ingest, InvalidTenant),
        (Ingest, UnknownSource),
        (Ingest, MethodNotAllowed),
        (Ingest, RateLimited { retry_after: 4 }),
        (Ingest, Overload),
        (Ingest, StoreWriteFailed),
        (Ingest, DlqFull),
        (Ingest, IntakeUnavailable { retry_after: 2 }),
        (Ingest, IntakePending { retry_after: 2 }),
        (Ingest, SinkUnavailable { retry_after: 2 }),
        (Ingest, OwnerUnavailable { retry_after: 2 }),
        (Claim, Forbidden { scope: None }),
        (Claim, ClaimNotFound),
        (Claim, StoreUnavailable { class: None }),
        (Claim, StoreForbidden),
        (Claim, AuthUnavailable),
    ]
}

/// Numbers the variants; adding one fails to compile here until `VARIANTS` and `answered`
/// follow.
fn variant(e: &ApiError) -> usize {
    use ApiError::*;
    match e {
        InvalidFilter { .. } => 0,
        InvalidBody { .. } => 1,
        InvalidId => 2,
        InvalidState { .. } => 3,
        InvalidConfig { .. } => 4,
        InvalidHeader { .. } => 5,
        BodyReadFailed { .. } => 6,
        Unauthorized => 7,
        InvalidSignature => 8,
        Forbidden { .. } => 9,
        TokenRequired { .. } => 10,
        NotFound => 11,
        InvalidTenant => 12,
        UnknownSource => 13,
        HookNotFound => 14,
        ReplayNotFound => 15,
        ClaimNotFound => 16,
        ArchiveNotConfigured => 17,
        HookNotArchived => 18,
        MethodNotAllowed => 19,
        RoleNotEnabled { .. } => 20,
        PayloadTooLarge { .. } => 21,
        ClientRateLimited { .. } => 22,
        RateLimited { .. } => 23,
        QuarantineRateLimited { .. } => 24,
        TooManyJobs { .. } => 25,
        ArchiveCorrupt => 26,
        Overload => 27,
        StoreUnavailable { .. } => 28,
        StoreWriteFailed => 29,
        DlqFull => 30,
        QuarantineFull => 31,
        IntakeUnavailable { .. } => 32,
        IntakePending { .. } => 33,
        ArchiveUnavailable => 34,
        WalDisabled => 35,
        SinkUnavailable { .. } => 36,
        RetryExceedsClaimExpiry { .. } => 37,
        StoreForbidden => 38,
        OwnerUnavailable { .. } => 39,
        AuthUnavailable => 40,
    }
}
const VARIANTS: usize = 41;

#[test]
fn every_variant_answers_as_its_table_documents() {
    let answered = answered();
    let seen: BTreeSet<usize> = answered.iter().map(|(_, e)| variant(e)).collect();
    assert_eq!(seen, (0..VARIANTS).collect(), "a variant is not checked");
    for (t, e) in &answered {
        let rows = documented(*t);
        let rows = rows
            .get(e.code())
            .unwrap_or_else(|| panic!("{t:?}: {} is not documented", e.code()));
        let want = Row {
            status: e.status().as_u16(),
            extra: e.extra().keys().cloned().collect(),
            retry_after: e.retry_after().map(|s| s.to_string()),
            allow: *e == ApiError::MethodNotAllowed,
        };
        for row in rows {
            let mut row = row.clone();
            // `<s>`: the doc says it varies; the variant carries it.
            if row.retry_after.as_deref() == Some("<s>") && want.retry_after.is_some() {
                row.retry_after = want.retry_after.clone();
            }
            assert_eq!(row, want, "{t:?}: {}", e.code());
        }
    }
}

#[test]
fn every_documented_code_is_answered() {
    let answered = answered();
    for t in [Table::Admin, Table::Ingest, Table::Claim] {
        let docs = documented(t);
        assert!(docs.len() >= 3, "{t:?}: the table was not found");
        for code in docs.keys() {
            assert!(
                answered.iter().any(|(at, e)| *at == t && e.code() == code),
                "{t:?}: {code} is documented but no variant answers it"
            );
        }
    }
}

#[tokio::test]
async fn the_response_carries_status_body_and_headers() {
    for (_, e) in answered() {
        let r = e.clone().into_response();
        assert_eq!(r.status(), e.status(), "{}", e.code());
        let header = |name: header::HeaderName| {
            r.headers()
                .get(name)
                .map(|v| v.to_str().unwrap().to_string())
        };
        assert_eq!(
            header(header::RETRY_AFTER),
            e.retry_after().map(|s| s.to_string()),
            "{}",
            e.code()
        );
        assert_eq!(
            header(header::ALLOW).is_some(),
            e == ApiError::MethodNotAllowed
        );
        let body = axum::body::to_bytes(r.into_body(), 1 << 16).await.unwrap();
        let body: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(body, e.body(), "{}", e.code());
        assert_eq!(body["error"], e.code());
    }
    // A refused config without a field says so (`"field": null`); a scope is named.
    let e = ApiError::InvalidConfig {
        field: None,
        message: "config is not valid YAML".into(),
    };
    assert_eq!(
        e.body(),
        serde_json::json!({"error": "invalid_config", "field": null, "message": "config is not valid YAML"})
    );
    assert_eq!(
        ApiError::forbidden("tenant:*").body(),
        serde_json::json!({"error": "forbidden", "scope": "tenant:*"})
    );
    assert_eq!(
        ApiError::Forbidden { scope: None }.body(),
        serde_json::json!({"error": "forbidden"})
    );
    // `Retry-After` is at least 1 second.
    assert_eq!(
        ApiError::RateLimited { retry_after: 0 }.retry_after(),
        Some(1)
    );
}

#[test]
fn a_store_error_answers_its_class_only() {
    let e: ApiError = ankusa_store::StoreError::Unavailable {
        class: "no_space",
        message: "/var/lib/ankusa/store/000012.sst: No space left on device".into(),
    }
    .into();
    assert_eq!(
        e,
        ApiError::StoreUnavailable {
            class: Some("no_space")
        }
    );
    assert!(!e.body().to_string().contains("/var/lib"));
}
