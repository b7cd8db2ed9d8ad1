//! Starts the scripted servers of `tests/support/` (real processes on loopback) for tests.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// The repository root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A child process killed on drop.
pub struct Server {
    child: Child,
    /// Its loopback port.
    pub port: u16,
}

impl Server {
    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Starts `tests/support/<script>` with `script_json` written to a temp file.
    pub fn python(script: &str, script_json: &serde_json::Value) -> Server {
        let dir = std::env::temp_dir().join(format!(
            "pg-scripted-{}-{}",
            std::process::id(),
            rand_suffix()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("script.json");
        std::fs::write(&path, script_json.to_string()).unwrap();
        let mut child = Command::new("python3")
            .arg(repo_root().join("tests/support").join(script))
            .arg(&path)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("python3 runs");
        let port = read_port(&mut child);
        Server { child, port }
    }

    /// Everything the server received (its `/_requests`).
    pub fn received(&self) -> Vec<serde_json::Value> {
        let out = Command::new("curl")
            .args(["-s", &format!("{}/_requests", self.url())])
            .output()
            .expect("curl runs");
        serde_json::from_slice(&out.stdout).unwrap_or_default()
    }
}

fn rand_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

/// Reads "listening on PORT" from the child's stdout.
pub fn read_port(child: &mut Child) -> u16 {
    let stdout = child.stdout.take().expect("stdout piped");
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).unwrap();
    line.trim()
        .strip_prefix("listening on ")
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("server did not start: {line:?}"))
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
