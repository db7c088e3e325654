//! `stet board`'s costs and walls pages through the real binary, in a real headless
//! Chromium: the charts of a repository whose receipts a real drive left (the command
//! harness on the real Docker Engine, with an agent that reports its cost and tokens), and
//! the walls as `stet walls` proved them.

use std::path::PathBuf;
use std::time::Duration;

use stet_e2e::board::{request, RunningBoard};
use stet_e2e::{git, require_image, serial_drives, World, IMAGE};

/// An agent for the command harness that reports a cost and tokens on every call: it
/// writes `hello.txt` unless the item says to give up, and reviews with LAND.
const AGENT: &str = r#"#!/bin/sh
prompt=$(cat)
case "${STET_ROLE:-implement}" in
review)
    echo "stet-usage: input_tokens=500"
    echo "stet-cost-usd: 0.005"
    echo LAND
    ;;
*)
    echo "stet-usage: input_tokens=1000"
    echo "stet-usage: output_tokens=234"
    echo "stet-cost-usd: 0.0125"
    case "$prompt" in
    *"give up"*) echo "told to give up"; exit 1 ;;
    esac
    echo hi > hello.txt
    echo "wrote hello.txt"
    ;;
esac
"#;

/// A clone of a fresh remote set up for the command harness on Docker with [`AGENT`],
/// trusted, committed and pushed; returns the world and its remote.
fn world() -> (World, PathBuf) {
    require_image();
    let world = World::new();
    world.install("docker");
    world.install("command");
    let remote = world.clone_of_fresh_remote();
    let agent = world.root.path().join("bin/agent.sh");
    std::fs::create_dir_all(agent.parent().unwrap()).unwrap();
    stet_exec_support::write_executable(&agent, AGENT.as_bytes()).unwrap();
    std::fs::write(
        world.work.join("stet.toml"),
        format!(
            "[harness]\nprofiles = \"{}\"\n\n[sandbox]\nimage = \"{IMAGE}\"\n\n[drive]\ncheck = \"test -s hello.txt\"\n\n[plugins.command]\nimplement = [\"{}\"]\n",
            world.root.path().join("profiles").display(),
            agent.display()
        ),
    )
    .unwrap();
    let trusted = world.trust_in(&world.work);
    assert_eq!(trusted.code, 0, "{}", trusted.stderr);
    git(&world.work, &["add", "stet.toml"]);
    git(&world.work, &["commit", "--quiet", "-m", "configure stet"]);
    git(&world.work, &["push", "--quiet", "origin", "HEAD"]);
    (world, remote)
}

/// The number the page shows in the element `id`.
fn shown(browser: &stet_e2e::board::Browser, id: &str) -> f64 {
    let element = browser
        .find(&format!("#{id}"), Duration::from_secs(5))
        .unwrap();
    let text = browser.text_of(&element).unwrap();
    text.trim()
        .parse()
        .unwrap_or_else(|_| panic!("#{id} is not a number: {text:?}"))
}

/// Every receipt of the world's clone, as JSON.
fn receipts(world: &World) -> Vec<serde_json::Value> {
    let dir = world.work.join(".git/stet/receipts");
    std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
        .map(|e| serde_json::from_slice(&std::fs::read(e.path()).unwrap()).unwrap())
        .collect()
}

fn tokens_of(receipt: &serde_json::Value) -> f64 {
    receipt["usage"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|kv| kv[0].as_str().unwrap().ends_with("_tokens"))
        .map(|kv| kv[1].as_str().unwrap().parse::<f64>().unwrap())
        .sum()
}

#[test]
fn the_costs_page_charts_what_the_drives_receipts_say() {
    let _serial = serial_drives();
    let (world, remote) = world();
    let board = RunningBoard::start(&world, &[]);
    let browser = board.browser();
    browser.goto(&format!("{}/costs", board.base)).unwrap();
    let text = browser.text().unwrap();
    assert!(
        text.contains("No call has been made on this clone yet"),
        "{text}"
    );

    assert_eq!(world.add_pushed("Say hello in hello.txt").code, 0);
    stet_e2e::next_millisecond();
    assert_eq!(world.add_pushed("Please give up on this one").code, 0);
    let out = world.run_stet(&["drive", "--yes", "--harness", "command", "--rounds", "1"]);
    assert_eq!(
        stet_e2e::landed_on(&remote).len(),
        1,
        "one item lands:\n{}\n{}",
        out.stdout,
        out.stderr
    );

    let receipts = receipts(&world);
    let calls: Vec<&serde_json::Value> = receipts.iter().filter(|r| r["role"] != "proof").collect();
    assert!(
        calls.len() >= 3,
        "implement twice, review once: {receipts:#?}"
    );
    let cost: f64 = receipts.iter().filter_map(|r| r["cost_usd"].as_f64()).sum();
    let tokens: f64 = receipts.iter().map(tokens_of).sum();
    assert!(cost > 0.0 && tokens > 0.0, "{receipts:#?}");

    // The board reads the receipts directory again once it changed; the items' states come
    // from its snapshot of the remote, read again every few seconds: the landed and failed
    // chart shows both ends once a snapshot taken after the drive has them (one taken
    // between the landing and the failure shows the landing alone).
    let until = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        browser.goto(&format!("{}/costs", board.base)).unwrap();
        let ended = browser
            .execute(
                "const cells = [...document.querySelectorAll('#landed-failed tbody tr:last-child td')]; \
                 return cells.length ? cells[cells.length - 1].textContent : '';",
            )
            .unwrap();
        if !browser
            .find_all("#landed-failed svg.chart")
            .unwrap()
            .is_empty()
            && ended == "2"
        {
            break;
        }
        assert!(
            std::time::Instant::now() < until,
            "the landed and failed chart never showed: {}",
            browser.text().unwrap()
        );
        // (A pause between looks, not a wait for the event: the look above is the wait.)
        std::thread::sleep(Duration::from_millis(250));
    }
    assert_eq!(shown(&browser, "calls"), receipts.len() as f64);
    assert!((shown(&browser, "total-cost") - cost).abs() < 1e-6);
    assert_eq!(shown(&browser, "total-tokens"), tokens);

    // Every figure is an SVG drawn on the server, with its numbers in titles and a table.
    let charts = browser.find_all("svg.chart").unwrap();
    assert_eq!(charts.len(), 7, "{}", browser.source().unwrap());
    let source = browser.source().unwrap();
    assert!(!source.contains("<script>"), "no inline script");
    // The landed item's handle, from the queue, labels its calls' cost.
    let queue = world.run_stet(&["queue", "--json"]);
    let items = queue.json();
    let landed = items["items"]
        .as_array()
        .unwrap_or_else(|| panic!("{items:#}"))
        .iter()
        .find(|i| i["state"] == "landed")
        .unwrap_or_else(|| panic!("{items:#}"));
    let handle = landed["handle"].as_str().unwrap();
    let id = landed["id"].as_str().unwrap();
    let item_cost: f64 = calls
        .iter()
        .filter(|r| r["item"] == id)
        .filter_map(|r| r["cost_usd"].as_f64())
        .sum();
    let implement_cost = calls
        .iter()
        .find(|r| r["item"] == id && r["role"] == "implement")
        .and_then(|r| r["cost_usd"].as_f64())
        .unwrap();
    assert!(
        source.contains(&format!(
            "<title>{handle} · implement: {implement_cost} USD</title>"
        )),
        "the per-item chart's bar says its cost: {source}"
    );
    let item_total = browser
        .execute(&format!(
            "const row = [...document.querySelectorAll('#cost-per-item tbody tr')].find(r => r.querySelector('th').textContent === {handle:?}); return row.lastElementChild.textContent;"
        ))
        .unwrap();
    let item_total: f64 = item_total.as_str().unwrap().parse().unwrap();
    assert!(
        (item_total - item_cost).abs() < 1e-6,
        "{item_total} vs {item_cost}"
    );
    // Landed and failed so far: one of each by the last day.
    let ended = browser
        .execute(
            "return [...document.querySelectorAll('#landed-failed tbody tr:last-child td')].map(td => td.textContent);",
        )
        .unwrap();
    assert_eq!(ended, serde_json::json!(["1", "1", "2"]), "{source}");
    // Time per stage: one row per role the receipts name (the repository's check among
    // them), each the sum of its calls' time.
    let stages = browser
        .execute("return [...document.querySelectorAll('#time-per-stage tbody th')].map(th => th.textContent);")
        .unwrap();
    assert_eq!(
        stages,
        serde_json::json!(["implement", "check", "review"]),
        "{source}"
    );
    let implement_secs: f64 = calls
        .iter()
        .filter(|r| r["role"] == "implement")
        .map(|r| {
            (r["ended_unix_ms"].as_u64().unwrap() - r["started_unix_ms"].as_u64().unwrap()) as f64
                / 1000.0
        })
        .sum();
    let shown_secs = browser
        .execute(
            "const row = [...document.querySelectorAll('#time-per-stage tbody tr')].find(r => r.querySelector('th').textContent === 'implement'); return row.querySelector('td').textContent;",
        )
        .unwrap();
    let shown_secs: f64 = shown_secs.as_str().unwrap().parse().unwrap();
    assert!(
        (shown_secs - implement_secs).abs() < 0.01,
        "{shown_secs} vs {implement_secs}"
    );

    // The drive's start-up proof was kept: the walls page shows it.
    browser.goto(&format!("{}/walls", board.base)).unwrap();
    let text = browser.text().unwrap();
    assert!(text.contains("docker + command"), "{text}");
    assert!(!text.contains("Never proven here"), "{text}");
}

#[test]
fn the_walls_page_shows_the_last_proof_and_why_each_plugin_was_chosen() {
    // stet walls makes sandboxes, which a drive's reaping must not meet half made.
    let _serial = serial_drives();
    let (world, _remote) = world();
    let board = RunningBoard::start(&world, &[]);
    let browser = board.browser();
    browser.goto(&format!("{}/walls", board.base)).unwrap();
    let text = browser.text().unwrap();
    assert!(text.contains("Never proven here: run stet walls"), "{text}");
    // The plugins, each probed, and the selection's reasons.
    let plugins = browser
        .execute(
            "return [...document.querySelectorAll('table.plugins tbody tr')].map(r => [...r.children].slice(0, 4).map(c => c.textContent));",
        )
        .unwrap();
    let plugins = plugins.as_array().unwrap();
    for (name, kind) in [("command", "harness"), ("docker", "runtime")] {
        let row = plugins
            .iter()
            .find(|r| r[0] == name)
            .unwrap_or_else(|| panic!("{name} is listed: {plugins:?}"));
        assert_eq!(row[1], kind, "{row:?}");
        assert_eq!(row[3], "available", "{row:?}");
        assert!(!row[2].as_str().unwrap().is_empty(), "a version: {row:?}");
    }
    let selection = browser
        .find("ul.selection", Duration::from_secs(5))
        .and_then(|e| browser.text_of(&e))
        .unwrap();
    assert!(selection.contains("runtime: docker — "), "{selection}");
    assert!(selection.contains("harness: command — "), "{selection}");

    let out = world.run_stet(&["walls", "--harness", "command", "--json"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let proof = out.json();
    browser.goto(&format!("{}/walls", board.base)).unwrap();
    let text = browser.text().unwrap();
    assert!(!text.contains("Never proven here"), "{text}");
    assert!(text.contains("docker + command: every wall held"), "{text}");
    let rows = browser
        .execute(
            "return [...document.querySelectorAll('section.proof table.walls tbody tr')].map(r => [r.children[0].textContent, r.children[1].textContent, r.children[2].textContent]);",
        )
        .unwrap();
    let walls = proof["walls"].as_array().unwrap();
    assert_eq!(rows.as_array().unwrap().len(), walls.len(), "{rows:?}");
    for (row, wall) in rows.as_array().unwrap().iter().zip(walls) {
        assert_eq!(row[0], wall["state"], "{row:?} {wall}");
        assert_eq!(row[1], wall["wall"], "{row:?} {wall}");
        assert_eq!(row[2], wall["detail"], "{row:?} {wall}");
    }
    let kept = world.work.join(".git/stet/walls/docker+command.json");
    assert!(kept.is_file(), "the proof is kept in {}", kept.display());

    // Probe again: a POST with the session's form token; without it, refused.
    let again = browser
        .find("form.probe-again button", Duration::from_secs(5))
        .unwrap();
    browser.click(&again).unwrap();
    browser
        .wait_until(
            "location.hash === '#plugins' && document.querySelector('table.plugins') !== null",
            Duration::from_secs(60),
        )
        .unwrap();
    let cookie = board.session_cookie();
    let forged = request(
        board.port,
        "POST",
        "/walls",
        &[("Cookie", &cookie)],
        Some("csrf=forged"),
    );
    assert_eq!(forged.status, 403, "{forged:?}");
}
