//! The binary interface's layouts, held against the committed record
//! (`plugin-api/abi-layouts.txt`): the frozen modules (1.0, 1.1, 1.2) must describe exactly
//! what they did, and the append-only `v1` may only have gained fields and methods at the
//! end of what it had. `STET_RECORD_LAYOUTS=1 cargo test -p stet-plugin-api --test layouts`
//! writes the record anew (for a new minor's appended methods, never for a frozen module).

use std::collections::BTreeMap;

use abi_stable::type_layout::{TLData, TypeLayout};
use abi_stable::StableAbi;
use stet_plugin_api::abi::{v1, v1_0, v1_1, v1_2};

/// Every type reachable from `root`, described by what the layout checker compares:
/// sizes, alignments, field names and types, function signatures, variants. A type is
/// named by the path it is first reached by from the root (`.new_runtime->.ROk`), in
/// field order: short type names repeat (every sabi_trait has a `VTable`, and generic
/// arguments are not in a layout's name), paths do not, and appending a field or a method
/// leaves every earlier path as it was.
fn describe(root: &'static TypeLayout) -> BTreeMap<String, Vec<String>> {
    fn walk(
        layout: &'static TypeLayout,
        path: String,
        seen: &mut std::collections::HashSet<abi_stable::std_types::UTypeId>,
        described: &mut BTreeMap<String, Vec<String>>,
    ) {
        if !seen.insert(layout.get_utypeid()) {
            return;
        }
        let mut lines = vec![format!(
            "size {} align {}",
            layout.size(),
            layout.alignment()
        )];
        let mut children: Vec<(&'static TypeLayout, String)> = Vec::new();
        let mut fields_of = |fields: abi_stable::type_layout::TLFields, lines: &mut Vec<String>| {
            for field in fields.iter() {
                lines.push(format!("field {}: {}", field.name(), field.full_type()));
                children.push((field.layout(), format!("{path}.{}", field.name())));
                for function in field.function_range().iter() {
                    let signature = function
                        .to_string()
                        .split_whitespace()
                        .collect::<Vec<_>>()
                        .join(" ");
                    lines.push(format!("  fn {signature}"));
                    for (i, param) in function.param_type_layouts.iter().enumerate() {
                        children.push((param(), format!("{path}.{}({i})", field.name())));
                    }
                    if let Some(returns) = function.return_type_layout() {
                        children.push((returns(), format!("{path}.{}->", field.name())));
                    }
                }
            }
        };
        match layout.data() {
            TLData::Primitive(p) => lines.push(format!("primitive {p:?}")),
            TLData::Opaque => lines.push("opaque".into()),
            TLData::Struct { fields } => {
                lines.push("struct".into());
                fields_of(fields, &mut lines);
            }
            TLData::Union { fields } => {
                lines.push("union".into());
                fields_of(fields, &mut lines);
            }
            TLData::Enum(e) => {
                lines.push(format!(
                    "enum ({}exhaustive): {}",
                    if e.exhaustiveness.is_exhaustive() {
                        ""
                    } else {
                        "non-"
                    },
                    e.variant_names_iter().collect::<Vec<_>>().join(", ")
                ));
                fields_of(e.fields, &mut lines);
            }
            TLData::PrefixType(p) => {
                lines.push(format!(
                    "prefix type, first suffix field {}",
                    p.first_suffix_field
                ));
                fields_of(p.fields, &mut lines);
            }
        }
        for phantom in layout.phantom_fields().iter() {
            children.push((phantom.layout(), format!("{path}<{}>", phantom.name())));
        }
        for (i, param) in layout.generics().type_params().iter().enumerate() {
            children.push((param(), format!("{path}<{i}>")));
        }
        described.insert(format!("{path}: {}", layout.full_type()), lines);
        for (child, child_path) in children {
            walk(child, child_path, seen, described);
        }
    }
    let mut described = BTreeMap::new();
    walk(root, String::new(), &mut Default::default(), &mut described);
    described
}

fn roots() -> Vec<(&'static str, &'static TypeLayout)> {
    vec![
        ("v1_0", <v1_0::StetPlugin_Ref as StableAbi>::LAYOUT),
        ("v1_1", <v1_1::StetPlugin_Ref as StableAbi>::LAYOUT),
        ("v1_2", <v1_2::StetPlugin_Ref as StableAbi>::LAYOUT),
        ("v1", <v1::StetPlugin_Ref as StableAbi>::LAYOUT),
    ]
}

fn render(module: &str, types: &BTreeMap<String, Vec<String>>) -> String {
    let mut out = format!("== {module} ==\n");
    for (name, lines) in types {
        out.push_str(&format!("type {name}\n"));
        for line in lines {
            out.push_str(&format!("    {line}\n"));
        }
    }
    out
}

/// The record, read back: module → type → lines.
fn parse(record: &str) -> BTreeMap<String, BTreeMap<String, Vec<String>>> {
    let mut modules: BTreeMap<String, BTreeMap<String, Vec<String>>> = BTreeMap::new();
    let (mut module, mut ty) = (String::new(), String::new());
    for line in record.lines() {
        if let Some(m) = line.strip_prefix("== ").and_then(|l| l.strip_suffix(" ==")) {
            module = m.to_string();
        } else if let Some(t) = line.strip_prefix("type ") {
            ty = t.to_string();
            modules
                .entry(module.clone())
                .or_default()
                .insert(ty.clone(), Vec::new());
        } else if let Some(l) = line.strip_prefix("    ") {
            modules
                .get_mut(&module)
                .and_then(|m| m.get_mut(&ty))
                .expect("a line inside a type")
                .push(l.to_string());
        }
    }
    modules
}

#[test]
fn frozen_layouts_never_change_and_v1_only_appends() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("abi-layouts.txt");
    let now: Vec<(&str, BTreeMap<String, Vec<String>>)> =
        roots().into_iter().map(|(m, l)| (m, describe(l))).collect();
    if std::env::var_os("STET_RECORD_LAYOUTS").is_some() {
        let text: String = now.iter().map(|(m, t)| render(m, t)).collect();
        std::fs::write(&path, text).unwrap();
    }
    let record = parse(&std::fs::read_to_string(&path).expect("plugin-api/abi-layouts.txt"));
    for (module, types) in &now {
        let recorded = record
            .get(*module)
            .unwrap_or_else(|| panic!("{module} is not recorded"));
        assert!(!recorded.is_empty(), "{module} recorded empty");
        for (name, was) in recorded {
            let is = types
                .get(name)
                .unwrap_or_else(|| panic!("{module}: type {name} is gone from the interface"));
            if *module == "v1" {
                // Append-only: what was there is still there, in order, and only more follows.
                assert!(
                    is.len() >= was.len() && is[..was.len()] == was[..],
                    "{module}: type {name} changed other than by appending:\nwas {was:#?}\nis {is:#?}"
                );
            } else {
                assert_eq!(is, was, "{module} is frozen, yet type {name} changed");
            }
        }
        if *module != "v1" {
            let added: Vec<&String> = types
                .keys()
                .filter(|k| !recorded.contains_key(*k))
                .collect();
            assert!(
                added.is_empty(),
                "{module} is frozen, yet gained types {added:?}"
            );
        }
    }
}
