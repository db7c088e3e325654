//! What stet keeps of a process's output: all of it in a log file, written chunk by chunk
//! as it comes (so a stet killed mid-call leaves what the call printed so far), and in
//! memory only a bounded head and tail, whatever the process prints. An agent that prints
//! 4 GiB costs stet a few MiB (measured in `host/benches/sandbox.rs`).

use std::collections::VecDeque;
use std::io::Write;
use std::path::Path;

/// How much of the start and of the end is kept in memory.
pub const KEPT: usize = 1 << 20;

/// A stream being captured.
pub struct Capture {
    log: Option<std::fs::File>,
    log_error: Option<std::io::Error>,
    head: Vec<u8>,
    tail: VecDeque<u8>,
    keep: usize,
    total: u64,
}

impl Capture {
    /// Captures into `log` (created or truncated), keeping `keep` bytes of head and tail.
    pub fn new(log: Option<&Path>, keep: usize) -> std::io::Result<Capture> {
        let log = match log {
            Some(path) => {
                if let Some(dir) = path.parent() {
                    std::fs::create_dir_all(dir)?;
                }
                Some(std::fs::File::create(path)?)
            }
            None => None,
        };
        Ok(Capture {
            log,
            log_error: None,
            head: Vec::new(),
            tail: VecDeque::new(),
            keep,
            total: 0,
        })
    }

    /// Takes the next chunk.
    pub fn push(&mut self, bytes: &[u8]) {
        self.total += bytes.len() as u64;
        if let Some(log) = &mut self.log {
            if let Err(e) = log.write_all(bytes) {
                // The output goes on; the log's failure is reported when it is finished.
                self.log_error.get_or_insert(e);
                self.log = None;
            }
        }
        let room = self.keep.saturating_sub(self.head.len());
        let (to_head, rest) = bytes.split_at(room.min(bytes.len()));
        self.head.extend_from_slice(to_head);
        if rest.is_empty() {
            return;
        }
        if rest.len() >= self.keep {
            self.tail.clear();
            self.tail.extend(&rest[rest.len() - self.keep..]);
            return;
        }
        let overflow = (self.tail.len() + rest.len()).saturating_sub(self.keep);
        self.tail.drain(..overflow);
        self.tail.extend(rest);
    }

    /// How many bytes came in all.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Flushes the log to disk and returns what was kept: everything when it fit, else the
    /// head up to its last line end, a line saying how much was left out, and the tail
    /// from its first line start.
    pub fn finish(mut self) -> std::io::Result<Vec<u8>> {
        if let Some(e) = self.log_error.take() {
            return Err(e);
        }
        if let Some(log) = self.log.take() {
            log.sync_all()?;
        }
        let tail: Vec<u8> = self.tail.into();
        let kept = (self.head.len() + tail.len()) as u64;
        if kept == self.total {
            let mut all = self.head;
            all.extend_from_slice(&tail);
            return Ok(all);
        }
        let head_end = self
            .head
            .iter()
            .rposition(|b| *b == b'\n')
            .map_or(self.head.len(), |i| i + 1);
        let tail_start = tail.iter().position(|b| *b == b'\n').map_or(0, |i| i + 1);
        let mut out = self.head[..head_end].to_vec();
        let left_out = self.total - head_end as u64 - (tail.len() - tail_start) as u64;
        out.extend_from_slice(format!("[stet: {left_out} bytes left out here]\n").as_bytes());
        out.extend_from_slice(&tail[tail_start..]);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_output_is_kept_whole() {
        let mut c = Capture::new(None, 16).unwrap();
        c.push(b"one\n");
        c.push(b"two\n");
        assert_eq!(c.finish().unwrap(), b"one\ntwo\n");
    }

    #[test]
    fn long_output_keeps_whole_lines_of_its_start_and_end_and_logs_everything() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("out.log");
        let mut c = Capture::new(Some(&log), 12).unwrap();
        let mut all = Vec::new();
        for i in 0..1000 {
            let line = format!("line {i}\n");
            all.extend_from_slice(line.as_bytes());
            c.push(line.as_bytes());
        }
        assert_eq!(c.total(), all.len() as u64);
        let kept = String::from_utf8(c.finish().unwrap()).unwrap();
        assert!(kept.starts_with("line 0\n"), "{kept}");
        assert!(kept.ends_with("line 999\n"), "{kept}");
        assert!(kept.contains("bytes left out"), "{kept}");
        assert!(kept.len() < 80, "{kept}");
        assert_eq!(std::fs::read(&log).unwrap(), all);
    }

    #[test]
    fn one_huge_chunk_is_bounded_too() {
        let mut c = Capture::new(None, 8).unwrap();
        c.push(&vec![b'x'; 1000]);
        c.push(b"\nend\n");
        let kept = c.finish().unwrap();
        assert!(kept.len() < 60, "{}", kept.len());
        assert!(kept.ends_with(b"end\n"));
    }
}
