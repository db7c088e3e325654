//! A port of the parts of swift-argument-parser (1.7) that `container` exercises: how the
//! command line is split into elements, the lenient per-command parse, positional and
//! pass-through arguments, subcommand descent, the built-in `--help`/`--version`, and the exact
//! error texts, usage lines and exit status 64 of parse errors.
//!
//! Kept close to the Swift structure on purpose (`SplitArguments`, `LenientParser`,
//! `CommandParser.descendingParse`, `ErrorMessageGenerator`) so that odd inputs fail the same
//! way they fail in the real CLI, e.g. `---x` anywhere before `--` is `Invalid option`, options
//! after the image or container ID belong to the process, and an unknown option in a command
//! without pass-through is only reported after that command's own validation.

use std::collections::HashMap;

use crate::errors::CliError;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Name {
    Short(char),
    Long(String),
    LongSingleDash(String),
}

impl Name {
    pub fn synopsis(&self) -> String {
        match self {
            Name::Short(c) => format!("-{c}"),
            Name::Long(s) => format!("--{s}"),
            Name::LongSingleDash(s) => format!("-{s}"),
        }
    }
    fn value_string(&self) -> String {
        match self {
            Name::Short(c) => c.to_string(),
            Name::Long(s) | Name::LongSingleDash(s) => s.clone(),
        }
    }
    fn is_short(&self) -> bool {
        matches!(self, Name::Short(_))
    }
}

/// How an option's value is parsed (`ExpressibleByArgument` or a transform).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum VType {
    Str,
    I64,
    I32,
    U32,
    Int,
    /// `system start --timeout`: a `Double`, or `ValidationError("Invalid timeout value: …")`.
    Seconds,
    Choice(&'static [&'static str]),
}

#[derive(Clone, Debug)]
pub struct ArgDef {
    pub key: &'static str,
    /// Empty for a positional argument.
    pub names: Vec<Name>,
    pub unary: bool,
    pub repeating: bool,
    pub optional: bool,
    /// `@Argument(parsing: .captureForPassthrough)`.
    pub passthrough: bool,
    pub value_name: String,
    pub help: &'static str,
    pub vtype: VType,
    /// For a nullary flag: the value it records (`false` for `--disable-…`).
    pub sets: bool,
    pub default_desc: Option<&'static str>,
    pub hidden: bool,
}

impl ArgDef {
    fn positional(&self) -> bool {
        self.names.is_empty()
    }
    fn preferred_name(&self) -> Option<&Name> {
        self.names
            .iter()
            .find(|n| !n.is_short())
            .or(self.names.first())
    }
    fn unadorned_synopsis(&self) -> String {
        if self.positional() {
            return format!("<{}>", self.value_name);
        }
        let name = self.preferred_name().expect("named").synopsis();
        if self.unary {
            format!("{name} <{}>", self.value_name)
        } else {
            name
        }
    }
    fn synopsis(&self) -> String {
        let mut s = self.unadorned_synopsis();
        if self.repeating {
            s += " ...";
        }
        if self.optional {
            s = format!("[{s}]");
        }
        s
    }
    fn non_optional_synopsis(&self) -> String {
        let mut s = self.unadorned_synopsis();
        if self.repeating {
            s += " ...";
        }
        s
    }
}

fn parse_names(spec: &str) -> Vec<Name> {
    spec.split_whitespace()
        .map(|n| {
            if let Some(l) = n.strip_prefix("--") {
                Name::Long(l.to_string())
            } else {
                Name::Short(n.chars().nth(1).expect("short name"))
            }
        })
        .collect()
}

fn default_value_name(names: &[Name]) -> String {
    names
        .iter()
        .find(|n| !n.is_short())
        .or(names.first())
        .map(|n| n.value_string())
        .unwrap_or_else(|| "value".into())
}

/// `@Flag` with a `false` default. `names` like `"--detach -d"` in declaration order.
pub fn flag(key: &'static str, names: &str, help: &'static str) -> ArgDef {
    let names = parse_names(names);
    ArgDef {
        key,
        value_name: default_value_name(&names),
        names,
        unary: false,
        repeating: false,
        optional: true,
        passthrough: false,
        help,
        vtype: VType::Str,
        sets: true,
        default_desc: None,
        hidden: false,
    }
}

/// `@Option` holding one value.
pub fn opt(key: &'static str, names: &str, value_name: Option<&str>, help: &'static str) -> ArgDef {
    let names = parse_names(names);
    ArgDef {
        key,
        value_name: value_name
            .map(str::to_string)
            .unwrap_or_else(|| default_value_name(&names)),
        names,
        unary: true,
        repeating: false,
        optional: true,
        passthrough: false,
        help,
        vtype: VType::Str,
        sets: true,
        default_desc: None,
        hidden: false,
    }
}

/// `@Option` collecting every value (`[String] = []`).
pub fn opts(
    key: &'static str,
    names: &str,
    value_name: Option<&str>,
    help: &'static str,
) -> ArgDef {
    ArgDef {
        repeating: true,
        ..opt(key, names, value_name, help)
    }
}

/// `@Argument`.
pub fn pos(key: &'static str, value_name: &str, help: &'static str) -> ArgDef {
    ArgDef {
        key,
        names: vec![],
        unary: true,
        repeating: false,
        optional: false,
        passthrough: false,
        value_name: value_name.to_string(),
        help,
        vtype: VType::Str,
        sets: true,
        default_desc: None,
        hidden: false,
    }
}

impl ArgDef {
    pub fn typed(mut self, vtype: VType) -> Self {
        self.vtype = vtype;
        self
    }
    pub fn default(mut self, d: &'static str) -> Self {
        self.default_desc = Some(d);
        self
    }
    pub fn repeating(mut self) -> Self {
        self.repeating = true;
        self
    }
    pub fn optional(mut self) -> Self {
        self.optional = true;
        self
    }
    pub fn passthrough(mut self) -> Self {
        self.passthrough = true;
        self.repeating = true;
        self
    }
    pub fn sets(mut self, v: bool) -> Self {
        self.sets = v;
        self
    }
}

/// One command of the tree.
#[derive(Clone, Debug)]
pub struct CommandSpec {
    pub name: &'static str,
    pub aliases: &'static [&'static str],
    pub abstract_: &'static str,
    pub args: Vec<ArgDef>,
    pub subcommands: Vec<CommandSpec>,
    /// Real subcommands this stand-in does not implement (names and aliases).
    pub unimplemented: &'static [&'static str],
    /// The root's hidden `DefaultCommand` (plugin lookup) takes whatever is left.
    pub default_subcommand: bool,
}

impl CommandSpec {
    fn includes_passthrough(&self) -> bool {
        self.args.iter().any(|a| a.passthrough)
    }
    fn child(&self, name: &str) -> Option<&CommandSpec> {
        self.subcommands
            .iter()
            .find(|c| c.name == name || c.aliases.contains(&name))
    }
    fn visible_args(&self) -> impl Iterator<Item = &ArgDef> {
        self.args.iter().filter(|a| !a.hidden)
    }
}

/// The synopsis line of `UsageGenerator`.
pub fn usage_line(stack: &[&CommandSpec]) -> String {
    let tool = stack.iter().map(|c| c.name).collect::<Vec<_>>().join(" ");
    let cmd = stack.last().expect("stack");
    let args: Vec<&ArgDef> = cmd.visible_args().collect();
    let mut usage = match args.len() {
        0 => tool.clone(),
        n if n > 12 => {
            let kept: Vec<&ArgDef> = args
                .iter()
                .copied()
                .filter(|a| a.positional() || !a.optional)
                .collect();
            if !kept.is_empty() && kept.len() <= 12 {
                format!(
                    "{tool} [<options>] {}",
                    kept.iter()
                        .map(|a| a.synopsis())
                        .collect::<Vec<_>>()
                        .join(" ")
                )
            } else {
                format!("{tool} <options>")
            }
        }
        _ => format!(
            "{tool} {}",
            args.iter()
                .map(|a| a.synopsis())
                .collect::<Vec<_>>()
                .join(" ")
        ),
    };
    if !cmd.subcommands.is_empty() || !cmd.unimplemented.is_empty() {
        if !usage.ends_with(' ') {
            usage.push(' ');
        }
        usage.push_str("<subcommand>");
    }
    usage
}

/// `Usage: …` plus the `See '… --help'` hint, as printed under a parse error.
pub fn usage_block(stack: &[&CommandSpec]) -> String {
    let tool = stack.iter().map(|c| c.name).collect::<Vec<_>>().join(" ");
    format!(
        "Usage: {}\n  See '{tool} --help' for more information.",
        usage_line(stack)
    )
}

/// An approximation of swift-argument-parser's help screen (the stand-in does not copy the
/// real help text word for word; nothing should parse it).
pub fn help_text(stack: &[&CommandSpec]) -> String {
    let cmd = stack.last().expect("stack");
    let mut out = String::new();
    if !cmd.abstract_.is_empty() {
        out += &format!("OVERVIEW: {}\n\n", cmd.abstract_);
    }
    out += &format!("USAGE: {}\n", usage_line(stack));
    let positionals: Vec<&ArgDef> = cmd.visible_args().filter(|a| a.positional()).collect();
    if !positionals.is_empty() {
        out += "\nARGUMENTS:\n";
        for a in positionals {
            out += &format!("  {:<24}{}\n", format!("<{}>", a.value_name), a.help);
        }
    }
    out += "\nOPTIONS:\n";
    for a in cmd.visible_args().filter(|a| !a.positional()) {
        let mut names: Vec<&Name> = a.names.iter().filter(|n| n.is_short()).collect();
        names.extend(a.names.iter().filter(|n| !n.is_short()));
        let mut left = names
            .iter()
            .map(|n| n.synopsis())
            .collect::<Vec<_>>()
            .join(", ");
        if a.unary {
            left += &format!(" <{}>", a.value_name);
        }
        let mut help = a.help.to_string();
        if let Some(d) = a.default_desc {
            help += &format!(" (default: {d})");
        }
        out += &format!("  {left:<24}{help}\n");
    }
    out += &format!("  {:<24}{}\n", "-h, --help", "Show help information.");
    if !cmd.subcommands.is_empty() {
        out += "\nSUBCOMMANDS:\n";
        for s in cmd.subcommands.iter().filter(|s| !s.abstract_.is_empty()) {
            out += &format!("  {:<24}{}\n", s.name, s.abstract_);
        }
        let tool = stack.iter().map(|c| c.name).collect::<Vec<_>>().join(" ");
        out += &format!("\n  See '{tool} help <subcommand>' for detailed help.\n");
    }
    out.trim_end().to_string()
}

// ---------------------------------------------------------------------------------------
// SplitArguments

#[derive(Clone, Debug)]
enum Kind {
    /// An option, with the value attached by `=` if any.
    Opt(Name, Option<String>),
    Value(String),
    Terminator,
}

#[derive(Clone, Debug)]
struct Elem {
    input: usize,
    /// `None`: the complete argument; `Some(i)`: the i-th letter of a `-abc` pack.
    sub: Option<usize>,
    kind: Kind,
    used: bool,
}

impl Elem {
    fn is_value(&self) -> bool {
        matches!(self.kind, Kind::Value(_))
    }
    fn has_subarguments(&self) -> bool {
        matches!(&self.kind, Kind::Opt(Name::LongSingleDash(_), None))
    }
}

/// The parser errors of `ParserError` that `container` can hit.
#[derive(Clone, Debug)]
enum PErr {
    InvalidOption(String),
    UnknownOption(Name),
    MissingValue(Name),
    MissingValueComposite {
        short: Name,
        composite: Name,
    },
    UnexpectedValue(Name, String),
    UnexpectedExtra(Vec<String>),
    NoValue(&'static str),
    BadValue {
        name: Name,
        value: String,
        key: &'static str,
        custom: Option<String>,
    },
    /// `ParserError.userValidationError(ValidationError)`.
    Validation(String),
}

struct Split {
    original: Vec<String>,
    elems: Vec<Elem>,
}

impl Split {
    fn new(args: &[String]) -> Result<Split, PErr> {
        let mut elems = Vec::new();
        let mut terminated = false;
        for (i, arg) in args.iter().enumerate() {
            if terminated {
                elems.push(Elem {
                    input: i,
                    sub: None,
                    kind: Kind::Value(arg.clone()),
                    used: false,
                });
                continue;
            }
            let dashes = arg.chars().take_while(|c| *c == '-').count();
            if dashes == arg.chars().count() {
                // Only dashes (or empty).
                match dashes {
                    0 | 1 => elems.push(Elem {
                        input: i,
                        sub: None,
                        kind: Kind::Value(arg.clone()),
                        used: false,
                    }),
                    2 => {
                        elems.push(Elem {
                            input: i,
                            sub: None,
                            kind: Kind::Terminator,
                            used: false,
                        });
                        terminated = true;
                    }
                    _ => return Err(PErr::InvalidOption(arg.clone())),
                }
                continue;
            }
            match dashes {
                0 => elems.push(Elem {
                    input: i,
                    sub: None,
                    kind: Kind::Value(arg.clone()),
                    used: false,
                }),
                1 => {
                    let rem = &arg[1..];
                    let make = |s: &str| {
                        if s.chars().count() == 1 {
                            Name::Short(s.chars().next().unwrap())
                        } else {
                            Name::LongSingleDash(s.to_string())
                        }
                    };
                    if let Some(eq) = rem.find('=') {
                        let name = &rem[..eq];
                        if name.is_empty() {
                            return Err(PErr::InvalidOption(make(rem).synopsis()));
                        }
                        elems.push(Elem {
                            input: i,
                            sub: None,
                            kind: Kind::Opt(make(name), Some(rem[eq + 1..].to_string())),
                            used: false,
                        });
                    } else {
                        let chars: Vec<char> = rem.chars().collect();
                        if chars.len() == 1 {
                            elems.push(Elem {
                                input: i,
                                sub: None,
                                kind: Kind::Opt(Name::Short(chars[0]), None),
                                used: false,
                            });
                        } else {
                            elems.push(Elem {
                                input: i,
                                sub: None,
                                kind: Kind::Opt(Name::LongSingleDash(rem.to_string()), None),
                                used: false,
                            });
                            for (j, c) in chars.iter().enumerate() {
                                elems.push(Elem {
                                    input: i,
                                    sub: Some(j),
                                    kind: Kind::Opt(Name::Short(*c), None),
                                    used: false,
                                });
                            }
                        }
                    }
                }
                2 => {
                    let (base, value) = match arg.find('=') {
                        Some(eq) => (&arg[..eq], &arg[eq + 1..]),
                        None => (arg.as_str(), ""),
                    };
                    let name = Name::Long(base[2..].to_string());
                    let value = if value.is_empty() {
                        None
                    } else {
                        Some(value.to_string())
                    };
                    elems.push(Elem {
                        input: i,
                        sub: None,
                        kind: Kind::Opt(name, value),
                        used: false,
                    });
                }
                _ => return Err(PErr::InvalidOption(arg.clone())),
            }
        }
        Ok(Split {
            original: args.to_vec(),
            elems,
        })
    }

    /// Marks an element used; a pack and its letters go together.
    fn use_elem(&mut self, idx: usize) {
        let input = self.elems[idx].input;
        match self.elems[idx].sub {
            None => {
                for e in self.elems.iter_mut().filter(|e| e.input == input) {
                    e.used = true;
                }
            }
            Some(_) => {
                self.elems[idx].used = true;
                for e in self
                    .elems
                    .iter_mut()
                    .filter(|e| e.input == input && e.sub.is_none())
                {
                    e.used = true;
                }
            }
        }
    }

    fn unused(&self) -> impl Iterator<Item = (usize, &Elem)> {
        self.elems.iter().enumerate().filter(|(_, e)| !e.used)
    }

    fn contains(&self, names: &[Name]) -> bool {
        self.unused().any(|(_, e)| match &e.kind {
            Kind::Opt(n, _) => names.contains(n),
            _ => false,
        })
    }
}

/// The values a command received.
#[derive(Clone, Debug, Default)]
pub struct Values {
    map: HashMap<&'static str, Vec<String>>,
}

impl Values {
    fn push(&mut self, key: &'static str, v: String, repeating: bool) {
        let e = self.map.entry(key).or_default();
        if !repeating {
            e.clear();
        }
        e.push(v);
    }
    pub fn flag(&self, key: &str) -> bool {
        self.map
            .get(key)
            .and_then(|v| v.last())
            .map(|v| v == "true")
            .unwrap_or(false)
    }
    pub fn opt(&self, key: &str) -> Option<String> {
        self.map.get(key).and_then(|v| v.last()).cloned()
    }
    pub fn list(&self, key: &str) -> Vec<String> {
        self.map.get(key).cloned().unwrap_or_default()
    }
    pub fn has(&self, key: &str) -> bool {
        self.map.contains_key(key)
    }
}

/// What the command line asks for.
pub enum Outcome {
    /// Run the command at `path` (names, root first) with these values.
    Run {
        path: Vec<&'static str>,
        values: Values,
    },
    /// Print this on stdout and exit 0.
    Help(String),
    Version,
    /// A parse error: print this on stderr and exit 64.
    Usage(String),
    /// A validation error of the command itself (exit 1).
    Failed(CliError),
    /// A real subcommand the stand-in does not implement.
    Unimplemented(String),
}

fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for i in 1..=a.len() {
        let mut cur = vec![i; b.len() + 1];
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            cur[j] = (prev[j] + 1).min(cur[j - 1] + 1).min(prev[j - 1] + cost);
        }
        prev = cur;
    }
    prev[b.len()]
}

fn unknown_option_message(cmd: &CommandSpec, name: &Name) -> String {
    if name.is_short() {
        return format!("Unknown option '{}'", name.synopsis());
    }
    let target = name.synopsis();
    let mut best: Option<(usize, String)> = None;
    for a in cmd.visible_args() {
        for n in &a.names {
            if n.is_short() {
                continue;
            }
            let d = edit_distance(&n.synopsis(), &target);
            if d < 4 && best.as_ref().map(|(bd, _)| d < *bd).unwrap_or(true) {
                best = Some((d, n.synopsis()));
            }
        }
    }
    match best {
        Some((_, s)) => format!("Unknown option '{target}'. Did you mean '{s}'?"),
        None => format!("Unknown option '{target}'"),
    }
}

fn find_arg<'a>(cmd: &'a CommandSpec, name: &Name) -> Option<&'a ArgDef> {
    cmd.args.iter().find(|a| a.names.contains(name))
}

/// (message, help line) of a parser error, as `ErrorMessageGenerator` writes them.
fn error_texts(cmd: &CommandSpec, e: &PErr) -> (String, String) {
    match e {
        PErr::InvalidOption(s) => (format!("Invalid option: {s}"), String::new()),
        PErr::UnknownOption(n) => (unknown_option_message(cmd, n), String::new()),
        PErr::MissingValue(n) => {
            let (msg, help) = match find_arg(cmd, n) {
                Some(a) => (
                    format!("Missing value for '{} <{}>'", n.synopsis(), a.value_name),
                    format!("{} <{}>  {}", n.synopsis(), a.value_name, a.help),
                ),
                None => (
                    format!("Missing value for '{}'", n.synopsis()),
                    String::new(),
                ),
            };
            (msg, help)
        }
        PErr::MissingValueComposite { short, composite } => {
            let unknown = unknown_option_message(cmd, composite);
            let missing = match find_arg(cmd, short) {
                Some(a) => format!(
                    "Missing value for '{} <{}>'",
                    short.synopsis(),
                    a.value_name
                ),
                None => format!("Missing value for '{}'", short.synopsis()),
            };
            (
                format!("{unknown}\n   or: {missing} in '{}'", composite.synopsis()),
                String::new(),
            )
        }
        PErr::UnexpectedValue(n, v) => (
            format!(
                "The option '{}' does not take any value, but '{v}' was specified.",
                n.synopsis()
            ),
            String::new(),
        ),
        PErr::UnexpectedExtra(values) => match values.len() {
            1 => (
                format!("Unexpected argument '{}'", values[0]),
                String::new(),
            ),
            n => (
                format!("{n} unexpected arguments: '{}'", values.join("', '")),
                String::new(),
            ),
        },
        PErr::NoValue(key) => {
            let a = cmd.args.iter().find(|a| a.key == *key).expect("key");
            (
                format!("Missing expected argument '{}'", a.non_optional_synopsis()),
                format!("<{}>  {}", a.value_name, a.help),
            )
        }
        PErr::BadValue {
            name,
            value,
            key,
            custom,
        } => {
            let a = cmd.args.iter().find(|a| a.key == *key).expect("key");
            let suffix = match custom {
                Some(c) => format!(": {c}"),
                None => match a.vtype {
                    VType::Choice(values) => {
                        let quoted: Vec<String> = values.iter().map(|v| format!("'{v}'")).collect();
                        if quoted.len() <= 2 {
                            format!(". Please provide one of {}.", quoted.join(" and "))
                        } else {
                            format!(
                                ". Please provide one of {} or {}.",
                                quoted[..quoted.len() - 1].join(", "),
                                quoted[quoted.len() - 1]
                            )
                        }
                    }
                    _ => String::new(),
                },
            };
            (
                format!(
                    "The value '{value}' is invalid for '{} <{}>'{suffix}",
                    name.synopsis(),
                    a.value_name
                ),
                format!("{} <{}>  {}", name.synopsis(), a.value_name, a.help),
            )
        }
        PErr::Validation(m) => (m.clone(), String::new()),
    }
}

fn usage_error(stack: &[&CommandSpec], e: &PErr) -> Outcome {
    let cmd = stack.last().expect("stack");
    let (message, help) = error_texts(cmd, e);
    let mut text = String::new();
    if !message.is_empty() {
        text += &format!("Error: {message}\n");
    }
    if !help.is_empty() {
        text += &format!("Help:  {help}\n");
    }
    text += &usage_block(stack);
    Outcome::Usage(text)
}

/// `Int64(argument:)` and friends: an optional sign, then ASCII digits.
fn parse_int<T: std::str::FromStr>(s: &str) -> Option<T> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    s.strip_prefix('+').unwrap_or(s).parse().ok()
}

fn check_value(a: &ArgDef, name: &Name, value: &str) -> Result<(), PErr> {
    let bad = |custom: Option<String>| PErr::BadValue {
        name: name.clone(),
        value: value.to_string(),
        key: a.key,
        custom,
    };
    let ok = match a.vtype {
        VType::Str => true,
        VType::I64 => parse_int::<i64>(value).is_some(),
        VType::I32 => parse_int::<i32>(value).is_some(),
        VType::U32 => parse_int::<u32>(value).is_some(),
        VType::Int => parse_int::<i64>(value).is_some(),
        VType::Choice(values) => values.contains(&value),
        VType::Seconds => {
            if value.parse::<f64>().is_err() {
                return Err(bad(Some(format!("Invalid timeout value: {value}"))));
            }
            true
        }
    };
    if ok {
        Ok(())
    } else {
        Err(bad(None))
    }
}

/// `LenientParser.parse` for one command: options first, then positionals.
fn lenient(cmd: &CommandSpec, split: &mut Split, default_captures: bool) -> Result<Values, PErr> {
    let captures = default_captures || cmd.includes_passthrough();
    let mut values = Values::default();
    let mut i = 0;
    while i < split.elems.len() {
        if split.elems[i].used {
            i += 1;
            continue;
        }
        let kind = split.elems[i].kind.clone();
        match kind {
            Kind::Value(v) => {
                if let Some(child) = cmd.child(&v) {
                    if !child.includes_passthrough() && default_captures {
                        i += 1;
                        continue;
                    } else if child.includes_passthrough() {
                        break;
                    }
                } else if cmd.unimplemented.contains(&v.as_str()) && default_captures {
                    i += 1;
                    continue;
                }
                if captures {
                    break;
                }
            }
            Kind::Opt(name, attached) => {
                let Some(a) = find_arg(cmd, &name) else {
                    if captures && !split.elems[i].has_subarguments() {
                        break;
                    }
                    i += 1;
                    continue;
                };
                if !a.unary {
                    if let Some(v) = attached {
                        return Err(PErr::UnexpectedValue(name, v));
                    }
                    values.push(a.key, a.sets.to_string(), false);
                    split.use_elem(i);
                } else {
                    let value = if let Some(v) = attached {
                        split.use_elem(i);
                        v
                    } else {
                        // The next complete element after this one, if it is a value.
                        let next = (i + 1..split.elems.len())
                            .find(|&j| !split.elems[j].used && split.elems[j].sub.is_none());
                        match next {
                            Some(j) if split.elems[j].is_value() => {
                                let Kind::Value(v) = split.elems[j].kind.clone() else {
                                    unreachable!()
                                };
                                split.use_elem(i);
                                split.use_elem(j);
                                v
                            }
                            _ => {
                                if split.elems[i].sub.is_some() {
                                    let input = split.elems[i].input;
                                    let composite = Name::LongSingleDash(
                                        split.original[input][1..].to_string(),
                                    );
                                    return Err(PErr::MissingValueComposite {
                                        short: name,
                                        composite,
                                    });
                                }
                                return Err(PErr::MissingValue(name));
                            }
                        }
                    };
                    check_value(a, &name, &value)?;
                    values.push(a.key, value, a.repeating);
                }
            }
            Kind::Terminator => {}
        }
        i += 1;
    }

    // parsePositionalValues
    let mut stack: Vec<usize> = split
        .elems
        .iter()
        .enumerate()
        .filter(|(_, e)| !e.used && e.sub.is_none())
        .map(|(j, _)| j)
        .collect();
    stack.reverse();
    'args: for a in cmd.args.iter().filter(|a| a.positional()) {
        loop {
            let picked = loop {
                match stack.pop() {
                    None => break None,
                    Some(j) if split.elems[j].is_value() || a.passthrough => break Some(j),
                    Some(_) => continue,
                }
            };
            let Some(j) = picked else {
                break 'args;
            };
            let value = split.original[split.elems[j].input].clone();
            values.push(a.key, value, true);
            split.use_elem(j);
            if !a.repeating {
                break;
            }
        }
    }
    Ok(values)
}

fn help_names() -> Vec<Name> {
    vec![
        Name::Short('h'),
        Name::Long("help".into()),
        Name::Long("help-hidden".into()),
    ]
}

/// `checkForBuiltInFlags`.
fn builtin(split: &Split, stack: &[&CommandSpec], solo: bool) -> Option<Outcome> {
    if solo {
        let unused: Vec<&Elem> = split.unused().map(|(_, e)| e).collect();
        if unused.is_empty() {
            return None;
        }
        if unused.iter().any(|e| e.input != unused[0].input) {
            return None;
        }
    }
    if split.contains(&help_names()) {
        return Some(Outcome::Help(help_text(stack)));
    }
    if split.contains(&[Name::Long("version".into())]) {
        return Some(Outcome::Version);
    }
    None
}

/// Command-specific checks run after decoding (`validate()`), returning `Err` with either a
/// validation message (exit 64) or a runtime error (exit 1).
pub type Validator = fn(&[&'static str], &Values) -> Result<(), Result<String, CliError>>;

/// `CommandParser.parse(arguments:)`.
pub fn parse(root: &CommandSpec, args: &[String], validate: Validator) -> Outcome {
    let mut split = match Split::new(args) {
        Ok(s) => s,
        Err(e) => return usage_error(&[root], &e),
    };
    let mut stack: Vec<&CommandSpec> = vec![root];
    let mut all = Values::default();
    let mut path: Vec<&'static str> = vec![root.name];
    let mut in_default = false;
    loop {
        let cmd = *stack.last().expect("stack");
        let default_captures = cmd.default_subcommand;
        let values = match lenient(cmd, &mut split, default_captures) {
            Ok(v) => v,
            Err(e) => return usage_error(&stack, &e),
        };
        // Decoding (option groups validate themselves as they are decoded, before the
        // arguments declared after them), then the command's own validation.
        if let Err(e) = validate(&path, &values) {
            if let Some(o) = builtin(&split, &stack, false) {
                return o;
            }
            return match e {
                Ok(message) => usage_error(&stack, &PErr::Validation(message)),
                Err(err) => Outcome::Failed(err),
            };
        }
        for a in cmd.args.iter().filter(|a| a.positional() && !a.optional) {
            if !values.has(a.key) {
                if let Some(o) = builtin(&split, &stack, false) {
                    return o;
                }
                return usage_error(&stack, &PErr::NoValue(a.key));
            }
        }
        for (k, v) in values.map {
            all.map.insert(k, v);
        }
        if in_default {
            break;
        }
        // consumeNextCommand: the first unused element, if a value naming a subcommand.
        let first = split.unused().next().map(|(j, e)| (j, e.kind.clone()));
        if let Some((j, Kind::Value(v))) = first {
            if let Some(child) = cmd.child(&v) {
                split.use_elem(j);
                stack.push(child);
                path.push(child.name);
                continue;
            }
            if cmd.unimplemented.contains(&v.as_str()) {
                let mut p = path.join(" ");
                p.push(' ');
                p.push_str(&v);
                return Outcome::Unimplemented(p);
            }
        }
        if let Some(o) = builtin(&split, &stack, true) {
            return o;
        }
        if cmd.default_subcommand {
            stack.push(default_command());
            path.push("");
            in_default = true;
            continue;
        }
        break;
    }
    if in_default {
        stack.pop();
        path.pop();
        path.push("<default>");
    }
    if let Some(o) = builtin(&split, &stack, false) {
        return o;
    }
    // extractLastParsedValue: everything must be used.
    let leftovers: Vec<&Elem> = split
        .unused()
        .map(|(_, e)| e)
        .filter(|e| !matches!(e.kind, Kind::Terminator))
        .collect();
    if let Some(e) = leftovers.iter().find(|e| matches!(e.kind, Kind::Opt(..))) {
        let Kind::Opt(name, _) = &e.kind else {
            unreachable!()
        };
        return usage_error(&stack, &PErr::UnknownOption(name.clone()));
    }
    if !leftovers.is_empty() {
        let complete: Vec<usize> = leftovers
            .iter()
            .filter(|e| e.sub.is_none())
            .map(|e| e.input)
            .collect();
        let extra: Vec<String> = leftovers
            .iter()
            .filter(|e| e.sub.is_none() || !complete.contains(&e.input))
            .map(|e| split.original[e.input].clone())
            .collect();
        return usage_error(&stack, &PErr::UnexpectedExtra(extra));
    }
    Outcome::Run { path, values: all }
}

fn default_command() -> &'static CommandSpec {
    use std::sync::OnceLock;
    static CELL: OnceLock<CommandSpec> = OnceLock::new();
    CELL.get_or_init(|| CommandSpec {
        name: "",
        aliases: &[],
        abstract_: "",
        args: vec![
            ArgDef {
                hidden: true,
                ..flag(
                    "debug",
                    "--debug",
                    "Enable debug output [environment: CONTAINER_DEBUG]",
                )
            },
            pos("remaining", "remaining", "").optional().passthrough(),
        ],
        subcommands: vec![],
        unimplemented: &[],
        default_subcommand: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn passthrough_args() -> CommandSpec {
        CommandSpec {
            name: "p",
            aliases: &[],
            abstract_: "",
            args: vec![
                flag("verbose", "--verbose", ""),
                flag("useFiles", "-f", ""),
                flag("useStandardInput", "-i", ""),
                opt("config", "--config", None, ""),
                pos("names", "names", "").optional().passthrough(),
            ],
            subcommands: vec![],
            unimplemented: &[],
            default_subcommand: false,
        }
    }

    fn no_validation(_: &[&'static str], _: &Values) -> Result<(), Result<String, CliError>> {
        Ok(())
    }

    /// swift-argument-parser's own `testParsing_repeatingCaptureForPassthrough`.
    #[test]
    fn capture_for_passthrough_like_swift_argument_parser() {
        // argv, --verbose, -f, -i, --config, names
        type Case<'a> = (&'a [&'a str], bool, bool, bool, &'a str, &'a [&'a str]);
        let cases: &[Case] = &[
            (&[], false, false, false, "", &[]),
            (&["--other"], false, false, false, "", &["--other"]),
            (
                &["--verbose", "one", "two", "three"],
                true,
                false,
                false,
                "",
                &["one", "two", "three"],
            ),
            (
                &["one", "two", "three", "--other", "--verbose"],
                false,
                false,
                false,
                "",
                &["one", "two", "three", "--other", "--verbose"],
            ),
            (
                &["--verbose", "--other", "one", "two", "three"],
                true,
                false,
                false,
                "",
                &["--other", "one", "two", "three"],
            ),
            (
                &["--verbose", "--other", "one", "--", "two", "three"],
                true,
                false,
                false,
                "",
                &["--other", "one", "--", "two", "three"],
            ),
            (
                &["--", "--verbose", "--other", "one", "two", "three"],
                false,
                false,
                false,
                "",
                &["--", "--verbose", "--other", "one", "two", "three"],
            ),
            (
                &["-one", "-two", "three"],
                false,
                false,
                false,
                "",
                &["-one", "-two", "three"],
            ),
            (
                &["--config", "release", "one", "two", "--config", "debug"],
                false,
                false,
                false,
                "release",
                &["one", "two", "--config", "debug"],
            ),
            (
                &["--config", "release", "--config", "debug", "one", "two"],
                false,
                false,
                false,
                "debug",
                &["one", "two"],
            ),
            (
                &["-if", "-one", "-two", "three"],
                false,
                true,
                true,
                "",
                &["-one", "-two", "three"],
            ),
            (
                &["-one", "-two", "-three", "-if", "--help"],
                false,
                false,
                false,
                "",
                &["-one", "-two", "-three", "-if", "--help"],
            ),
        ];
        let spec = passthrough_args();
        for (argv, verbose, files, stdin, config, names) in cases {
            let argv: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
            let Outcome::Run { values, .. } = parse(&spec, &argv, no_validation) else {
                panic!("{argv:?} did not parse");
            };
            assert_eq!(values.flag("verbose"), *verbose, "{argv:?}");
            assert_eq!(values.flag("useFiles"), *files, "{argv:?}");
            assert_eq!(values.flag("useStandardInput"), *stdin, "{argv:?}");
            assert_eq!(
                values.opt("config").unwrap_or_default(),
                *config,
                "{argv:?}"
            );
            assert_eq!(values.list("names"), *names, "{argv:?}");
        }
        let argv = vec!["-fib".to_string()];
        assert!(matches!(
            parse(&spec, &argv, no_validation),
            Outcome::Usage(_)
        ));
    }

    #[test]
    fn edit_distance_is_levenshtein() {
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("--detatch", "--detach"), 1);
    }
}
