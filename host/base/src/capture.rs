//! What stet keeps of a process's output: in a log file, written chunk by chunk as it comes
//! (so a stet killed mid-call leaves what the call printed so far), its first [`LOGGED`]
//! bytes, then — when the process ends — a line saying how much was left out and the last
//! bytes kept in memory; in memory only a bounded head and tail, whatever the process
//! prints. An agent that prints 4 GiB costs stet a few MiB of memory (measured in
//! `host/benches/sandbox.rs`) and at most [`LOGGED`] and a tail of disk.

use std::collections::VecDeque;
use std::io::Write;
use std::path::Path;

/// How much of the start and of the end is kept in memory.
pub const KEPT: usize = 1 << 20;

/// How much of the start of a process's output its log holds, at most (its tail follows
/// when the process ends).
pub const LOGGED: u64 = 64 << 20;

/// A stream being captured.
pub struct Capture {
    log: Option<std::fs::File>,
    log_error: Option<std::io::Error>,
    head: Vec<u8>,
    tail: VecDeque<u8>,
    keep: usize,
    total: u64,
    /// Bytes written to the log so far, and the most it takes before the tail.
    logged: u64,
    log_limit: u64,
    /// Bytes of the output the log left out, once finished.
    cut: u64,
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
            logged: 0,
            log_limit: LOGGED,
            cut: 0,
        })
    }

    /// The same, with a log that holds at most `limit` bytes of the output's start.
    pub fn with_log_limit(mut self, limit: u64) -> Capture {
        self.log_limit = limit;
        self
    }

    /// Takes the next chunk.
    pub fn push(&mut self, bytes: &[u8]) {
        self.total += bytes.len() as u64;
        if let Some(log) = &mut self.log {
            let room = self.log_limit.saturating_sub(self.logged);
            let to_log = &bytes[..bytes.len().min(usize::try_from(room).unwrap_or(usize::MAX))];
            if !to_log.is_empty() {
                if let Err(e) = log.write_all(to_log) {
                    // The output goes on; the log's failure is reported when it is finished.
                    self.log_error.get_or_insert(e);
                    self.log = None;
                }
                self.logged += to_log.len() as u64;
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

    /// How many bytes of the output the log left out (known once finished; see
    /// [`Capture::finish_counting`]).
    pub fn log_cut(&self) -> u64 {
        self.cut
    }

    /// Finishes the log (its tail appended after a line saying what was left out, when the
    /// output outgrew it), flushes it to disk and returns what was kept, with the bytes the
    /// log left out.
    pub fn finish_counting(mut self) -> std::io::Result<(Vec<u8>, u64)> {
        self.close_log()?;
        let cut = self.cut;
        Ok((self.finish()?, cut))
    }

    /// Ends the log: when the output outgrew it, a line saying how much was left out and
    /// the tail kept in memory (what of it the log does not hold already).
    fn close_log(&mut self) -> std::io::Result<()> {
        if let Some(e) = self.log_error.take() {
            return Err(e);
        }
        let Some(mut log) = self.log.take() else {
            return Ok(());
        };
        if self.total > self.logged {
            let tail_start = self.total - self.tail.len() as u64;
            let skip = usize::try_from(self.logged.saturating_sub(tail_start)).unwrap_or(0);
            self.cut = tail_start.saturating_sub(self.logged);
            let tail: Vec<u8> = self.tail.iter().skip(skip).copied().collect();
            if self.cut > 0 {
                log.write_all(
                    format!(
                        "\n[stet: {} bytes of output left out of this log here; its last {} bytes follow]\n",
                        self.cut,
                        tail.len()
                    )
                    .as_bytes(),
                )?;
            }
            log.write_all(&tail)?;
        }
        log.sync_all()
    }

    /// Flushes the log to disk (finished as [`Capture::finish_counting`] does) and returns
    /// what was kept: everything when it fit, else the head up to its last line end, a line
    /// saying how much was left out, and the tail from its first line start.
    pub fn finish(mut self) -> std::io::Result<Vec<u8>> {
        self.close_log()?;
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
    fn a_log_outgrown_keeps_its_head_and_tail_on_disk_and_says_what_it_cut() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("out.log");
        let mut c = Capture::new(Some(&log), 100).unwrap().with_log_limit(1000);
        let mut all = Vec::new();
        for i in 0..10_000 {
            let line = format!("line {i}\n");
            all.extend_from_slice(line.as_bytes());
            c.push(line.as_bytes());
        }
        let (_, cut) = c.finish_counting().unwrap();
        let logged = std::fs::read(&log).unwrap();
        assert_eq!(&logged[..1000], &all[..1000]);
        assert!(logged.ends_with(&all[all.len() - 100..]));
        assert_eq!(cut, all.len() as u64 - 1000 - 100);
        let text = String::from_utf8_lossy(&logged);
        assert!(
            text.contains(&format!(
                "[stet: {cut} bytes of output left out of this log here"
            )),
            "{text}"
        );
        assert!(logged.len() < 1300, "{}", logged.len());
    }

    #[test]
    fn a_tail_that_overlaps_the_logged_head_is_not_written_twice() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("out.log");
        let mut c = Capture::new(Some(&log), 8).unwrap().with_log_limit(10);
        c.push(b"0123456789abcd");
        let (_, cut) = c.finish_counting().unwrap();
        assert_eq!(cut, 0);
        assert_eq!(std::fs::read(&log).unwrap(), b"0123456789abcd");
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
