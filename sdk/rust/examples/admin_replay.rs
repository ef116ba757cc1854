//! Replays a tenant's dead letters with the admin client and follows the job to its end.
//!
//!     ANKUSA_ADMIN_URL=https://ankusa-0.ankusa-pods:4002 ANKUSA_ADMIN_TOKEN=... \
//!     ANKUSA_ADMIN_CA=/etc/ankusa/admin-ca.crt \
//!         cargo run -p ankusa-sdk --example admin_replay -- acme

use std::process::ExitCode;
use std::time::Duration;

use ankusa_sdk::{AdminClient, AdminError, DlqQuery, ReplayFilter, ReplayRequest, ReplayState};

#[tokio::main]
async fn main() -> ExitCode {
    let tenant = std::env::args().nth(1).unwrap_or_else(|| "default".into());
    let url = std::env::var("ANKUSA_ADMIN_URL").unwrap_or_else(|_| "http://127.0.0.1:4002".into());
    let token = std::env::var("ANKUSA_ADMIN_TOKEN").unwrap_or_default();
    let mut admin = AdminClient::new(url, token);
    // An admin API behind admin.tls: trust the Gateway's own CA, and only it.
    if let Ok(ca) = std::env::var("ANKUSA_ADMIN_CA") {
        admin = match admin.ca_bundle_file(&ca) {
            Ok(a) => a,
            Err(e) => {
                eprintln!("{e}");
                return ExitCode::from(2);
            }
        };
    }
    match replay(&admin, &tenant).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // 408, 429, 5xx and no answer are worth another try; the rest need a fix.
            eprintln!("{e} (retryable: {})", e.retryable);
            ExitCode::FAILURE
        }
    }
}

async fn replay(admin: &AdminClient, tenant: &str) -> Result<(), AdminError> {
    // What is dead, newest first (follow next_cursor for the next page).
    let page = admin
        .list_dlq(&DlqQuery {
            tenant: Some(tenant.into()),
            limit: Some(10),
            ..Default::default()
        })
        .await?;
    for e in &page.entries {
        let reason = e.reason.as_deref().unwrap_or("-");
        println!("dead: {} {}/sinks[{}] {reason}", e.id, e.source_id, e.sink);
    }
    if page.entries.is_empty() {
        println!("no dead letters for {tenant}");
        return Ok(());
    }

    // A paced move of every dead letter of the tenant back to delivery.
    let filter = ReplayFilter {
        tenant: Some(tenant.into()),
        ..Default::default()
    };
    let job = admin
        .create_replay(&ReplayRequest {
            rate: Some(300),
            ..ReplayRequest::dlq(filter)
        })
        .await?;
    println!("replay {} created", job.id);
    loop {
        let job = admin.get_replay(&job.id).await?;
        println!(
            "{:?}: moved {}, delivered {}, failed {}, outstanding {}",
            job.state, job.moved, job.delivered, job.failed, job.outstanding
        );
        if job.done || job.state == ReplayState::Cancelled {
            return Ok(());
        }
        if job.state == ReplayState::Paused {
            // It paused itself: its deliveries keep dying. Stop it and look at the sink.
            println!("paused: {}", job.reason.as_deref().unwrap_or("-"));
            admin.patch_replay(&job.id, ReplayState::Cancelled).await?;
            return Ok(());
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}
