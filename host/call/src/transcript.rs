//! A call's transcript (`stet log`): its output rendered by the harness plugin that made
//! the call, as typed entries. The host never reads the agent's format: the harness named
//! in the call's receipt renders it ([`stet_plugin_api::HarnessPlugin::render_transcript`]),
//! piece by piece so memory stays bounded however long the log. Where that harness is not
//! installed, not usable, built before plugin API 1.7 or fails, the output is shown as it
//! is, and a note says why.

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use serde::Serialize;
use stet_plugin_api::{EntryKind, PluginKind, Role};

use crate::plugins::discovery;
use crate::plugins::loader::{self, HarnessHandle, Instance};
use crate::plugins::version::host_api;
use crate::plugins::PluginSettings;
use crate::receipts::{CallRole, Receipt};

/// The longest piece of output held for the harness at once: a line longer than this is
/// rendered in parts (as output it cannot read).
pub const HELD_AT_MOST: usize = 16 << 20;
/// How much of a log is read at once.
const READ_AT_ONCE: u64 = 1 << 20;

/// One entry of a transcript, as `--json` shows it and the terminal lays it out.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Entry {
    /// `text`, `tool-call`, `tool-result`, `result`, `note`, `raw` (or `unknown-N`, a
    /// newer harness's kind).
    pub kind: String,
    /// A tool's name, `error` for a failed tool; else empty.
    pub label: String,
    /// The text (from the agent: made inert when printed).
    pub text: String,
    /// Lines left out of `text`.
    pub cut_lines: u64,
    /// Bytes left out of `text`.
    pub cut_bytes: u64,
    /// Figures (`cost_usd`, `turns`, `duration_ms`, ...).
    pub facts: std::collections::BTreeMap<String, String>,
}

impl Entry {
    fn of(e: &stet_plugin_api::TranscriptEntry) -> Entry {
        Entry {
            kind: e
                .kind
                .name()
                .map(str::to_string)
                .unwrap_or_else(|| format!("unknown-{}", e.kind.0)),
            label: e.label.to_string(),
            text: e.text.to_string(),
            cut_lines: e.cut_lines,
            cut_bytes: e.cut_bytes,
            facts: e
                .facts
                .iter()
                .map(|f| (f.key.to_string(), f.value.to_string()))
                .collect(),
        }
    }

    fn raw(text: String) -> Entry {
        Entry {
            kind: EntryKind::RAW.name().unwrap_or("raw").to_string(),
            label: String::new(),
            text,
            cut_lines: 0,
            cut_bytes: 0,
            facts: Default::default(),
        }
    }

    /// The entry laid out for a terminal, one or more lines (not yet inert: the printer
    /// makes them so).
    pub fn lines(&self) -> String {
        let cut = match (self.cut_lines, self.cut_bytes) {
            (0, 0) => None,
            (0, bytes) => Some(format!("… {} cut", crate::printer::size(bytes))),
            (lines, bytes) => Some(format!(
                "… {lines} more {} ({})",
                if lines == 1 { "line" } else { "lines" },
                crate::printer::size(bytes)
            )),
        };
        let mut out = match self.kind.as_str() {
            "tool-call" => format!("→ {} {}", self.label, self.text),
            "tool-result" => {
                let bar = if self.label == "error" {
                    "  ✗ "
                } else {
                    "  │ "
                };
                let mut body: Vec<String> =
                    self.text.lines().map(|l| format!("{bar}{l}")).collect();
                if body.is_empty() {
                    body.push(format!("{bar}(nothing)"));
                }
                body.join("\n")
            }
            "result" => format!("■ {}", self.text),
            "note" => format!("· {}", self.text),
            _ => self.text.clone(),
        };
        if let Some(cut) = cut {
            let indent = if self.kind == "tool-result" { "  " } else { "" };
            out = format!("{out}\n{indent}{cut}");
        }
        out
    }
}

/// What renders a call's output: its harness, or nothing (then the output is shown as it
/// is, and `why_raw` says why).
pub struct Renderer {
    handle: Option<HarnessHandle>,
    /// Why the output is shown as it is, when it is.
    pub why_raw: Option<String>,
    role: Role,
    held: Vec<u8>,
}

impl Renderer {
    /// Output shown as it is, for `why`.
    pub fn raw(why: impl Into<String>) -> Renderer {
        Renderer {
            handle: None,
            why_raw: Some(why.into()),
            role: Role::Implement,
            held: Vec::new(),
        }
    }

    /// The renderer of `call`'s output: the harness plugin its receipt names, found on the
    /// search path of `plugins` (by its manifest; it is loaded, not probed: rendering
    /// needs no agent, login or runtime). `plugins` is an error when the settings could
    /// not be read.
    pub fn open(plugins: Result<&PluginSettings, String>, call: &Receipt) -> Renderer {
        let name = &call.harness.name;
        let role = match call.role {
            CallRole::Implement => Role::Implement,
            CallRole::Review => Role::Review,
            CallRole::Proof => Role::Proof,
            _ => return Renderer::raw(format!("a {} call has no harness to render it", call.role)),
        };
        let plugins = match plugins {
            Ok(plugins) => plugins,
            Err(why) => {
                return Renderer::raw(format!(
                    "the settings could not be read, so harness {name} was not looked for ({why})"
                ))
            }
        };
        let found = discovery::discover(&plugins.search_path, &host_api());
        let Some(f) = found.iter().find(|f| {
            f.manifest
                .as_ref()
                .is_some_and(|m| m.name == *name && m.kind == PluginKind::Harness)
        }) else {
            return Renderer::raw(format!("harness {name} is not installed here"));
        };
        let Some(manifest) = f.usable() else {
            return Renderer::raw(format!(
                "harness {name} is not usable here: {}",
                crate::plugins::survey::not_probed_reason(f, &host_api())
            ));
        };
        if let Err(e) = plugins.check(manifest) {
            return Renderer::raw(format!("harness {name}: {}", e.message));
        }
        let loaded = match loader::load(manifest) {
            Ok(loaded) => loaded,
            Err(e) => return Renderer::raw(format!("harness {name} could not be loaded: {e}")),
        };
        match loaded.instantiate(&plugins.config_json(name)) {
            Ok(Instance::Harness(handle)) => Renderer {
                handle: Some(handle),
                why_raw: None,
                role,
                held: Vec::new(),
            },
            Ok(Instance::Runtime(_)) => Renderer::raw(format!("plugin {name} is not a harness")),
            Err(e) => Renderer::raw(format!("harness {name} could not start: {e}")),
        }
    }

    /// Renders the next `bytes` of the output (`end`: nothing follows them); the entries
    /// that are whole so far. A harness that fails, or renders nothing of a piece at the
    /// host's limit, turns the renderer raw from there on (`why_raw` says why).
    pub fn feed(&mut self, bytes: &[u8], end: bool) -> Vec<Entry> {
        let mut entries = Vec::new();
        let mut bytes = bytes;
        loop {
            // Held at most HELD_AT_MOST bytes: a piece that would be longer is cut there and
            // passed as if it were the end (a unit that long is rendered in parts).
            let room = HELD_AT_MOST.saturating_sub(self.held.len());
            let (now, later) = bytes.split_at(bytes.len().min(room));
            self.held.extend_from_slice(now);
            bytes = later;
            let full = self.held.len() >= HELD_AT_MOST;
            let last = end && bytes.is_empty();
            if self.held.is_empty() {
                return entries;
            }
            let Some(handle) = &self.handle else {
                // As it is: whole lines, unless at the end or at the limit.
                let whole = if last || full {
                    self.held.len()
                } else {
                    self.held
                        .iter()
                        .rposition(|b| *b == b'\n')
                        .map_or(0, |at| at + 1)
                };
                if whole > 0 {
                    let text = String::from_utf8_lossy(&self.held[..whole]);
                    entries.push(Entry::raw(text.trim_end_matches('\n').to_string()));
                    self.held.drain(..whole);
                }
                if bytes.is_empty() {
                    return entries;
                }
                continue;
            };
            match handle.render_transcript(self.role, &self.held, last || full) {
                Ok(rendered) => {
                    entries.extend(rendered.entries.iter().map(Entry::of));
                    let consumed = (rendered.consumed as usize).min(self.held.len());
                    self.held.drain(..consumed);
                    if (last || full) && !self.held.is_empty() {
                        self.handle = None;
                        self.why_raw = Some(format!(
                            "the harness left {} of the output unrendered",
                            crate::printer::size(self.held.len() as u64)
                        ));
                        continue;
                    }
                }
                Err(e) => {
                    self.handle = None;
                    self.why_raw = Some(format!("the harness could not render it: {}", e.message));
                    continue;
                }
            }
            if bytes.is_empty() {
                return entries;
            }
        }
    }
}

/// The call of `item` to show: the latest agent call (not a check), of `role` and in
/// `round` when given.
pub fn pick(
    receipts: Vec<Receipt>,
    item: &str,
    role: Option<&CallRole>,
    round: Option<u32>,
) -> Option<Receipt> {
    receipts
        .into_iter()
        .filter(|r| r.item == item && r.role != CallRole::Check)
        .filter(|r| role.is_none_or(|role| &r.role == role))
        .filter(|r| round.is_none_or(|n| r.round.unwrap_or(1) == n))
        .max_by_key(|r| r.started_unix_ms)
}

/// The renderer of `call`'s output under `settings` (as `stet log` resolves them: for the
/// plugins' search path alone, so a broken configuration turns rendering off, never the
/// reading of a log).
pub fn renderer_for(
    settings: &Result<crate::settings::Settings, crate::error::Error>,
    call: &Receipt,
) -> Renderer {
    let plugins = match settings {
        Ok(s) => Ok(&s.plugins),
        Err(e) => Err(e.message.clone()),
    };
    Renderer::open(plugins, call)
}

/// A call's transcript read whole (up to a bound), as `stet log --json` and `stet board`
/// show it.
pub struct Whole {
    /// The entries, rendered by `renderer` (or as they are, when it could not).
    pub entries: Vec<Entry>,
    /// Why the output (or its rest) is shown as it is, when it is.
    pub why_raw: Option<String>,
    /// The first MiB of the call's standard error (a call's standard error is a few lines;
    /// the rest is in its log).
    pub stderr: String,
    /// The size of its standard error.
    pub stderr_bytes: u64,
    /// Bytes of the log beyond the bound, not read.
    pub left_out: u64,
}

/// Reads `call`'s log through `renderer`, at most `at_most` bytes of it (read a MiB at a
/// time, so a log growing while it is read ends where the bound does).
pub fn whole(call: &Receipt, mut renderer: Renderer, at_most: u64) -> Whole {
    let mut tail = Tail::of(&call.log);
    let mut entries = Vec::new();
    let mut read = 0u64;
    while read < at_most {
        let bytes = tail.more();
        if bytes.is_empty() {
            break;
        }
        let keep = bytes.len().min((at_most - read) as usize);
        read += keep as u64;
        entries.extend(renderer.feed(&bytes[..keep], false));
    }
    entries.extend(renderer.feed(&[], true));
    let size = std::fs::metadata(&call.log).map(|m| m.len()).unwrap_or(0);
    let stderr_log = crate::harness::stderr_log_of(&call.log);
    let stderr_bytes = std::fs::metadata(&stderr_log).map(|m| m.len()).unwrap_or(0);
    let stderr = String::from_utf8_lossy(&Tail::of(&stderr_log).more()).into_owned();
    Whole {
        entries,
        why_raw: renderer.why_raw.clone(),
        stderr,
        stderr_bytes,
        left_out: size.saturating_sub(read),
    }
}

/// A log read on from where the last read ended (a call's log grows while it runs).
pub struct Tail {
    path: std::path::PathBuf,
    offset: u64,
}

impl Tail {
    /// `path`, from its start.
    pub fn of(path: &Path) -> Tail {
        Tail {
            path: path.to_path_buf(),
            offset: 0,
        }
    }

    /// What was written since the last read, at most 1 MiB (empty when nothing is, or
    /// the file is not there).
    pub fn more(&mut self) -> Vec<u8> {
        let mut chunk = Vec::new();
        if let Ok(mut file) = std::fs::File::open(&self.path) {
            if file.seek(SeekFrom::Start(self.offset)).is_ok() {
                if let Ok(n) = file.take(READ_AT_ONCE).read_to_end(&mut chunk) {
                    self.offset += n as u64;
                }
            }
        }
        chunk
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn receipt(id: &str, role: &str, round: u32, started: u64) -> Receipt {
        let plugin = serde_json::json!({"name": "gone", "version": "1", "library_sha256": "00"});
        serde_json::from_value(serde_json::json!({
            "id": id, "run": "r", "item": "item", "lane": "stet/item", "role": role,
            "round": round, "runtime": plugin, "runtime_reason": "", "harness": plugin,
            "image": "i", "network": "none", "started_unix_ms": started,
            "ended_unix_ms": started, "exit_code": 0, "exit_signal": null, "outcome": "done",
            "detail": "", "retry_at_unix": null, "cost_usd": null, "usage": [],
            "commit_before": "", "commit_after": "", "log": "/x.log", "session": [],
        }))
        .unwrap()
    }

    #[test]
    fn the_call_shown_is_the_latest_of_the_role_and_round_asked_for() {
        let all = || {
            vec![
                receipt("i1", "implement", 1, 1),
                receipt("c1", "check", 1, 2),
                receipt("r1", "review", 1, 3),
                receipt("i2", "implement", 2, 4),
                receipt("c2", "check", 2, 5),
            ]
        };
        let id = |r: Option<Receipt>| r.map(|r| r.id);
        assert_eq!(id(pick(all(), "item", None, None)).as_deref(), Some("i2"));
        let review = CallRole::Review;
        assert_eq!(
            id(pick(all(), "item", Some(&review), None)).as_deref(),
            Some("r1")
        );
        assert_eq!(
            id(pick(all(), "item", None, Some(1))).as_deref(),
            Some("r1")
        );
        assert_eq!(id(pick(all(), "item", Some(&review), Some(2))), None);
        assert_eq!(id(pick(all(), "other", None, None)), None);
    }

    #[test]
    fn a_harness_not_installed_or_unreadable_settings_leave_the_output_as_it_is() {
        let plugins = PluginSettings {
            search_path: Vec::new(),
            probe_timeout: std::time::Duration::from_secs(1),
            plugin_config: Default::default(),
            plugin_origin: Default::default(),
            untrusted_tables: Default::default(),
        };
        let call = receipt("i1", "implement", 1, 1);
        let r = Renderer::open(Ok(&plugins), &call);
        assert_eq!(
            r.why_raw.as_deref(),
            Some("harness gone is not installed here")
        );
        let r = Renderer::open(Err("line 3: bad".into()), &call);
        assert_eq!(
            r.why_raw.as_deref(),
            Some(
                "the settings could not be read, so harness gone was not looked for (line 3: bad)"
            )
        );
        let check = receipt("c1", "check", 1, 1);
        let r = Renderer::open(Ok(&plugins), &check);
        assert_eq!(
            r.why_raw.as_deref(),
            Some("a check call has no harness to render it")
        );
    }

    /// A harness rendering each line as text, refusing a line that says `refuse`.
    struct Lines;

    impl stet_plugin_api::HarnessPlugin for Lines {
        fn probe(&self) -> Result<stet_plugin_api::ProbeReport, stet_plugin_api::PluginError> {
            unreachable!()
        }
        fn profile(
            &self,
            _: &stet_plugin_api::HarnessContext,
        ) -> Result<stet_plugin_api::Profile, stet_plugin_api::PluginError> {
            unreachable!()
        }
        fn write_settings(
            &self,
            _: &stet_plugin_api::HarnessContext,
            _: &stet_plugin_api::Profile,
        ) -> Result<String, stet_plugin_api::PluginError> {
            unreachable!()
        }
        fn check_walls(
            &self,
            _: &stet_plugin_api::HarnessContext,
            _: &stet_plugin_api::Profile,
        ) -> Result<Vec<stet_plugin_api::WallCheck>, stet_plugin_api::PluginError> {
            unreachable!()
        }
        fn launch(
            &self,
            _: &stet_plugin_api::RoleRequest,
        ) -> Result<stet_plugin_api::Launch, stet_plugin_api::PluginError> {
            unreachable!()
        }
        fn read_proof(
            &self,
            _: &[u8],
        ) -> Result<Vec<stet_plugin_api::WallCheck>, stet_plugin_api::PluginError> {
            unreachable!()
        }
        fn read_outcome(
            &self,
            _: Role,
            _: &[u8],
            _: stet_plugin_api::ExitStatus,
        ) -> Result<stet_plugin_api::Outcome, stet_plugin_api::PluginError> {
            unreachable!()
        }
        fn render_transcript(
            &self,
            _: Role,
            output: &[u8],
            end: bool,
        ) -> Result<stet_plugin_api::Rendered, stet_plugin_api::PluginError> {
            if output.starts_with(b"refuse") {
                return Err(stet_plugin_api::PluginError::backend("cannot read it"));
            }
            Ok(stet_plugin_api::render_lines(
                output,
                end,
                |line, entries| {
                    entries.push(stet_plugin_api::TranscriptEntry::new(
                        EntryKind::TEXT,
                        format!("said {}", String::from_utf8_lossy(line)),
                    ))
                },
            ))
        }
    }

    fn lines() -> Renderer {
        let handle =
            stet_plugin_api::__private::new_harness(stet_plugin_api::RStr::from_str(""), |_| {
                Ok(Lines)
            })
            .unwrap();
        Renderer {
            handle: Some(HarnessHandle::V1(handle)),
            why_raw: None,
            role: Role::Implement,
            held: Vec::new(),
        }
    }

    fn texts(entries: Vec<Entry>) -> Vec<String> {
        entries
            .into_iter()
            .map(|e| format!("{}: {}", e.kind, e.text))
            .collect()
    }

    #[test]
    fn the_harness_renders_whole_lines_and_an_unfinished_one_comes_again_longer() {
        let mut r = lines();
        assert_eq!(texts(r.feed(b"one\ntw", false)), ["text: said one"]);
        assert_eq!(texts(r.feed(b"", false)), Vec::<String>::new());
        assert_eq!(texts(r.feed(b"o\nthr", false)), ["text: said two"]);
        assert_eq!(texts(r.feed(b"ee", true)), ["text: said three"]);
        assert!(r.why_raw.is_none());
    }

    #[test]
    fn a_harness_that_fails_leaves_the_rest_as_it_is_and_says_why() {
        let mut r = lines();
        assert_eq!(texts(r.feed(b"one\n", false)), ["text: said one"]);
        assert_eq!(
            texts(r.feed(b"refuse this\nand this\nhalf", false)),
            ["raw: refuse this\nand this"]
        );
        assert_eq!(
            r.why_raw.as_deref(),
            Some("the harness could not render it: cannot read it")
        );
        assert_eq!(texts(r.feed(b"", true)), ["raw: half"]);
    }

    #[test]
    fn raw_output_comes_in_whole_lines_and_the_rest_at_the_end() {
        let mut r = Renderer::raw("for a test");
        assert!(r.feed(b"one\ntw", false) == vec![Entry::raw("one".into())]);
        assert!(r.feed(b"o\nthree", false) == vec![Entry::raw("two".into())]);
        assert!(r.feed(b"", true) == vec![Entry::raw("three".into())]);
        assert!(r.feed(b"", true).is_empty());
    }

    #[test]
    fn a_line_longer_than_the_limit_is_shown_in_parts_and_nothing_more_is_held() {
        let mut r = Renderer::raw("for a test");
        let huge = vec![b'x'; HELD_AT_MOST + 10];
        let entries = r.feed(&huge, false);
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0].text.len(), HELD_AT_MOST);
        assert_eq!(r.held.len(), 10);
    }

    #[test]
    fn entries_are_laid_out_with_what_was_cut() {
        let mut e = Entry::raw("a\nb".into());
        e.kind = "tool-result".into();
        e.cut_lines = 3;
        e.cut_bytes = 2048;
        assert_eq!(e.lines(), "  │ a\n  │ b\n  … 3 more lines (2 KiB)");
        e.label = "error".into();
        e.cut_lines = 0;
        assert_eq!(e.lines(), "  ✗ a\n  ✗ b\n  … 2 KiB cut");
        let call = Entry {
            kind: "tool-call".into(),
            label: "Bash".into(),
            ..Entry::raw("ls -l".into())
        };
        assert_eq!(call.lines(), "→ Bash ls -l");
    }
}
