//! Text for a terminal: what the command line prints to stderr quotes the audited server (its
//! error bodies, a trail's fields), and a control sequence in it could clear the screen, erase
//! the line saying an audit was partial, or write a green "OK" of its own.

/// Whether `c` moves the terminal rather than showing a character: a control character (C0,
/// DEL, C1) or a bidirectional formatting character.
fn steers(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// `text` with every control character (C0, DEL, C1) and every bidirectional formatting
/// character written as a `\u{…}` escape, so that it prints as the characters it holds.
pub fn printable(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if steers(c) {
            out.push_str(&c.escape_unicode().to_string());
        } else {
            out.push(c);
        }
    }
    out
}

/// A JSON text (as serde_json writes it: C0 controls already escaped) with the C1 controls and
/// bidirectional formatting characters in its strings written as `\uXXXX` escapes too: the
/// same JSON value, which prints on a terminal as the characters it holds. The reports the
/// command line prints quote a trail and the audited server.
pub fn json_printable(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        // Outside strings a JSON text holds only ASCII punctuation, digits, letters and
        // whitespace, none of which steer, so every character escaped here is in a string.
        if steers(c) && !matches!(c, '\n' | '\r' | '\t' | ' ') {
            out.push_str(&format!("\\u{:04x}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::printable;

    #[test]
    fn controls_and_bidi_marks_print_as_escapes_and_the_rest_as_it_is() {
        assert_eq!(
            printable("\u{1b}[2K\r\u{1b}[8mOK"),
            "\\u{1b}[2K\\u{d}\\u{1b}[8mOK"
        );
        assert_eq!(printable("a\nb\u{9b}c"), "a\\u{a}b\\u{9b}c");
        assert_eq!(printable("x\u{202E}y\u{2066}"), "x\\u{202e}y\\u{2066}");
        assert_eq!(printable("café — ✓ 70"), "café — ✓ 70");
    }

    #[test]
    fn a_json_report_keeps_its_value_and_prints_no_c1_or_bidi_character() {
        let value = serde_json::json!({"why": "a\u{9b}2Jb\u{202e}c\u{1b}d", "n": [1, 2]});
        let text = serde_json::to_string_pretty(&value).unwrap();
        let shown = super::json_printable(&text);
        assert!(!shown
            .chars()
            .any(|c| c == '\u{9b}' || c == '\u{202e}' || c == '\u{1b}'));
        assert!(
            shown.contains("\\u009b") && shown.contains("\\u202e"),
            "{shown}"
        );
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&shown).unwrap(),
            value
        );
        // The layout (newlines, indentation) is kept.
        assert_eq!(shown.lines().count(), text.lines().count());
    }
}
