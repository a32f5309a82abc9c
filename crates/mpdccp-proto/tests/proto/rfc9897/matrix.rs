//! The RFC 9897 requirements matrix cannot rot silently.
//!
//! `docs/rfc9897/requirements.toml` holds one entry per normative sentence
//! (BCP 14 key word in capitals) of §3 and §4 of the vendored source text
//! `docs/spec/draft-ietf-tsvwg-multipath-dccp-25.mkd` (published unchanged
//! as RFC 9897). In the spirit of duvet / s2n-quic's compliance
//! annotations, these tests fail when
//!
//! * a normative sentence of the text has no entry, or an entry quotes a
//!   sentence the text does not contain (`every_normative_sentence_has_an_entry`);
//! * an entry names a test function that does not exist, or an
//!   implementation place (`Type::function`) that no crate defines
//!   (`every_named_test_and_place_exists`);
//! * a row is "not implemented" without citing a finding (F1, F2, …) of
//!   `docs/rfc9897/FINDINGS.md` that says what to change;
//! * `docs/rfc9897/MATRIX.md` differs from what the TOML generates
//!   (`matrix_md_is_current`; regenerate with `MPDCCP_BLESS=1`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const SPEC: &str = "docs/spec/draft-ietf-tsvwg-multipath-dccp-25.mkd";
const MATRIX_TOML: &str = "docs/rfc9897/requirements.toml";
const MATRIX_MD: &str = "docs/rfc9897/MATRIX.md";
const FINDINGS: &str = "docs/rfc9897/FINDINGS.md";
const STATUSES: [&str; 4] = [
    "implemented",
    "partial",
    "not implemented",
    "not applicable",
];
/// BCP 14 key words (RFC 2119/8174: only in capitals). "REQUIRES" is not a
/// BCP 14 word but §3.2.2 uses it as one ("REQUIRES a successful
/// establishment of the first subflow"), so it is tracked too.
const KEYWORDS: [&str; 8] = [
    "MUST",
    "SHOULD",
    "MAY",
    "REQUIRED",
    "REQUIRES",
    "SHALL",
    "RECOMMENDED",
    "OPTIONAL",
];

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(rel: &str) -> String {
    let p = repo_root().join(rel);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// A normative sentence and the section (e.g. "3.2.4") it stands in.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Sentence {
    section: String,
    heading: String,
    text: String,
}

/// Words of a sentence (letters, digits, underscore).
fn words(s: &str) -> impl Iterator<Item = &str> {
    s.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
}

/// The key words a sentence uses, strongest first ("MUST NOT" and "SHOULD
/// NOT" when followed by NOT).
fn levels(s: &str) -> Vec<String> {
    let w: Vec<&str> = words(s).collect();
    let mut out: Vec<String> = Vec::new();
    for (i, k) in w.iter().enumerate() {
        if !KEYWORDS.contains(k) {
            continue;
        }
        let not = w.get(i + 1) == Some(&"NOT");
        let l = if not && (*k == "MUST" || *k == "SHOULD" || *k == "SHALL") {
            format!("{k} NOT")
        } else {
            (*k).to_string()
        };
        if !out.contains(&l) {
            out.push(l);
        }
    }
    out
}

/// Splits a paragraph into sentences: after '.', '?' or '!' followed by a
/// space and a capital letter, '{' or '(' — except after the abbreviations
/// the text uses.
fn split_sentences(p: &str) -> Vec<String> {
    let chars: Vec<char> = p.chars().collect();
    let mut out = Vec::new();
    let mut start = 0;
    for i in 0..chars.len() {
        if !matches!(chars[i], '.' | '?' | '!') {
            continue;
        }
        let (Some(' '), Some(&next)) = (chars.get(i + 1), chars.get(i + 2)) else {
            continue;
        };
        if !(next.is_ascii_uppercase() || next == '{' || next == '(') {
            continue;
        }
        let before: String = chars[start..=i].iter().collect();
        let last = before.split_whitespace().last().unwrap_or("");
        if ["e.g.", "i.e.", "cf.", "etc.", "vs."].contains(&last) {
            continue;
        }
        out.push(before.trim().to_string());
        start = i + 2;
    }
    let rest: String = chars[start.min(chars.len())..].iter().collect();
    if !rest.trim().is_empty() {
        out.push(rest.trim().to_string());
    }
    out
}

/// Every normative sentence of §3 (MP-DCCP Protocol) and §4 (Security
/// Considerations), in document order.
fn normative_sentences(mkd: &str) -> Vec<Sentence> {
    let mut out = Vec::new();
    let mut inside = false;
    let mut fenced = false;
    let mut num = [0u32; 3];
    let mut heading = String::new();
    let mut para: Vec<String> = Vec::new();
    let mut flush = |para: &mut Vec<String>, num: &[u32; 3], heading: &str| {
        if para.is_empty() {
            return;
        }
        let text = para.join(" ");
        para.clear();
        let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
        let section = match num {
            [a, 0, _] => format!("{a}"),
            [a, b, 0] => format!("{a}.{b}"),
            [a, b, c] => format!("{a}.{b}.{c}"),
        };
        for s in split_sentences(&text) {
            if !levels(&s).is_empty() {
                out.push(Sentence {
                    section: section.clone(),
                    heading: heading.to_string(),
                    text: s,
                });
            }
        }
    };
    for line in mkd.lines() {
        if let Some(h1) = line.strip_prefix("# ") {
            flush(&mut para, &num, &heading);
            if h1.starts_with("MP-DCCP Protocol") {
                inside = true;
                num = [3, 0, 0];
            } else if h1.starts_with("Security Considerations") {
                num = [4, 0, 0];
            } else {
                inside = false;
            }
            heading = h1.split(" {#").next().unwrap_or("").to_string();
            continue;
        }
        if !inside {
            continue;
        }
        if line.starts_with("~~~") {
            flush(&mut para, &num, &heading);
            fenced = !fenced;
            continue;
        }
        if fenced || line.starts_with("{:") || line.starts_with('|') {
            continue;
        }
        if let Some(h) = line.strip_prefix("### ") {
            flush(&mut para, &num, &heading);
            num[2] += 1;
            heading = h.split(" {#").next().unwrap_or("").to_string();
            continue;
        }
        if let Some(h) = line.strip_prefix("## ") {
            flush(&mut para, &num, &heading);
            num[1] += 1;
            num[2] = 0;
            heading = h.split(" {#").next().unwrap_or("").to_string();
            continue;
        }
        let t = line.trim();
        if t.is_empty() {
            flush(&mut para, &num, &heading);
            continue;
        }
        // List items and definition bodies start a paragraph of their own.
        let item = t
            .strip_prefix("* ")
            .or_else(|| t.strip_prefix("- "))
            .or_else(|| t.strip_prefix(": "))
            .or_else(|| {
                let d = t.find(". ")?;
                t[..d]
                    .chars()
                    .all(|c| c.is_ascii_digit())
                    .then(|| &t[d + 2..])
            });
        if let Some(body) = item {
            flush(&mut para, &num, &heading);
            para.push(body.to_string());
        } else {
            para.push(t.to_string());
        }
    }
    flush(&mut para, &num, &heading);
    out
}

/// One row of the matrix.
#[derive(Debug)]
struct Req {
    id: String,
    section: String,
    text: String,
    status: String,
    places: Vec<String>,
    tests: Vec<String>,
    note: String,
}

fn load_matrix() -> Vec<Req> {
    load_table("req")
}

/// The `[[choice]]` entries: where the text is ambiguous or contradicts
/// itself, what we chose (`text` = the issue, `note` = the choice).
fn load_choices() -> Vec<Req> {
    load_table("choice")
}

fn load_table(name: &str) -> Vec<Req> {
    let doc: toml::Table = read(MATRIX_TOML).parse().expect("requirements.toml parses");
    let list = doc
        .get(name)
        .and_then(|v| v.as_array())
        .unwrap_or_else(|| panic!("[[{name}]] entries"));
    let s = |t: &toml::Table, k: &str| t.get(k).and_then(|v| v.as_str()).unwrap_or("").to_string();
    let v = |t: &toml::Table, k: &str| -> Vec<String> {
        t.get(k)
            .and_then(|v| v.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    list.iter()
        .map(|e| {
            let t = e.as_table().expect("an entry is a table");
            if name == "choice" {
                return Req {
                    id: s(t, "id"),
                    section: s(t, "section"),
                    text: s(t, "issue"),
                    status: "choice".into(),
                    places: v(t, "impl"),
                    tests: v(t, "tests"),
                    note: s(t, "choice"),
                };
            }
            Req {
                id: s(t, "id"),
                section: s(t, "section"),
                text: s(t, "text"),
                status: s(t, "status"),
                places: v(t, "impl"),
                tests: v(t, "tests"),
                note: s(t, "note"),
            }
        })
        .collect()
}

/// Finding ids ("F12") a note cites.
fn finding_ids(note: &str) -> Vec<String> {
    words(note)
        .filter(|w| w.len() > 1 && w.starts_with('F') && w[1..].chars().all(|c| c.is_ascii_digit()))
        .map(str::to_string)
        .collect()
}

fn toml_escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

#[test]
fn extractor_finds_the_sentences_it_should() {
    // Sentence splitting keeps abbreviations and splits at a capital.
    let s = split_sentences("This is one, e.g. with MUST. And MAY two. (Three.) {{x}} four");
    assert_eq!(
        s,
        [
            "This is one, e.g. with MUST.",
            "And MAY two.",
            "(Three.) {{x}} four"
        ]
    );
    assert_eq!(levels("a MUST NOT b and MAY c"), ["MUST NOT", "MAY"]);
    assert!(levels("lower-case must and should are not key words").is_empty());
    assert!(levels("MP_SEQ is not MAY_X").is_empty());
    let all = normative_sentences(&read(SPEC));
    // Spot checks across the range: first and last sections, a list item.
    assert!(all.iter().any(|s| s.section == "3.1"
        && s.text
            .starts_with("The setting of the MP_CAPABLE feature MUST follow")));
    assert!(all.iter().any(|s| s.section == "3.2.3"
        && s.text.contains("Reset Code 13")
        && s.text.contains("MUST be sent from Host A on all subflows")));
    assert!(all.iter().any(|s| s.section == "4"
        && s.text
            .contains("RECOMMENDED that Key Type 0 is not enabled")));
    assert!(all
        .iter()
        .any(|s| s.section == "3.10" && s.text.starts_with("It is RECOMMENDED to limit")));
    // Nothing from §5 (middleboxes) onwards, nothing from §1/§2.
    assert!(all
        .iter()
        .all(|s| s.section.starts_with('3') || s.section.starts_with('4')));
}

#[test]
fn every_normative_sentence_has_an_entry() {
    let sentences = normative_sentences(&read(SPEC));
    let matrix = load_matrix();
    let findings = read(FINDINGS);
    let mut by_text: BTreeMap<&str, Vec<&Req>> = BTreeMap::new();
    for r in &matrix {
        by_text.entry(r.text.as_str()).or_default().push(r);
    }
    let mut missing = String::new();
    for (n, s) in sentences.iter().enumerate() {
        match by_text.get(s.text.as_str()).map(Vec::len) {
            Some(1) => {}
            Some(k) => panic!("{k} entries quote the same sentence: {}", s.text),
            None => {
                missing.push_str(&format!(
                    "[[req]]\nid = \"R{:03}\"\nsection = \"{}\"\ntext = \"{}\"\nstatus = \"\"\nimpl = []\ntests = []\nnote = \"\"\n\n",
                    n + 1,
                    s.section,
                    toml_escape(&s.text)
                ));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "normative sentences without an entry in {MATRIX_TOML}:\n\n{missing}"
    );
    // No entry for a sentence the text does not contain, sections right,
    // ids unique, statuses known, every row justified.
    let mut ids = std::collections::BTreeSet::new();
    for r in &matrix {
        let s = sentences
            .iter()
            .find(|s| s.text == r.text)
            .unwrap_or_else(|| panic!("{}: sentence not in the text: {}", r.id, r.text));
        assert_eq!(r.section, s.section, "{}: wrong section", r.id);
        assert!(ids.insert(r.id.clone()), "duplicate id {}", r.id);
        assert!(
            STATUSES.contains(&r.status.as_str()),
            "{}: status {:?}",
            r.id,
            r.status
        );
        match r.status.as_str() {
            "implemented" => {
                assert!(!r.places.is_empty(), "{}: implemented where?", r.id);
                assert!(!r.tests.is_empty(), "{}: implemented, tested by?", r.id);
            }
            "partial" => {
                assert!(!r.places.is_empty(), "{}: partial: where?", r.id);
                assert!(!r.note.is_empty(), "{}: partial: what is missing?", r.id);
            }
            _ => assert!(!r.note.is_empty(), "{}: {} needs a reason", r.id, r.status),
        }
        // A gap is explained by a finding that says what to change.
        if r.status == "not implemented" {
            let f = finding_ids(&r.note);
            assert!(
                !f.is_empty(),
                "{}: not implemented without a finding id",
                r.id
            );
            for id in f {
                assert!(
                    findings.contains(&format!("**{id} ")),
                    "{}: {id} is not in {FINDINGS}",
                    r.id
                );
            }
        }
    }
    assert_eq!(matrix.len(), sentences.len());
}

/// Source files of the workspace (crates/*/src and crates/*/tests).
fn rust_sources() -> Vec<(PathBuf, String)> {
    fn walk(dir: &Path, out: &mut Vec<(PathBuf, String)>) {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        let mut entries: Vec<_> = rd.flatten().map(|e| e.path()).collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|e| e == "rs") {
                if let Ok(t) = std::fs::read_to_string(&p) {
                    out.push((p, t));
                }
            }
        }
    }
    let mut out = Vec::new();
    walk(&repo_root().join("crates"), &mut out);
    out
}

fn defines(src: &str, name: &str) -> bool {
    [
        "fn ", "struct ", "enum ", "const ", "trait ", "type ", "mod ",
    ]
    .iter()
    .any(|k| {
        src.match_indices(&format!("{k}{name}")).any(|(i, m)| {
            let after = src[i + m.len()..].chars().next();
            !after.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
        })
    })
}

#[test]
fn every_named_test_and_place_exists() {
    let sources = rust_sources();
    let mut errors = Vec::new();
    let choices = load_choices();
    assert!(choices
        .iter()
        .all(|c| !c.text.is_empty() && !c.note.is_empty()));
    for r in load_matrix().into_iter().chain(choices) {
        for t in &r.tests {
            // "path/to/file.rs::fn_name"
            let Some((file, name)) = t.rsplit_once("::") else {
                errors.push(format!("{}: test {t:?} is not FILE::FN", r.id));
                continue;
            };
            let Ok(src) = std::fs::read_to_string(repo_root().join(file)) else {
                errors.push(format!("{}: no file {file}", r.id));
                continue;
            };
            if !defines(&src, name) {
                errors.push(format!("{}: no `fn {name}` in {file}", r.id));
            }
        }
        for place in &r.places {
            // "crate::module::Type::function": the last segment, and a Type
            // before it, must be defined somewhere (module paths may move in
            // a restructure; names stay).
            let segs: Vec<&str> = place.split("::").collect();
            let last = segs[segs.len() - 1];
            let mut need = vec![last];
            if segs.len() >= 2 && segs[segs.len() - 2].starts_with(|c: char| c.is_uppercase()) {
                need.push(segs[segs.len() - 2]);
            }
            for n in need {
                if !sources.iter().any(|(_, s)| defines(s, n)) {
                    errors.push(format!("{}: {place}: nothing defines `{n}`", r.id));
                }
            }
        }
    }
    assert!(errors.is_empty(), "{}", errors.join("\n"));
}

/// The readable matrix generated from the TOML.
fn render_md(matrix: &[Req]) -> String {
    let sentences = normative_sentences(&read(SPEC));
    let heading = |sec: &str| {
        sentences
            .iter()
            .find(|s| s.section == sec)
            .map(|s| s.heading.clone())
            .unwrap_or_default()
    };
    let level = |r: &Req| levels(&r.text).join(", ");
    let mut o = String::new();
    o.push_str("# RFC 9897 requirements matrix\n\n");
    o.push_str(
        "Generated from `docs/rfc9897/requirements.toml` by \
         `crates/mpdccp-proto/tests/proto/rfc9897/matrix.rs` \
         (`MPDCCP_BLESS=1 cargo test --release -p mpdccp-proto --test proto rfc9897::matrix`). \
         Do not edit by hand.\n\n\
         Every sentence of §3 and §4 of RFC 9897 (vendored source text: \
         `docs/spec/draft-ietf-tsvwg-multipath-dccp-25.mkd`) that uses a BCP 14 key \
         word in capitals has one row. The test fails when a sentence has no row, a row \
         quotes text that is not in the RFC, or a named test does not exist.\n\n",
    );
    // Counts: per key word class and status.
    let mut counts: BTreeMap<String, BTreeMap<String, usize>> = BTreeMap::new();
    for r in matrix {
        let l = levels(&r.text);
        let class = if l
            .iter()
            .any(|x| x.starts_with("MUST") || x.starts_with("SHALL") || x.starts_with("REQUIRE"))
        {
            "MUST / MUST NOT / REQUIRED / SHALL"
        } else if l
            .iter()
            .any(|x| x.starts_with("SHOULD") || x == "RECOMMENDED")
        {
            "SHOULD / SHOULD NOT / RECOMMENDED"
        } else {
            "MAY / OPTIONAL"
        };
        *counts
            .entry(class.to_string())
            .or_default()
            .entry(r.status.clone())
            .or_default() += 1;
    }
    o.push_str("## Summary\n\n| Key words | total |");
    for s in STATUSES {
        o.push_str(&format!(" {s} |"));
    }
    o.push_str("\n|---|---|---|---|---|---|\n");
    let order = [
        "MUST / MUST NOT / REQUIRED / SHALL",
        "SHOULD / SHOULD NOT / RECOMMENDED",
        "MAY / OPTIONAL",
    ];
    for (class, m) in order.iter().filter_map(|c| counts.get(*c).map(|m| (c, m))) {
        let total: usize = m.values().sum();
        o.push_str(&format!("| {class} | {total} |"));
        for s in STATUSES {
            o.push_str(&format!(" {} |", m.get(s).copied().unwrap_or(0)));
        }
        o.push('\n');
    }
    o.push('\n');
    let mut section = String::new();
    for r in matrix {
        if r.section != section {
            section = r.section.clone();
            o.push_str(&format!("## §{} {}\n\n", section, heading(&section)));
        }
        o.push_str(&format!(
            "### {} — {} — {}\n\n> {}\n\n",
            r.id,
            level(r),
            r.status,
            r.text
        ));
        if !r.places.is_empty() {
            let p: Vec<String> = r.places.iter().map(|p| format!("`{p}`")).collect();
            o.push_str(&format!("* Where: {}\n", p.join(", ")));
        }
        if !r.tests.is_empty() {
            let t: Vec<String> = r.tests.iter().map(|t| format!("`{t}`")).collect();
            o.push_str(&format!("* Tests: {}\n", t.join(", ")));
        }
        if !r.note.is_empty() {
            o.push_str(&format!("* Note: {}\n", r.note));
        }
        o.push('\n');
    }
    o.push_str("## Choices where the text is ambiguous or self-contradictory\n\n");
    for c in load_choices() {
        o.push_str(&format!(
            "### {} — §{}\n\n* Text: {}\n* Choice: {}\n",
            c.id, c.section, c.text, c.note
        ));
        if !c.places.is_empty() {
            let p: Vec<String> = c.places.iter().map(|p| format!("`{p}`")).collect();
            o.push_str(&format!("* Where: {}\n", p.join(", ")));
        }
        if !c.tests.is_empty() {
            let t: Vec<String> = c.tests.iter().map(|t| format!("`{t}`")).collect();
            o.push_str(&format!("* Tests: {}\n", t.join(", ")));
        }
        o.push('\n');
    }
    o
}

#[test]
fn matrix_md_is_current() {
    let md = render_md(&load_matrix());
    let path = repo_root().join(MATRIX_MD);
    if std::env::var_os("MPDCCP_BLESS").is_some() {
        std::fs::write(&path, &md).expect("write MATRIX.md");
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == md,
        "{MATRIX_MD} is stale: regenerate with \
         MPDCCP_BLESS=1 cargo test --release -p mpdccp-proto --test proto rfc9897::matrix"
    );
}
