//! A real browser for the board's tests and `cargo xtask screenshots`: headless Chromium
//! driven over WebDriver (chromedriver, both from Debian's packages:
//! `scripts/install-chromium.sh`), through fantoccini, behind a blocking surface a test
//! reads top to bottom.
//!
//! Each [`Browser`] is its own chromedriver on a port of its own choosing and its own
//! throw-away profile directory, so tests running at once share nothing.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub use fantoccini::elements::Element;
pub use fantoccini::Locator;

/// A headless Chromium and the chromedriver it runs under.
pub struct Browser {
    rt: tokio::runtime::Runtime,
    client: Option<fantoccini::Client>,
    driver: Child,
    profile: PathBuf,
}

/// A failure of the browser or its driver, as text for a test's message.
pub type Error = String;

impl Browser {
    /// Starts chromedriver and a headless Chromium session, `width`×`height`.
    pub fn start(width: u32, height: u32) -> Result<Browser, Error> {
        let mut driver = Command::new("chromedriver")
            .arg("--port=0")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| {
                format!(
                    "cannot start chromedriver ({e}): scripts/install-chromium.sh installs it \
                     (cargo xtask test runs it)"
                )
            })?;
        // Ready when it says on which port: read its lines until then (an event, not a wait).
        let stdout = driver.stdout.take().ok_or("chromedriver has no stdout")?;
        let mut lines = BufReader::new(stdout).lines();
        let port = loop {
            match lines.next() {
                Some(Ok(line)) => {
                    if let Some(rest) = line.split("started successfully on port ").nth(1) {
                        break rest.trim_end_matches('.').trim().to_string();
                    }
                }
                _ => {
                    let _ = driver.kill();
                    let _ = driver.wait();
                    return Err("chromedriver ended before saying its port".into());
                }
            }
        };
        // Keep draining its output so it never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        let profile =
            std::env::temp_dir().join(format!("stet-browser-{}-{}", std::process::id(), port));
        let _ = std::fs::create_dir_all(&profile);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start a runtime: {e}"))?;
        let mut args = vec![
            "--headless=new".to_string(),
            "--disable-gpu".to_string(),
            "--disable-dev-shm-usage".to_string(),
            "--no-first-run".to_string(),
            "--disable-extensions".to_string(),
            "--disable-background-networking".to_string(),
            "--disable-sync".to_string(),
            "--disable-default-apps".to_string(),
            "--hide-scrollbars".to_string(),
            "--force-device-scale-factor=1".to_string(),
            format!("--window-size={width},{height}"),
            format!("--user-data-dir={}", profile.display()),
        ];
        // Chromium's own sandbox needs user namespaces it is not given as root in a
        // container; the pages it opens are the board's, in a test.
        if is_root() {
            args.push("--no-sandbox".to_string());
        }
        let mut caps = serde_json::Map::new();
        caps.insert(
            "goog:chromeOptions".to_string(),
            serde_json::json!({ "args": args, "binary": chromium_binary() }),
        );
        let url = format!("http://127.0.0.1:{port}");
        let client = rt
            .block_on(
                fantoccini::ClientBuilder::new(
                    hyper_util::client::legacy::connect::HttpConnector::new(),
                )
                .capabilities(caps)
                .connect(&url),
            )
            .map_err(|e| format!("cannot start a Chromium session: {e}"));
        let client = match client {
            Ok(client) => client,
            Err(e) => {
                let _ = driver.kill();
                let _ = driver.wait();
                let _ = std::fs::remove_dir_all(&profile);
                return Err(e);
            }
        };
        Ok(Browser {
            rt,
            client: Some(client),
            driver,
            profile,
        })
    }

    fn client(&self) -> &fantoccini::Client {
        self.client
            .as_ref()
            .expect("the session is open until drop")
    }

    /// Opens `url` and waits for its load.
    pub fn goto(&self, url: &str) -> Result<(), Error> {
        self.rt
            .block_on(self.client().goto(url))
            .map_err(|e| format!("cannot open {url}: {e}"))
    }

    /// The page's address now.
    pub fn url(&self) -> Result<String, Error> {
        self.rt
            .block_on(self.client().current_url())
            .map(|u| u.to_string())
            .map_err(|e| format!("cannot read the address: {e}"))
    }

    /// The page's DOM as HTML.
    pub fn source(&self) -> Result<String, Error> {
        self.rt
            .block_on(self.client().source())
            .map_err(|e| format!("cannot read the page: {e}"))
    }

    /// The text the page shows (`document.body.innerText`).
    pub fn text(&self) -> Result<String, Error> {
        self.execute("return document.body ? document.body.innerText : ''")
            .map(|v| v.as_str().unwrap_or_default().to_string())
    }

    /// Runs `script` in the page (WebDriver's own channel: the page's policy does not apply
    /// to it) and returns what it returned.
    pub fn execute(&self, script: &str) -> Result<serde_json::Value, Error> {
        self.rt
            .block_on(self.client().execute(script, Vec::new()))
            .map_err(|e| format!("cannot run a script: {e}"))
    }

    /// The first element matching the CSS selector, waiting for it to appear (the
    /// WebDriver's wait, up to `patience`).
    pub fn find(&self, css: &str, patience: Duration) -> Result<Element, Error> {
        self.rt
            .block_on(
                self.client()
                    .wait()
                    .at_most(patience)
                    .for_element(Locator::Css(css)),
            )
            .map_err(|e| format!("no element {css}: {e}"))
    }

    /// Every element matching the CSS selector now.
    pub fn find_all(&self, css: &str) -> Result<Vec<Element>, Error> {
        self.rt
            .block_on(self.client().find_all(Locator::Css(css)))
            .map_err(|e| format!("cannot look for {css}: {e}"))
    }

    /// Clicks `element` (and waits for a navigation it starts to load).
    pub fn click(&self, element: &Element) -> Result<(), Error> {
        self.rt
            .block_on(element.click())
            .map_err(|e| format!("cannot click: {e}"))
    }

    /// Types `text` into `element`.
    pub fn type_into(&self, element: &Element, text: &str) -> Result<(), Error> {
        self.rt
            .block_on(element.send_keys(text))
            .map_err(|e| format!("cannot type: {e}"))
    }

    /// The text `element` shows.
    pub fn text_of(&self, element: &Element) -> Result<String, Error> {
        self.rt
            .block_on(element.text())
            .map_err(|e| format!("cannot read an element: {e}"))
    }

    /// Waits until `condition` (a script returning a boolean) holds, up to `patience`
    /// (WebDriver's wait: it asks again until then).
    pub fn wait_until(&self, condition: &str, patience: Duration) -> Result<(), Error> {
        let script = format!("return Boolean({condition})");
        let until = std::time::Instant::now() + patience;
        loop {
            if self.execute(&script)?.as_bool() == Some(true) {
                return Ok(());
            }
            if std::time::Instant::now() > until {
                return Err(format!(
                    "{condition} did not hold within {patience:?}; the page says:\n{}",
                    self.text().unwrap_or_default()
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// A PNG of the viewport.
    pub fn screenshot(&self) -> Result<Vec<u8>, Error> {
        self.rt
            .block_on(self.client().screenshot())
            .map_err(|e| format!("cannot take a screenshot: {e}"))
    }

    /// A PNG of the whole page, however tall (the window is grown to the page's height for
    /// it, then put back).
    pub fn screenshot_full(&self, width: u32) -> Result<Vec<u8>, Error> {
        let height = self
            .execute("return Math.ceil(document.documentElement.scrollHeight)")?
            .as_u64()
            .unwrap_or(900)
            .clamp(300, 6000) as u32;
        self.rt
            .block_on(self.client().set_window_size(width, height + 120))
            .map_err(|e| format!("cannot size the window: {e}"))?;
        self.screenshot()
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if let Some(client) = self.client.take() {
            let _ = self.rt.block_on(client.close());
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(1).map(|u| u == "0"))
        })
        .unwrap_or(false)
}

/// Debian's Chromium is a shell script starting the real binary; chromedriver wants the
/// binary.
fn chromium_binary() -> String {
    for candidate in ["/usr/lib/chromium/chromium", "/usr/bin/chromium"] {
        if std::path::Path::new(candidate).exists() {
            return candidate.to_string();
        }
    }
    "chromium".to_string()
}
