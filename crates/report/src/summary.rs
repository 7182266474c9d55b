//! What the loadgen and peers reports share: the median and range of a
//! figure over repetitions, whole numbers with thousands separators, and
//! the points of a plan not measured yet.

/// The CSS of the loadgen and peers pages; a page with plots adds
/// [`FIGURE_STYLE`].
pub(crate) const STYLE: &str = "
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:2rem auto;max-width:1100px;color:#222;padding:0 1rem}
h1{font-size:1.5rem}h2{font-size:1.2rem;margin-top:2rem;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.5rem 0;font-size:.85rem}
th,td{border:1px solid #ccc;padding:.25rem .45rem;text-align:right}
th{background:#f3f3f3}td.label,th.label{text-align:left}
div.scroll{overflow-x:auto;max-width:100%}
.note{font-size:.85rem;color:#444;max-width:900px}
code{font-size:.8rem;word-break:break-all}
";

/// [`STYLE`] with figures (cells wrap at their spaces so a wide table
/// still fits the page).
pub(crate) const FIGURE_STYLE: &str = "
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:2rem auto;max-width:1100px;color:#222;padding:0 1rem}
h1{font-size:1.5rem}h2{font-size:1.2rem;margin-top:2rem;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.5rem 0;font-size:.85rem}
th,td{border:1px solid #ccc;padding:.25rem .45rem;text-align:right}
th{background:#f3f3f3}td.label,th.label{text-align:left}
div.scroll{overflow-x:auto;max-width:100%}
figure.plot{margin:.5rem 0}
figure.plot svg{max-width:100%;height:auto}
figcaption{font-size:.8rem;color:#555;max-width:720px}
.note{font-size:.85rem;color:#444;max-width:900px}
code{font-size:.8rem;word-break:break-all}
";

/// The page of a sweep: title, description, the style and the blocks, for
/// phones as well.
pub(crate) fn page(
    title: &str,
    description: &str,
    style: &'static str,
    blocks: Vec<crate::export::Block>,
) -> crate::export::Page {
    crate::export::Page {
        title: title.to_string(),
        description: description.to_string(),
        style: style.into(),
        viewport: true,
        blocks,
    }
}

/// Where a process was pinned: `CPU 1`, or `not pinned`.
pub(crate) fn cpu_text(c: Option<usize>) -> String {
    c.map_or("not pinned".into(), |c| format!("CPU {c}"))
}

/// The `machine` fact: CPUs and kernel.
pub(crate) fn machine(cpu_count: usize, kernel: &str) -> (String, String) {
    (
        "machine".into(),
        format!("{cpu_count} CPUs, kernel {kernel}"),
    )
}

/// Median and spread of one figure across repetitions.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Spread {
    /// The median (mean of the middle two for an even count).
    pub median: f64,
    /// The smallest value.
    pub min: f64,
    /// The largest value.
    pub max: f64,
}

impl Spread {
    /// The spread of `values`; `None` when there are none.
    pub fn of(values: &[f64]) -> Option<Spread> {
        let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Some(Spread {
            median,
            min: v[0],
            max: v[n - 1],
        })
    }

    /// Each figure rounded to three decimals, as the CSV files hold them.
    pub(crate) fn rounded(self) -> Spread {
        let round = |v: f64| (v * 1000.0).round() / 1000.0;
        Spread {
            median: round(self.median),
            min: round(self.min),
            max: round(self.max),
        }
    }
}

/// A whole number with thousands separators (123,456).
pub(crate) fn whole(v: f64) -> String {
    let n = v.round() as i64;
    let digits = n.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    if n < 0 {
        format!("-{out}")
    } else {
        out
    }
}

/// The ids of `plan` that `have` lacks, in plan order.
pub(crate) fn missing<'a>(
    plan: impl IntoIterator<Item = String>,
    have: impl IntoIterator<Item = &'a str>,
) -> Vec<String> {
    let have: std::collections::BTreeSet<&str> = have.into_iter().collect();
    plan.into_iter()
        .filter(|id| !have.contains(id.as_str()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_takes_the_median_and_range() {
        let s = Spread::of(&[3.0, 1.0, 2.0, 10.0]).unwrap();
        assert_eq!((s.median, s.min, s.max), (2.5, 1.0, 10.0));
        assert!(Spread::of(&[]).is_none());
        assert!(Spread::of(&[f64::NAN]).is_none());
        let r = Spread::of(&[1.00049, 2.0]).unwrap().rounded();
        assert_eq!((r.median, r.min), (1.5, 1.0));
    }

    #[test]
    fn whole_numbers_group_thousands() {
        assert_eq!(whole(1234567.4), "1,234,567");
        assert_eq!(whole(-1234.0), "-1,234");
        assert_eq!(whole(999.5), "1,000");
        assert_eq!(whole(0.0), "0");
    }

    #[test]
    fn missing_keeps_plan_order() {
        let plan = ["c", "a", "b"].map(String::from);
        assert_eq!(missing(plan, ["a"]), ["c", "b"]);
    }
}

/// The command that makes (or resumes) a results directory of experiment
/// `name`, as a user types it from the checkout's root.
pub(crate) fn sweep_command(name: &str, quick: bool) -> String {
    format!(
        "connlab sweep experiments/{name}.toml{} --out results/{name}",
        if quick { " --quick" } else { "" }
    )
}

/// The "To run it again" commands block of experiment `name`.
pub(crate) fn rerun_blocks(name: &str, quick: bool) -> Vec<crate::export::Block> {
    vec![
        crate::export::Block::Heading("Commands".into()),
        crate::export::Block::Commands {
            label: Some("To run it again (or resume it), from the checkout".into()),
            lines: vec![(None, sweep_command(name, quick))],
        },
    ]
}

/// A recorded command line as a user would type it, without the machine's
/// paths: a program given by its path is called by its name (`connlab`
/// for any build of it), and a path inside the results directory of
/// experiment `name` starts at `results/NAME`.
pub(crate) fn user_command(line: &str, name: &str) -> String {
    let marker = format!("/{name}/");
    line.split(' ')
        .enumerate()
        .map(|(i, word)| {
            if i == 0 && word.contains('/') {
                let program = word.rsplit('/').next().unwrap_or(word);
                return if program.starts_with("connlab") {
                    "connlab".to_string()
                } else {
                    program.to_string()
                };
            }
            match word.find(&marker) {
                Some(at) if word.starts_with('/') => {
                    format!("results/{name}/{}", &word[at + marker.len()..])
                }
                _ => word.to_string(),
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod command_tests {
    use super::*;

    #[test]
    fn commands_lose_the_machines_paths() {
        assert_eq!(
            user_command(
                "/work/bin18/connlab-final serve --stats /work/main/results/issue18b/p-x/logs/a/s.json",
                "p-x"
            ),
            "connlab serve --stats results/p-x/logs/a/s.json"
        );
        assert_eq!(
            user_command("/usr/sbin/nginx -c /w/r/p-x/n.conf -p /tmp/t", "p-x"),
            "nginx -c results/p-x/n.conf -p /tmp/t"
        );
        assert_eq!(
            sweep_command("locality-table3", true),
            "connlab sweep experiments/locality-table3.toml --quick --out results/locality-table3"
        );
    }
}
