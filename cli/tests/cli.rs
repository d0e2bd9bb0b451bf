//! The `lafuse` binary as a process: how it behaves towards the shell around it.

use std::process::Command;

/// A reader that stops early (`lafuse run s.dml | head -1`) stops lafuse quietly, by SIGPIPE
/// as for other Unix filters, instead of an error message about the script's `print`.
#[cfg(unix)]
#[test]
fn a_closed_pipe_stops_a_run_quietly() {
    use std::io::{BufRead, BufReader};
    use std::os::unix::process::ExitStatusExt;
    use std::process::Stdio;
    let dir = std::env::temp_dir().join(format!("lafuse-pipe-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let script = dir.join("many.dml");
    std::fs::write(
        &script,
        "for (i in 1:200000) {\n  print(\"line \" + i)\n}\n",
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_lafuse"))
        .arg("run")
        .arg(&script)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert_eq!(first.trim(), "line 1");
    let out = child.wait_with_output().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(out.status.signal(), Some(libc::SIGPIPE), "{:?}", out.status);
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
