//! The queue message v1 decoder (`ankusa_format::message`) over arbitrary bytes: no panic; a
//! message that decodes re-encodes to one that decodes the same, with the same body.

#![no_main]

use ankusa_format::message::QueueMessage;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok((m, body)) = QueueMessage::decode(data) {
        let again = serde_json::to_vec(&m).expect("a decoded message serialises");
        let (m2, body2) = QueueMessage::decode(&again).expect("a re-encoded message decodes");
        assert_eq!(m2, m);
        assert_eq!(body2, body);
    }
});
