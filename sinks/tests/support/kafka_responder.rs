//! A Kafka broker of the test's own, small enough to read: it speaks just the requests a
//! librdkafka producer sends to a plaintext broker (ApiVersions, Metadata v1, Produce v3) and
//! answers them so as to make librdkafka follow a broker advertised *later*. Until the first
//! Produce, Metadata names only this broker (node 1, on 127.0.0.1) as the leader of the test's
//! topic; every Produce is answered NOT_LEADER_OR_FOLLOWER; from then on Metadata names node 2,
//! at `later`, as the leader, which librdkafka then connects to. A counting listener on `later`
//! (`common::Counter`) tells the test whether it did.

#![allow(dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const API_PRODUCE: i16 = 0;
const API_FETCH: i16 = 1;
const API_METADATA: i16 = 3;
const API_VERSIONS: i16 = 18;
const NOT_LEADER_OR_FOLLOWER: i16 = 6;

struct Shared {
    topic: String,
    port: u16,
    /// Where node 2 is advertised once a Produce has been seen.
    later: (String, u16),
    produced: AtomicBool,
    metadata: AtomicUsize,
}

/// The responder: listens on 127.0.0.1; stops on drop.
pub struct Responder {
    pub port: u16,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Responder {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Responder {
    pub async fn start(topic: &str, later: (&str, u16)) -> Responder {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let shared = Arc::new(Shared {
            topic: topic.to_string(),
            port,
            later: (later.0.to_string(), later.1),
            produced: AtomicBool::new(false),
            metadata: AtomicUsize::new(0),
        });
        let s = shared.clone();
        let task = tokio::spawn(async move {
            while let Ok((conn, _)) = listener.accept().await {
                tokio::spawn(serve(conn, s.clone()));
            }
        });
        Responder { port, shared, task }
    }

    /// Whether a Produce arrived (after which node 2 is advertised).
    pub fn produced(&self) -> bool {
        self.shared.produced.load(Ordering::SeqCst)
    }

    pub fn metadata_requests(&self) -> usize {
        self.shared.metadata.load(Ordering::SeqCst)
    }
}

/// Answers requests on one connection until it closes or sends something unexpected.
async fn serve(mut conn: TcpStream, s: Arc<Shared>) {
    loop {
        let mut len = [0u8; 4];
        if conn.read_exact(&mut len).await.is_err() {
            return;
        }
        let len = i32::from_be_bytes(len);
        if !(8..=1 << 20).contains(&len) {
            return;
        }
        let mut req = vec![0u8; len as usize];
        if conn.read_exact(&mut req).await.is_err() {
            return;
        }
        let api = i16::from_be_bytes([req[0], req[1]]);
        let version = i16::from_be_bytes([req[2], req[3]]);
        let correlation = &req[4..8];
        let body = match api {
            API_VERSIONS => api_versions(version),
            API_METADATA => {
                s.metadata.fetch_add(1, Ordering::SeqCst);
                metadata(&s)
            }
            API_PRODUCE => {
                s.produced.store(true, Ordering::SeqCst);
                produce(&s.topic)
            }
            _ => return,
        };
        // Response header v0 (the correlation id) for every answer here: ApiVersions always
        // uses it, and Metadata v1 and Produce v3 are not flexible versions.
        let mut out = Vec::with_capacity(8 + body.len());
        out.extend_from_slice(&((4 + body.len()) as i32).to_be_bytes());
        out.extend_from_slice(correlation);
        out.extend_from_slice(&body);
        if conn.write_all(&out).await.is_err() {
            return;
        }
    }
}

fn i16b(v: &mut Vec<u8>, x: i16) {
    v.extend_from_slice(&x.to_be_bytes());
}
fn i32b(v: &mut Vec<u8>, x: i32) {
    v.extend_from_slice(&x.to_be_bytes());
}
fn i64b(v: &mut Vec<u8>, x: i64) {
    v.extend_from_slice(&x.to_be_bytes());
}
fn string(v: &mut Vec<u8>, s: &str) {
    i16b(v, s.len() as i16);
    v.extend_from_slice(s.as_bytes());
}

/// The APIs offered: ApiVersions 0-3, Metadata 1, Produce 3 (message format v2, so records
/// with headers), and Fetch 4, never served, whose presence librdkafka's message-format-v2
/// feature also requires.
const OFFERED: [(i16, i16, i16); 4] = [
    (API_PRODUCE, 3, 3),
    (API_FETCH, 4, 4),
    (API_METADATA, 1, 1),
    (API_VERSIONS, 0, 3),
];

fn api_versions(version: i16) -> Vec<u8> {
    let mut v = Vec::new();
    i16b(&mut v, 0);
    if version >= 3 {
        // Flexible: a compact array (length + 1 as an unsigned varint, here one byte), a
        // tagged-field count (0) after each entry and after the body.
        v.push(OFFERED.len() as u8 + 1);
        for (key, min, max) in OFFERED {
            i16b(&mut v, key);
            i16b(&mut v, min);
            i16b(&mut v, max);
            v.push(0);
        }
        i32b(&mut v, 0);
        v.push(0);
    } else {
        i32b(&mut v, OFFERED.len() as i32);
        for (key, min, max) in OFFERED {
            i16b(&mut v, key);
            i16b(&mut v, min);
            i16b(&mut v, max);
        }
        if version >= 1 {
            i32b(&mut v, 0);
        }
    }
    v
}

/// Metadata v1: the brokers, the controller, the topic with one partition.
fn metadata(s: &Shared) -> Vec<u8> {
    let later = s.produced.load(Ordering::SeqCst);
    let mut brokers: Vec<(i32, &str, u16)> = vec![(1, "127.0.0.1", s.port)];
    if later {
        brokers.push((2, s.later.0.as_str(), s.later.1));
    }
    let leader = if later { 2 } else { 1 };
    let mut v = Vec::new();
    i32b(&mut v, brokers.len() as i32);
    for (id, host, port) in brokers {
        i32b(&mut v, id);
        string(&mut v, host);
        i32b(&mut v, i32::from(port));
        i16b(&mut v, -1); // rack: null
    }
    i32b(&mut v, 1); // controller
    i32b(&mut v, 1); // one topic
    i16b(&mut v, 0);
    string(&mut v, &s.topic);
    v.push(0); // is_internal
    i32b(&mut v, 1); // one partition
    i16b(&mut v, 0);
    i32b(&mut v, 0);
    i32b(&mut v, leader);
    for _ in 0..2 {
        // replicas, then in-sync replicas: the leader alone
        i32b(&mut v, 1);
        i32b(&mut v, leader);
    }
    v
}

/// Produce v3: partition 0 of the topic answered NOT_LEADER_OR_FOLLOWER.
fn produce(topic: &str) -> Vec<u8> {
    let mut v = Vec::new();
    i32b(&mut v, 1);
    string(&mut v, topic);
    i32b(&mut v, 1);
    i32b(&mut v, 0);
    i16b(&mut v, NOT_LEADER_OR_FOLLOWER);
    i64b(&mut v, -1); // base offset
    i64b(&mut v, -1); // log append time
    i32b(&mut v, 0); // throttle time
    v
}
