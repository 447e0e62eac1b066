//! Splitting the byte stream of an OVSDB connection into JSON-RPC messages.
//!
//! RFC 7047 sends JSON objects back to back with no length prefix or delimiter, so a message
//! ends where its JSON value ends. [`MessageBuffer`] accumulates bytes and yields every complete
//! value; a partial value stays buffered until more bytes arrive.

use serde_json::Value;

/// Bytes beyond this with no complete message mean the peer is not speaking OVSDB.
const MAX_PENDING_BYTES: usize = 64 << 20;

/// Incoming bytes not yet turned into messages.
#[derive(Default, Debug)]
pub struct MessageBuffer {
    pending: Vec<u8>,
}

impl MessageBuffer {
    /// Append bytes read from the socket.
    pub fn extend(&mut self, bytes: &[u8]) {
        self.pending.extend_from_slice(bytes);
    }

    /// Take every complete JSON value from the front of the buffer.
    ///
    /// Returns an error naming the problem when the bytes are not JSON, or when an incomplete
    /// message grew past the size limit.
    pub fn drain_messages(&mut self) -> Result<Vec<Value>, String> {
        let mut messages = Vec::new();
        let mut consumed = 0;
        let mut stream = serde_json::Deserializer::from_slice(&self.pending).into_iter::<Value>();
        loop {
            match stream.next() {
                // Every JSON-RPC message is an object. Anything else is not OVSDB, and a bare
                // number could even be cut at a read boundary ("888" + "88" read as two values).
                Some(Ok(value)) if !value.is_object() => {
                    return Err(format!(
                        "message at byte {consumed} is not a JSON-RPC object: {:.40}",
                        value.to_string()
                    ));
                }
                Some(Ok(value)) => {
                    consumed = stream.byte_offset();
                    messages.push(value);
                }
                Some(Err(e)) if e.is_eof() => break,
                Some(Err(e)) => {
                    return Err(format!("invalid JSON at byte {}: {e}", consumed));
                }
                None => {
                    consumed = self.pending.len();
                    break;
                }
            }
        }
        self.pending.drain(..consumed);
        if self.pending.len() > MAX_PENDING_BYTES {
            return Err(format!(
                "{} bytes without a complete JSON message",
                self.pending.len()
            ));
        }
        Ok(messages)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_that_are_not_objects_end_the_session() {
        // Found by the ovsdb_reply fuzz target: a number split across two reads decoded as two
        // numbers. No OVSDB message is a bare value, so none is accepted.
        let mut buf = MessageBuffer::default();
        buf.extend(b"88888");
        let err = buf.drain_messages().unwrap_err();
        assert!(err.contains("not a JSON-RPC object"), "{err}");
        let mut buf = MessageBuffer::default();
        buf.extend(br#"{"id":1,"result":{}}[1,2]"#);
        assert!(buf.drain_messages().is_err());
    }

    #[test]
    fn splits_back_to_back_messages_and_keeps_partial_tail() {
        let mut buf = MessageBuffer::default();
        buf.extend(
            br#"{"id":1,"result":[]}{"id":null,"method":"update","params":[null,{}]}{"id":"#,
        );
        let msgs = buf.drain_messages().unwrap();
        assert_eq!(msgs.len(), 2);
        assert_eq!(msgs[0], json!({"id":1,"result":[]}));
        assert!(buf.drain_messages().unwrap().is_empty());
        buf.extend(br#"2,"result":{}}"#);
        assert_eq!(
            buf.drain_messages().unwrap(),
            vec![json!({"id":2,"result":{}})]
        );
    }

    #[test]
    fn message_split_inside_a_string_waits_for_the_rest() {
        let mut buf = MessageBuffer::default();
        buf.extend(br#"{"method":"ec"#);
        assert!(buf.drain_messages().unwrap().is_empty());
        buf.extend(br#"ho","params":[],"id":"echo"}  "#);
        assert_eq!(buf.drain_messages().unwrap().len(), 1);
    }

    #[test]
    fn garbage_is_an_error() {
        let mut buf = MessageBuffer::default();
        buf.extend(b"{\"id\":1} HTTP/1.1 200 OK");
        assert!(buf.drain_messages().is_err());
    }
}
