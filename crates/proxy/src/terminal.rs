//! Text for a terminal: what the command line prints to stderr quotes the audited server (its
//! error bodies, a trail's fields), and a control sequence in it could clear the screen, erase
//! the line saying an audit was partial, or write a green "OK" of its own.

/// `text` with every control character (C0, DEL, C1) and every bidirectional formatting
/// character written as a `\u{…}` escape, so that it prints as the characters it holds.
pub fn printable(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        let bidi = matches!(c, '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}');
        if c.is_control() || bidi {
            out.push_str(&c.escape_unicode().to_string());
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
}
