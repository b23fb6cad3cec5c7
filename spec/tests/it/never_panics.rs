//! Property tests: `validate` never panics, on arbitrary bytes, on YAML-shaped noise, and on profiles
//! mutated by deleting, inserting, duplicating and swapping text; and every diagnostic it returns has a
//! position inside the source and a help line.

use clusterctl_spec::{from_profile, profiles, validate, Loaded};
use proptest::prelude::*;

fn check(text: String) {
    let len = text.len();
    let loaded = Loaded::from_text("fuzz.yaml", text);
    let items = match validate(&loaded) {
        Ok(v) => v.warnings,
        Err(d) => d.items,
    };
    for d in items {
        if let Some(span) = d.span {
            assert!(span.offset() + span.len() <= len, "span out of range: {d}");
        }
        assert!(d.help.is_some(), "no help: {d}");
    }
}

fn profile_texts() -> Vec<String> {
    profiles()
        .iter()
        .filter_map(|(n, _)| from_profile(n).ok())
        .map(|l| l.source_text)
        .collect()
}

#[derive(Debug, Clone)]
enum Mutation {
    Delete(usize, usize),
    Insert(usize, String),
    DuplicateLine(usize),
    SwapLines(usize, usize),
    ReplaceValue(usize, String),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let noise = prop_oneof![
        Just("-".to_string()),
        Just(": ".to_string()),
        Just("\n  ".to_string()),
        Just("[".to_string()),
        Just("{".to_string()),
        Just("&a ".to_string()),
        Just("*a".to_string()),
        Just("!!binary ".to_string()),
        Just("'".to_string()),
        Just("\t".to_string()),
        "[ -~]{0,12}",
        "\\PC{0,4}",
    ];
    prop_oneof![
        (any::<usize>(), 0usize..40).prop_map(|(a, n)| Mutation::Delete(a, n)),
        (any::<usize>(), noise.clone()).prop_map(|(a, s)| Mutation::Insert(a, s)),
        any::<usize>().prop_map(Mutation::DuplicateLine),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Mutation::SwapLines(a, b)),
        (
            any::<usize>(),
            prop_oneof![
                Just("~".to_string()),
                Just("-1".to_string()),
                Just("99999999999999999999".to_string()),
                Just("[]".to_string()),
                Just("{}".to_string()),
                Just("true".to_string()),
                Just("\"\"".to_string()),
                Just("1.5".to_string()),
                "[a-z0-9./:-]{0,20}"
            ]
        )
            .prop_map(|(a, s)| Mutation::ReplaceValue(a, s)),
    ]
}

fn apply(text: &str, m: &Mutation) -> String {
    let at = |n: usize| {
        let mut i = if text.is_empty() { 0 } else { n % text.len() };
        while !text.is_char_boundary(i) {
            i -= 1;
        }
        i
    };
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    match m {
        Mutation::Delete(a, n) => {
            let s = at(*a);
            let mut e = (s + n).min(text.len());
            while !text.is_char_boundary(e) {
                e -= 1;
            }
            format!("{}{}", &text[..s], &text[e..])
        }
        Mutation::Insert(a, s) => {
            let i = at(*a);
            format!("{}{}{}", &text[..i], s, &text[i..])
        }
        Mutation::DuplicateLine(a) if !lines.is_empty() => {
            let i = a % lines.len();
            let l = lines[i].clone();
            lines.insert(i, l);
            lines.join("\n")
        }
        Mutation::SwapLines(a, b) if !lines.is_empty() => {
            let (i, j) = (a % lines.len(), b % lines.len());
            lines.swap(i, j);
            lines.join("\n")
        }
        Mutation::ReplaceValue(a, v) if !lines.is_empty() => {
            let i = a % lines.len();
            if let Some(p) = lines[i].find(": ") {
                lines[i] = format!("{}: {v}", &lines[i][..p]);
            }
            lines.join("\n")
        }
        _ => text.to_string(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        check(String::from_utf8_lossy(&bytes).into_owned());
    }

    #[test]
    fn yaml_shaped_noise(text in "([a-zA-Z]{1,8}: ?([-a-z0-9./\\[\\]{}:,\"']{0,12})?\n( {2,4}(- )?)?){0,30}") {
        check(text);
    }

    #[test]
    fn mutated_profiles(which in 0usize..16, muts in proptest::collection::vec(mutation(), 1..6)) {
        let texts = profile_texts();
        let mut text = texts[which % texts.len()].clone();
        for m in &muts {
            text = apply(&text, m);
        }
        check(text);
    }
}

#[test]
fn huge_and_deep_inputs() {
    // Deep nesting, many nodes, a long scalar: bounded time, no panic, no stack overflow.
    check("[".repeat(20_000));
    check(format!("a: {}", "{b: ".repeat(5_000)));
    let mut big = from_profile("lab")
        .map(|l| l.source_text)
        .unwrap_or_default();
    for i in 0..3000 {
        big.push_str(&format!("    - name: extra-{i}\n      role: worker\n"));
    }
    check(big);
    check(format!("apiVersion: {}\n", "x".repeat(1 << 20)));
    // Alias expansion ("billion laughs") is bounded by the YAML decoder.
    let mut laughs = String::from(
        "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n",
    );
    for (prev, name) in ["a", "b", "c", "d", "e", "f", "g", "h"]
        .windows(2)
        .map(|w| (w[0], w[1]))
    {
        laughs.push_str(&format!("{name}: &{name} [*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev}]\n"));
    }
    check(laughs);
}
