//! Reading `container list --all --format json`, tolerant of both shapes the CLI has had.
//!
//! - 1.0 and later: `{"configuration": {…, "labels": {…}}, "id": "…", "status":
//!   {"networks": […], "startedDate": "<ISO 8601>", "state": "running"}}`, keys sorted.
//! - 0.8 to 0.12: `{"status": "running", "configuration": {…}, "networks": […],
//!   "startedDate": <seconds since 2001-01-01>}`, no top-level id.
//!
//! Only what a [`Listed`] holds is read: the id, the state word and the labels. Everything
//! else (networks at either level, dates as strings or numbers, keys a newer CLI adds) is
//! ignored, so that it cannot break listing. An element without an id anywhere is skipped.

use serde_json::Value;

/// One container as listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// The container's id (its `--name`).
    pub id: String,
    /// Its state word (`running`, `stopped`, `stopping`, `unknown`).
    pub state: String,
    /// Its labels, in the order listed.
    pub labels: Vec<(String, String)>,
}

/// Reads the whole output of `container list --format json`.
pub fn parse_list(text: &str) -> Result<Vec<Listed>, String> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(Vec::new());
    }
    let value: Value =
        serde_json::from_str(text).map_err(|e| format!("not JSON ({e}): {}", preview(text)))?;
    let items = match value {
        Value::Array(items) => items,
        Value::Null => Vec::new(),
        // Not seen yet; a newer CLI wrapping the list in an object is still read.
        Value::Object(fields) => match fields.into_iter().find(|(_, v)| v.is_array()) {
            Some((_, Value::Array(items))) => items,
            _ => return Err(format!("no list of containers in {}", preview(text))),
        },
        _ => return Err(format!("not a list of containers: {}", preview(text))),
    };
    Ok(items.iter().filter_map(container).collect())
}

fn container(item: &Value) -> Option<Listed> {
    let configuration = item.get("configuration");
    let id = text(item.get("id"))
        .or_else(|| configuration.and_then(|c| text(c.get("id"))))
        .filter(|id| !id.is_empty())?;
    let state = match item.get("status") {
        Some(Value::String(state)) => Some(state.clone()),
        Some(status @ Value::Object(_)) => text(status.get("state")),
        _ => None,
    }
    .or_else(|| text(item.get("state")))
    .unwrap_or_else(|| "unknown".to_string());
    let labels = configuration
        .and_then(|c| c.get("labels"))
        .or_else(|| item.get("labels"))
        .and_then(Value::as_object)
        .map(|labels| {
            labels
                .iter()
                .map(|(k, v)| {
                    let value = match v {
                        Value::String(s) => s.clone(),
                        Value::Null => String::new(),
                        other => other.to_string(),
                    };
                    (k.clone(), value)
                })
                .collect()
        })
        .unwrap_or_default();
    Some(Listed { id, state, labels })
}

fn text(value: Option<&Value>) -> Option<String> {
    value.and_then(Value::as_str).map(str::to_string)
}

fn preview(text: &str) -> String {
    let mut cut = text.len().min(120);
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    if cut < text.len() {
        format!("{}…", &text[..cut])
    } else {
        text.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `container list --all --format json` on 1.x (§3.1 of the reference): compact,
    /// sorted keys, ISO dates, networks under `status`; one running, one stopped (no
    /// `startedDate`, empty networks), and one that is not stet's.
    const LIST_1X: &str = r#"[{"configuration":{"capAdd":[],"capDrop":[],"creationDate":"2026-08-08T10:00:00Z","dns":{"nameservers":[],"options":[],"searchDomains":[]},"id":"stet-1a-2b-0","image":{"descriptor":{"digest":"sha256:abc","mediaType":"application/vnd.oci.image.index.v1+json","size":1234},"reference":"stet-lane:1"},"initProcess":{"arguments":["infinity"],"environment":["PATH=/usr/bin:/bin"],"executable":"sleep","rlimits":[],"supplementalGroups":[],"terminal":false,"user":{"id":{"gid":0,"uid":0}},"workingDirectory":"/lane"},"labels":{"stet.conformance":"42-7","stet.conformance.role":"main"},"mounts":[{"destination":"/lane","options":[],"source":"/tmp/lane","type":{"virtiofs":{}}}],"networks":[],"platform":{"architecture":"arm64","os":"linux"},"publishedPorts":[],"publishedSockets":[],"readOnly":false,"resources":{"cpuOverhead":0,"cpus":1,"memoryInBytes":536870912},"rosetta":false,"runtimeHandler":"container-runtime-linux","ssh":false,"sysctls":{},"useInit":false,"virtualization":false},"id":"stet-1a-2b-0","status":{"networks":[],"startedDate":"2026-08-08T10:00:01Z","state":"running"}},{"configuration":{"id":"stet-1a-2b-1","labels":{"stet.conformance":"42-7","stet.conformance.role":"kill"},"networks":[{"network":"default","options":{"hostname":"stet-1a-2b-1"}}]},"id":"stet-1a-2b-1","status":{"networks":[],"state":"stopped"}},{"configuration":{"id":"web","labels":{}},"id":"web","status":{"networks":[{"hostname":"web","ipv4Address":"192.168.64.5/24","ipv4Gateway":"192.168.64.1","network":"default","variant":"reserved"}],"startedDate":"2026-08-08T09:00:00Z","state":"running"},"futureKey":{"anything":[1,2,3]}}]"#;

    /// The same on 0.8–0.12 (§3.2): `status` a string, networks top-level, dates as
    /// seconds since 2001-01-01, no top-level id; the oldest with `address`/`gateway`.
    const LIST_0X: &str = r#"[{"status":"running","configuration":{"id":"stet-1a-2b-0","labels":{"stet.conformance":"42-7","stet.conformance.role":"main"},"image":{"reference":"stet-lane:1","descriptor":{"digest":"sha256:abc","mediaType":"m","size":1}},"resources":{"cpus":1,"memoryInBytes":536870912}},"networks":[],"startedDate":776340001.25},{"status":"stopped","configuration":{"id":"stet-1a-2b-1","labels":{"stet.conformance":"42-7","stet.conformance.role":"kill"}},"networks":[{"hostname":"stet-1a-2b-1","address":"192.168.64.6/24","gateway":"192.168.64.1","network":"default"}]},{"status":"running","configuration":{"id":"web","labels":{"empty":null,"number":3}},"networks":[{"hostname":"web","ipv4Address":"192.168.64.5/24","ipv4Gateway":"192.168.64.1","network":"default"}],"startedDate":776336400}]"#;

    fn label(k: &str, v: &str) -> (String, String) {
        (k.to_string(), v.to_string())
    }

    #[test]
    fn reads_the_1x_shape() {
        let listed = parse_list(LIST_1X).unwrap();
        assert_eq!(listed.len(), 3);
        assert_eq!(
            listed[0],
            Listed {
                id: "stet-1a-2b-0".into(),
                state: "running".into(),
                labels: vec![
                    label("stet.conformance", "42-7"),
                    label("stet.conformance.role", "main")
                ],
            }
        );
        assert_eq!(listed[1].state, "stopped");
        assert_eq!(listed[1].labels[1], label("stet.conformance.role", "kill"));
        assert_eq!(listed[2].id, "web");
        assert!(listed[2].labels.is_empty());
    }

    #[test]
    fn reads_the_0x_shape() {
        let listed = parse_list(LIST_0X).unwrap();
        assert_eq!(listed.len(), 3);
        assert_eq!(listed[0].id, "stet-1a-2b-0");
        assert_eq!(listed[0].state, "running");
        assert_eq!(
            listed[0].labels,
            vec![
                label("stet.conformance", "42-7"),
                label("stet.conformance.role", "main")
            ]
        );
        assert_eq!(listed[1].state, "stopped");
        assert_eq!(
            listed[2].labels,
            vec![label("empty", ""), label("number", "3")]
        );
    }

    #[test]
    fn both_shapes_read_the_same() {
        let strip = |l: Vec<Listed>| -> Vec<(String, String)> {
            l.into_iter().map(|c| (c.id, c.state)).collect()
        };
        assert_eq!(
            strip(parse_list(LIST_1X).unwrap()),
            strip(parse_list(LIST_0X).unwrap())
        );
    }

    #[test]
    fn an_empty_list_in_every_form() {
        assert_eq!(parse_list("[]").unwrap(), vec![]);
        assert_eq!(parse_list("[]\n").unwrap(), vec![]);
        assert_eq!(parse_list("").unwrap(), vec![]);
        assert_eq!(parse_list("null").unwrap(), vec![]);
    }

    #[test]
    fn pretty_printed_and_wrapped_lists_are_read() {
        let pretty = "[\n  {\n    \"id\" : \"a\",\n    \"status\" : {\n      \"state\" : \"running\"\n    }\n  }\n]\n";
        assert_eq!(parse_list(pretty).unwrap()[0].id, "a");
        let wrapped = r#"{"containers":[{"id":"b","status":{"state":"stopped"}}]}"#;
        assert_eq!(parse_list(wrapped).unwrap()[0].state, "stopped");
    }

    #[test]
    fn elements_without_an_id_are_skipped_and_a_missing_state_is_unknown() {
        let listed =
            parse_list(r#"[{"status":"running"},{"configuration":{"id":"c"}},"odd"]"#).unwrap();
        assert_eq!(
            listed,
            vec![Listed {
                id: "c".into(),
                state: "unknown".into(),
                labels: vec![]
            }]
        );
    }

    #[test]
    fn output_that_is_not_a_list_is_an_error_naming_it() {
        let e = parse_list("ID IMAGE OS ARCH STATE IP CPUS MEMORY STARTED\n").unwrap_err();
        assert!(e.starts_with("not JSON"), "{e}");
        assert!(e.contains("ID IMAGE"), "{e}");
        assert!(parse_list("42").is_err());
    }
}
