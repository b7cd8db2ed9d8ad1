//! Reading an outbound call's answer with a bound: an LLM, a translator or a guardrail that
//! sends a body without end (a misconfigured endpoint, a hostile one) must not take the
//! proxy's memory with it.

/// The most an answer may be: chat completions, translations and guardrail findings are
/// kilobytes, rarely more than a few hundred.
pub const MAX_ANSWER_BYTES: usize = 16 << 20;

/// Why an answer could not be read.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    /// It was larger than the bound (its declared length, or what came before the end).
    #[error("the response is larger than {} MiB", .0 >> 20)]
    TooLarge(usize),
    /// The connection failed or timed out while reading it.
    #[error("reading the response: {0}")]
    Read(#[source] reqwest::Error),
}

/// The most JSON values an answer may hold. A parsed value takes about 80 bytes whatever its
/// text's length, so an answer of `[0,0,0,...]` within [`MAX_ANSWER_BYTES`] parsed into
/// about 1.2 GB; with this bound an answer parses into about 40 MB at most. A chat completion
/// holds tens of values, a guardrail's findings hundreds; one with `logprobs` about 150 per
/// token at `top_logprobs: 20` (3,000 tokens fit).
pub const MAX_ANSWER_VALUES: usize = 500_000;

/// The most JSON values a client's request may hold (conversations of thousands of turns fit):
/// the same reasoning as [`MAX_ANSWER_VALUES`] for a request within the body limit, which
/// parsed 20-36 times larger than its text.
pub const MAX_REQUEST_VALUES: usize = 100_000;

/// Refuses JSON `text` holding more than `max` values, before it is parsed into a tree. Counts
/// the arrays and objects opened and the commas between elements outside strings: every value
/// but the top one is an element, after a comma or first in its container, so the count is at
/// least the number of values less one, and text accepted parses into at most `max + 1`.
/// Returns the count reached when refused.
pub fn within_values(text: &[u8], max: usize) -> Result<(), usize> {
    let mut count = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for &b in text {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' | b',' => {
                count += 1;
                if count > max {
                    return Err(count);
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// What is kept of an endpoint's error body, to log it, record it in a trail and find its
/// message in: its first 4 KiB. Error messages are short; the whole body (up to
/// [`MAX_ANSWER_BYTES`]) went to the log and into the trail, several times per request with
/// translators and retries.
pub fn error_body(text: &str) -> String {
    const KEPT: usize = 4 << 10;
    if text.len() <= KEPT {
        return text.to_string();
    }
    let mut end = KEPT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}... ({} bytes in all)", &text[..end], text.len())
}

/// At most the first `max` characters of `s`: an excerpt of an answer for an error message,
/// which an endpoint must not be able to make as long as it likes.
pub fn truncate(s: &str, max: usize) -> &str {
    match s.char_indices().nth(max) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

/// The whole body of `response`, up to `limit` bytes.
pub async fn read_bounded(
    mut response: reqwest::Response,
    limit: usize,
) -> Result<Vec<u8>, BodyError> {
    if response.content_length().is_some_and(|n| n > limit as u64) {
        return Err(BodyError::TooLarge(limit));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(BodyError::Read)? {
        if body.len() + chunk.len() > limit {
            return Err(BodyError::TooLarge(limit));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A server that answers one request with `head` and then `body_len` bytes of body,
    /// chunked when `head` says so (no declared length).
    async fn answer(head: &'static str, body_len: usize) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/", listener.local_addr().unwrap());
        tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 1024];
            let _ = s.read(&mut buf).await;
            let _ = s.write_all(head.as_bytes()).await;
            let chunked = head.contains("chunked");
            let mut left = body_len;
            while left > 0 {
                let n = left.min(64 << 10);
                let data = vec![b'x'; n];
                if chunked {
                    let _ = s.write_all(format!("{n:x}\r\n").as_bytes()).await;
                }
                if s.write_all(&data).await.is_err() {
                    return;
                }
                if chunked {
                    let _ = s.write_all(b"\r\n").await;
                }
                left -= n;
            }
            if chunked {
                let _ = s.write_all(b"0\r\n\r\n").await;
            }
        });
        url
    }

    async fn read(url: &str, limit: usize) -> Result<Vec<u8>, BodyError> {
        let r = reqwest::get(url).await.unwrap();
        read_bounded(r, limit).await
    }

    #[tokio::test]
    async fn a_chunked_body_past_the_bound_is_refused_while_it_streams() {
        let head = "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n";
        let url = answer(head, 3 << 20).await;
        let err = read(&url, 1 << 20).await.unwrap_err();
        assert!(matches!(err, BodyError::TooLarge(_)), "{err}");
        assert_eq!(err.to_string(), "the response is larger than 1 MiB");
        let url = answer(head, 1 << 20).await;
        assert_eq!(read(&url, 1 << 20).await.unwrap().len(), 1 << 20);
    }

    #[tokio::test]
    async fn an_llm_answer_past_the_bound_is_a_bad_response_not_a_retry() {
        use crate::config::LlmEndpoint;
        use crate::llm::{ChatMessage, LlmClient, LlmError};
        let head =
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 17825792\r\n\r\n";
        let url = answer(head, 0).await;
        let client = LlmClient::new(LlmEndpoint {
            base_url: url,
            model: Some("m".into()),
            ..LlmEndpoint::default()
        })
        .await
        .unwrap();
        // One connection is all the server takes: a retry would fail to connect instead.
        match client.complete(&[ChatMessage::user("Hi")]).await {
            Err(LlmError::BadResponse { reason, .. }) => {
                assert_eq!(reason, "the response is larger than 16 MiB")
            }
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn a_declared_length_past_the_bound_is_refused_before_reading() {
        let url = answer("HTTP/1.1 200 OK\r\ncontent-length: 2097152\r\n\r\n", 0).await;
        assert!(matches!(
            read(&url, 1 << 20).await,
            Err(BodyError::TooLarge(_))
        ));
    }
}

#[cfg(test)]
mod value_count_tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::Value;

    #[test]
    fn counts_containers_and_commas_outside_strings() {
        assert_eq!(within_values(b"[0,0,0]", 3), Ok(()));
        assert_eq!(within_values(b"[0,0,0]", 2), Err(3));
        let tricky = br#"{"a": "[,,{\"\\", "b": [1]}"#;
        assert_eq!(within_values(tricky, 3), Ok(()));
        assert_eq!(within_values(tricky, 2), Err(3));
    }

    fn values(v: &Value) -> usize {
        1 + match v {
            Value::Array(a) => a.iter().map(values).sum(),
            Value::Object(o) => o.values().map(values).sum(),
            _ => 0,
        }
    }

    fn json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            "[,\\[\\]{}\"\\\\a ]{0,6}".prop_map(Value::String),
        ];
        leaf.prop_recursive(5, 64, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::btree_map("[,\\[{\"a]{0,4}", inner, 0..6)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        /// Text accepted under a bound parses into at most one value more than the bound, and
        /// the bound of its own count accepts it: the count sits between the values less one
        /// and twice the values.
        #[test]
        fn the_count_bounds_the_values_parsed(v in json()) {
            let text = serde_json::to_vec(&v).unwrap();
            let n = values(&v);
            prop_assert!(within_values(&text, n.saturating_sub(2)).is_err() || n <= 1);
            prop_assert_eq!(within_values(&text, 2 * n), Ok(()));
        }
    }
}
