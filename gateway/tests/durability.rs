//! A 201 means the hook survives `kill -9`. Concurrent load, SIGKILL mid-load, restart on the
//! same data dir, and every id answered 201 must be in the store. Five cycles; zero loss is
//! the only pass.

mod common;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use serde_json::Value;

const CYCLES: usize = 5;
const CLIENTS: usize = 32;

/// Posts from `CLIENTS` tasks until told to stop; returns the ids answered 201.
async fn load(url: String, stop: tokio::sync::watch::Receiver<bool>) -> Vec<String> {
    let acked = Arc::new(Mutex::new(Vec::new()));
    let c = client();
    let mut tasks = Vec::new();
    for i in 0..CLIENTS {
        let (c, url, acked, stop) = (c.clone(), url.clone(), acked.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let mut n = 0u64;
            while !*stop.borrow() {
                n += 1;
                let body = format!(
                    "{{\"client\":{i},\"n\":{n},\"pad\":\"{}\"}}",
                    "x".repeat(900)
                );
                let Ok(resp) = c.post(&url).body(body).send().await else {
                    break;
                };
                if resp.status().as_u16() != 201 {
                    continue;
                }
                let Ok(v) = resp.json::<Value>().await else {
                    break;
                };
                if let Some(id) = v["id"].as_str() {
                    acked.lock().unwrap().push(id.to_string());
                }
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }

    acked.lock().unwrap().clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_acked_hook_survives_kill_9() {
    let mut g = Gateway::start("node: {roles: [edge]}\nsources:\n  s:\n    sinks: [{type: log}]\n");
    let mut all: Vec<String> = Vec::new();
    for cycle in 0..CYCLES {
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let loader = tokio::spawn(load(g.url("/webhooks/s"), stop_rx));
        // Kill at a different point of the load each cycle.
        tokio::time::sleep(Duration::from_millis(400 + 150 * cycle as u64)).await;
        g.kill9();
        let _ = stop_tx.send(true);
        let acked = loader.await.unwrap();
        assert!(
            !acked.is_empty(),
            "cycle {cycle}: nothing was acknowledged:\n{}",
            g.log_tail()
        );
        all.extend(acked.iter().cloned());

        // Offline check on the killed process's data dir, then restart for the next cycle.
        let ids = g.dir.path().join(format!("ids-{cycle}.txt"));
        std::fs::write(&ids, all.join("\n")).unwrap();
        let out = g.run_subcommand(&["store", "check-ids", ids.to_str().unwrap()]);
        let report = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "cycle {cycle}: acknowledged hooks missing after kill -9:\n{report}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        eprintln!(
            "cycle {cycle}: {} acked this cycle, {} in all, none missing",
            acked.len(),
            all.len()
        );
        g.spawn_again();
        g.wait_ready(Duration::from_secs(30));
    }

    // Through the admin API of the restarted process too, and no id was issued twice.
    let unique: HashSet<&String> = all.iter().collect();
    assert_eq!(unique.len(), all.len(), "an id was answered 201 twice");
    let c = client();
    let wal: Value = g.admin_json(&c, "/v1/wal").await;
    assert!(wal["hooks"].as_i64().unwrap() >= all.len() as i64, "{wal}");
    for id in all.iter().step_by(all.len() / 50 + 1) {
        let r = c
            .get(g.admin_url(&format!("/v1/hooks/{id}")))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 200, "hook {id}");
    }
}

/// A torn WAL tail (the last record half written) is dropped; everything before it opens.
/// Damage in the middle refuses to open instead of starting empty.
#[tokio::test]
async fn torn_tail_is_tolerated_and_damage_refuses_to_open() {
    let mut g = Gateway::start("node: {roles: [edge]}\nsources:\n  s:\n    sinks: [{type: log}]\n");
    let c = client();
    let mut ids = Vec::new();
    for i in 0..200 {
        let r = post_to(&c, &g.url("/webhooks/s"), format!("{{\"i\":{i}}}")).await;
        let v: Value = r.json().await.unwrap();
        ids.push(v["id"].as_str().unwrap().to_string());
    }
    g.kill9();
    let store = g.data_dir().join("default").join("store");
    // Opening the store replays and retires the WAL, so each damage case gets its own copy.
    let pristine = g.dir.path().join("store-copy");
    copy_dir(&store, &pristine);
    let wal = std::fs::read_dir(&store)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .max_by_key(|p| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0))
        .expect("a WAL file");
    let len = std::fs::metadata(&wal).unwrap().len();
    assert!(len > 1000, "WAL holds the hooks");

    // Torn tail: cut the last few bytes of the last record.
    let f = std::fs::OpenOptions::new().write(true).open(&wal).unwrap();
    f.set_len(len - 7).unwrap();
    drop(f);
    let list = g.dir.path().join("ids.txt");
    std::fs::write(&list, ids[..ids.len() - 1].join("\n")).unwrap();
    let out = g.run_subcommand(&["store", "check-ids", list.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    // Damage before the tail: flip bytes in the middle of the WAL.
    std::fs::remove_dir_all(&store).unwrap();
    copy_dir(&pristine, &store);
    let mut bytes = std::fs::read(&wal).unwrap();
    let mid = bytes.len() / 2;
    for b in &mut bytes[mid..mid + 64] {
        *b ^= 0xa5;
    }
    std::fs::write(&wal, &bytes).unwrap();
    let out = g.run_subcommand(&["store", "stats"]);
    assert!(
        !out.status.success(),
        "a damaged WAL must refuse to open, got:\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.to_lowercase().contains("corrupt") || err.contains("cannot open store"),
        "{err}"
    );
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}
