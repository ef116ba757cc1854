//! `GET /asyncapi.json`: an AsyncAPI 3.0 document of what this node publishes — one channel
//! per queue sink of each source (and of `lifecycle.sinks`), the queue message v1 schema and
//! the lifecycle CloudEvent — built from the live config on each request.
//!
//! Only what a consumer needs to subscribe is written: a broker's host and port, the topic,
//! exchange, subject, channel or queue. Never a URL's userinfo, path or query, a token, or an
//! option that is not about where the message goes; `server_of` is the one place that reads a
//! sink's connection URL, and it keeps the host and port only.

mod schema;

use ankusa_config::{Config, SinkConfig};
use serde_json::{Map, Value, json};

/// The gateway version the document names (`info.version`).
const VERSION: &str = env!("CARGO_PKG_VERSION");

/// One published destination.
struct Channel {
    /// `<source>-sink-<i>` or `lifecycle-sink-<i>`: unique, `[A-Za-z0-9_-]`.
    key: String,
    title: String,
    address: String,
    protocol: &'static str,
    host: Option<String>,
    bindings: Option<(&'static str, Value)>,
    lifecycle: bool,
}

/// The document for `config`.
pub fn document(config: &Config) -> Value {
    let mut channels = Vec::new();
    for (source_id, source) in &config.sources {
        for (i, sink) in source.sinks.iter().enumerate() {
            let name = source
                .sink_names
                .get(i)
                .cloned()
                .unwrap_or_else(|| format!("sinks[{i}]"));
            if let Some(ch) = channel_of(sink, source_id, &format!("{source_id}-sink-{i}")) {
                channels.push(Channel {
                    title: format!("{source_id} → {name}"),
                    ..ch
                });
            }
        }
    }
    if let Some(lc) = &config.lifecycle {
        for (i, sink) in lc.sinks.iter().enumerate() {
            if let Some(ch) = channel_of(sink, "ankusa:lifecycle", &format!("lifecycle-sink-{i}")) {
                channels.push(Channel {
                    title: format!("lifecycle events → sinks[{i}]"),
                    lifecycle: true,
                    ..ch
                });
            }
        }
    }

    let mut servers = Map::new();
    let mut chans = Map::new();
    let mut ops = Map::new();
    for ch in &channels {
        let message_ref = if ch.lifecycle {
            "#/components/messages/LifecycleMessage"
        } else {
            "#/components/messages/HookMessage"
        };
        let mut c = json!({
            "address": ch.address,
            "title": ch.title,
            "messages": {"message": {"$ref": message_ref}},
        });
        if let Some(host) = &ch.host {
            servers.insert(
                ch.key.clone(),
                json!({"host": host, "protocol": ch.protocol,
                       "description": format!("The broker of {}", ch.title)}),
            );
            c["servers"] = json!([{"$ref": format!("#/servers/{}", ch.key)}]);
        }
        if let Some((protocol, b)) = &ch.bindings {
            c["bindings"] = json!({ *protocol: b });
        }
        chans.insert(ch.key.clone(), c);
        ops.insert(
            format!("publish-{}", ch.key),
            json!({
                "action": "send",
                "title": format!("Publish to {}", ch.title),
                "channel": {"$ref": format!("#/channels/{}", ch.key)},
                "messages": [{"$ref": format!("#/channels/{}/messages/message", ch.key)}],
            }),
        );
    }

    json!({
        "asyncapi": "3.0.0",
        "id": format!("urn:ankusa:node:{}", config.node.instance),
        "info": {
            "title": format!("Ankusa node {}", config.node.instance),
            "version": VERSION,
            "description": "What this Ankusa node publishes: every queue sink of its sources \
                carries the queue message v1 (docs/sinks.md); lifecycle sinks carry it with a \
                CloudEvent as the body (docs/lifecycle.md). Delivery is at least once: dedupe \
                on idempotency_key.",
        },
        "defaultContentType": "application/json",
        "servers": servers,
        "channels": chans,
        "operations": ops,
        "components": schema::components(),
    })
}

fn channel_of(sink: &SinkConfig, source_id: &str, key: &str) -> Option<Channel> {
    let ch = |protocol, address: String, host: Option<String>, bindings| Channel {
        key: key.to_string(),
        title: String::new(),
        address,
        protocol,
        host,
        bindings,
        lifecycle: false,
    };
    Some(match sink {
        SinkConfig::Log(_) | SinkConfig::Http(_) => return None,
        SinkConfig::Kafka(k) => ch(
            "kafka",
            k.topic.clone(),
            k.brokers.first().map(|b| host_port(b, 9092)),
            Some((
                "kafka",
                json!({"topic": k.topic, "bindingVersion": "0.5.0"}),
            )),
        ),
        SinkConfig::Rabbitmq(r) => {
            let routing_key = r
                .routing_key
                .clone()
                .unwrap_or_else(|| format!("ankusa.{source_id}"));
            let exchange_type = serde_json::to_value(r.exchange_type)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_else(|| "topic".into());
            ch(
                "amqp",
                routing_key,
                url_host(r.url.expose(), 5672),
                Some((
                    "amqp",
                    json!({"is": "routingKey",
                           "exchange": {"name": r.exchange, "type": exchange_type, "durable": true},
                           "bindingVersion": "0.3.0"}),
                )),
            )
        }
        SinkConfig::Nats(n) => ch(
            "nats",
            n.subject.clone(),
            n.servers.first().map(|s| host_port(s, 4222)),
            None,
        ),
        SinkConfig::Redis(r) => ch(
            "redis",
            r.channel.clone(),
            url_host(r.url.expose(), 6379),
            None,
        ),
        SinkConfig::Sqs(s) => {
            let url = s.queue_url.expose();
            let name = queue_name_of(url);
            let fifo = name.ends_with(".fifo");
            ch(
                "sqs",
                name.clone(),
                url_host(url, 443),
                Some((
                    "sqs",
                    json!({"queue": {"name": name, "fifoQueue": fifo}, "bindingVersion": "0.2.0"}),
                )),
            )
        }
        SinkConfig::GooglePubsub(p) => ch(
            "googlepubsub",
            format!("projects/{}/topics/{}", p.project, p.topic),
            Some(
                p.endpoint
                    .as_ref()
                    .and_then(|e| url_host(e.expose(), 443))
                    .unwrap_or_else(|| "pubsub.googleapis.com:443".into()),
            ),
            // The address is the topic's full name; the binding's fields (schema settings,
            // retention) are the topic's own configuration, which the sink does not know.
            None,
        ),
    })
}

fn queue_name_of(url: &str) -> String {
    url::Url::parse(url)
        .ok()
        .and_then(|u| {
            u.path_segments()
                .and_then(|mut p| p.next_back().map(str::to_string))
        })
        .unwrap_or_default()
}

/// `host:port` of a URL, without its userinfo, path or query; `None` when it does not parse.
fn url_host(url: &str, default_port: u16) -> Option<String> {
    let u = url::Url::parse(url).ok()?;
    let host = u.host_str()?;
    Some(format!("{host}:{}", u.port().unwrap_or(default_port)))
}

/// A broker address written as `host:port`, `host` or a URL (`nats://user:pass@host:4222`).
fn host_port(addr: &str, default_port: u16) -> String {
    if addr.contains("://") {
        return url_host(addr, default_port).unwrap_or_default();
    }
    // `user:pass@host:port` without a scheme keeps only what follows the last `@`.
    let hostport = addr.rsplit('@').next().unwrap_or(addr);
    if hostport.contains(':') {
        hostport.to_string()
    } else {
        format!("{hostport}:{default_port}")
    }
}

#[cfg(test)]
mod tests;
