//! The reason phrase of error responses. Contiv's Go client shows the body of an HTTP 500 only;
//! for any other failure it prints the status line (`409 Conflict`). So every error response
//! also carries its message as the reason phrase (`HTTP/1.1 409 network web is in use`), with the
//! status code unchanged for clients that read the code and the body.
//!
//! actix only takes a `&'static str` reason, so phrases are interned: each distinct message is
//! stored once, at most [`MAX_PHRASES`] of them per process (a few hundred kilobytes); beyond
//! that an unseen message gets the status's standard phrase and stays in the body.

use std::collections::HashMap;
use std::sync::Mutex;

use actix_web::HttpResponse;

/// Distinct phrases kept per process.
pub const MAX_PHRASES: usize = 2048;
/// Longest phrase sent (bytes); the body always has the whole message.
pub const MAX_PHRASE_LEN: usize = 200;

/// Interned reason phrases, owned by the server's [`super::AppState`].
#[derive(Debug, Default)]
pub struct ReasonPhrases {
    phrases: Mutex<HashMap<String, &'static str>>,
}

impl ReasonPhrases {
    /// The reason phrase for `message`: one line of visible characters, at most
    /// [`MAX_PHRASE_LEN`] bytes; `None` when it is empty or the store is full.
    pub fn phrase(&self, message: &str) -> Option<&'static str> {
        let mut line: String = message
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect::<String>()
            .trim()
            .to_string();
        if line.len() > MAX_PHRASE_LEN {
            let mut end = MAX_PHRASE_LEN;
            while !line.is_char_boundary(end) {
                end -= 1;
            }
            line.truncate(end);
        }
        if line.is_empty() {
            return None;
        }
        let mut phrases = self.phrases.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = phrases.get(&line) {
            return Some(p);
        }
        if phrases.len() >= MAX_PHRASES {
            return None;
        }
        let interned: &'static str = Box::leak(line.clone().into_boxed_str());
        phrases.insert(line, interned);
        Some(interned)
    }

    /// Put `message` in `resp`'s status line.
    pub fn apply(&self, resp: &mut HttpResponse, message: &str) {
        if let Some(p) = self.phrase(message) {
            resp.head_mut().reason = Some(p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phrases_are_one_bounded_line_and_interned_once() {
        let r = ReasonPhrases::default();
        assert_eq!(
            r.phrase("network web is in use\r\nX: y"),
            Some("network web is in use  X: y")
        );
        let a = r.phrase("same").unwrap();
        let b = r.phrase("same").unwrap();
        assert!(std::ptr::eq(a, b));
        assert_eq!(r.phrase(" \n "), None);
        let long = "é".repeat(300);
        assert!(r.phrase(&long).unwrap().len() <= MAX_PHRASE_LEN);
        for i in 0..MAX_PHRASES {
            r.phrase(&format!("m{i}"));
        }
        assert_eq!(r.phrase("one too many"), None);
        assert_eq!(r.phrase("same"), Some("same"));
    }
}
