//! CPU pinning policies, as `ResourceRequest._translate_pinning_policies` reads them
//! (`nova.virt.hardware`: `get_cpu_policy_constraint`, `get_cpu_thread_policy_constraint`,
//! `get_emulator_thread_policy_constraint`, `get_dedicated_cpu_constraint`,
//! `get_realtime_cpu_constraint`, `parse_cpu_spec`).

use super::error::{CodecError, Result};
use super::settings::{boolean, Settings};
use serde::Serialize;

const CPU_POLICIES: [&str; 3] = ["dedicated", "shared", "mixed"];
const THREAD_POLICIES: [&str; 3] = ["prefer", "isolate", "require"];
const EMULATOR_POLICIES: [&str; 2] = ["share", "isolate"];

/// `hw:cpu_policy` / `hw_cpu_policy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CpuPolicy {
    Dedicated,
    Shared,
    Mixed,
}

/// What the CPU policies ask of Placement.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CpuSpecs {
    /// The effective policy of flavor and image.
    pub policy: Option<CpuPolicy>,
    /// `HW_CPU_HYPERTHREADING` required (`require`) or forbidden (`isolate`).
    pub hyperthreading: Option<bool>,
    /// `hw:emulator_threads_policy=isolate`: one more PCPU.
    pub emulator_isolate: bool,
    /// For `mixed`: how many of the flavor's vCPUs are dedicated.
    pub mixed_dedicated: u64,
}

impl CpuSpecs {
    /// Reads and checks the CPU settings of a flavor with `vcpus` vCPUs and its image.
    pub fn parse(s: &Settings<'_>, vcpus: u64) -> Result<Self> {
        let policy = cpu_policy(s)?;
        let thread = thread_policy(s)?;
        let emulator = s.spec_enum("hw:emulator_threads_policy", &EMULATOR_POLICIES)?;
        let realtime = match s.spec("hw:cpu_realtime") {
            Some(v) => boolean(&s.spec_path("hw:cpu_realtime"), v)?,
            None => false,
        };
        // Syntax is checked whatever the policy, as Nova's API does.
        let dedicated_mask = mask(
            s,
            s.spec("hw:cpu_dedicated_mask"),
            "hw:cpu_dedicated_mask",
            vcpus,
        )?;
        let flavor_rt = mask(
            s,
            s.spec("hw:cpu_realtime_mask"),
            "hw:cpu_realtime_mask",
            vcpus,
        )?;
        let image_rt = match s.prop("hw_cpu_realtime_mask").filter(|m| !m.is_empty()) {
            Some(m) => Some(
                parse_cpu_spec(&m, vcpus)
                    .map_err(|e| CodecError::invalid(s.prop_path("hw_cpu_realtime_mask"), e))?,
            ),
            None => None,
        };
        let mut specs = CpuSpecs {
            policy,
            hyperthreading: match thread.as_deref() {
                Some("isolate") => Some(false),
                Some("require") => Some(true),
                _ => None,
            },
            emulator_isolate: emulator == Some("isolate"),
            mixed_dedicated: 0,
        };
        if policy == Some(CpuPolicy::Mixed) {
            let all = vec![(0, vcpus.saturating_sub(1))];
            let dedicated = match dedicated_mask {
                Some(pcpus) => {
                    let path = s.spec_path("hw:cpu_dedicated_mask");
                    if vcpus == 0 || count(&pcpus) == 0 || count(&pcpus) >= vcpus {
                        return Err(CodecError::invalid(
                            path,
                            "must leave some vCPUs shared and dedicate others",
                        ));
                    }
                    if !subset(&pcpus, &all) {
                        return Err(CodecError::invalid(
                            path,
                            "names vCPUs the flavor does not have",
                        ));
                    }
                    Some(count(&pcpus))
                }
                None => None,
            };
            let realtime = if realtime {
                let (rt, path) = match (image_rt, flavor_rt) {
                    (Some(m), _) => (m, s.prop_path("hw_cpu_realtime_mask")),
                    (None, Some(m)) => (m, s.spec_path("hw:cpu_realtime_mask")),
                    (None, None) => (all.clone(), s.spec_path("hw:cpu_realtime")),
                };
                if vcpus == 0
                    || count(&rt) == 0
                    || (count(&rt) == vcpus && subset(&rt, &all) && emulator.is_none())
                {
                    return Err(CodecError::invalid(
                        path,
                        "does not leave a valid set of realtime vCPUs",
                    ));
                }
                if !subset(&rt, &all) {
                    return Err(CodecError::invalid(
                        path,
                        "names vCPUs the flavor does not have",
                    ));
                }
                Some(count(&rt))
            } else {
                None
            };
            specs.mixed_dedicated = dedicated.or(realtime).unwrap_or(0);
        }
        Ok(specs)
    }
}

fn cpu_policy(s: &Settings<'_>) -> Result<Option<CpuPolicy>> {
    let parse = |v: &str| match v {
        "dedicated" => Some(CpuPolicy::Dedicated),
        "shared" => Some(CpuPolicy::Shared),
        "mixed" => Some(CpuPolicy::Mixed),
        _ => None,
    };
    let flavor = s.spec_enum("hw:cpu_policy", &CPU_POLICIES)?.and_then(parse);
    let image = s
        .prop_enum("hw_cpu_policy", &CPU_POLICIES)?
        .as_deref()
        .and_then(parse);
    use CpuPolicy::*;
    let forbidden = matches!(
        (flavor, image),
        (Some(Mixed), Some(Dedicated)) | (Some(Shared), Some(Mixed | Dedicated))
    );
    if forbidden {
        return Err(CodecError::invalid(
            s.spec_path("hw:cpu_policy"),
            format!(
                "is {:?}, which forbids the image's hw_cpu_policy {:?} (Nova's ImageCPUPinningForbidden)",
                s.spec("hw:cpu_policy").unwrap_or_default(),
                s.prop("hw_cpu_policy").unwrap_or_default()
            ),
        ));
    }
    Ok(flavor.or(image))
}

fn thread_policy(s: &Settings<'_>) -> Result<Option<String>> {
    let flavor = s.spec_enum("hw:cpu_thread_policy", &THREAD_POLICIES)?;
    let image = s.prop_enum("hw_cpu_thread_policy", &THREAD_POLICIES)?;
    match (flavor, image) {
        (None, image) => Ok(image),
        (Some(f), Some(i)) if f != "prefer" && i != f => {
            Err(s.conflict("hw:cpu_thread_policy", f, "hw_cpu_thread_policy", &i))
        }
        (Some(f), _) => Ok(Some(f.to_string())),
    }
}

fn mask(
    s: &Settings<'_>,
    value: Option<&str>,
    key: &str,
    vcpus: u64,
) -> Result<Option<Vec<(u64, u64)>>> {
    match value {
        Some(m) if !m.is_empty() => parse_cpu_spec(m, vcpus)
            .map(Some)
            .map_err(|e| CodecError::invalid(s.spec_path(key), e)),
        _ => Ok(None),
    }
}

/// `parse_cpu_spec`, as sorted inclusive intervals, of a mask; a leading `^` excludes from
/// all `vcpus` CPUs (Nova parses `"0-<vcpus-1>,<mask>"`).
fn parse_cpu_spec(spec: &str, vcpus: u64) -> std::result::Result<Vec<(u64, u64)>, String> {
    let mut include: Vec<(u64, u64)> = Vec::new();
    let mut exclude: Vec<(u64, u64)> = Vec::new();
    if spec.trim().starts_with('^') && vcpus > 0 {
        include.push((0, vcpus - 1));
    }
    let int = |p: &str| -> std::result::Result<u64, String> {
        p.trim()
            .parse::<u64>()
            .map_err(|_| format!("is {spec:?}: {p:?} is not a CPU number"))
    };
    for rule in spec.split(',').map(str::trim).filter(|r| !r.is_empty()) {
        let (reject, body) = match rule.strip_prefix('^') {
            Some(rest) => (true, rest),
            None => (false, rule),
        };
        let range = match body.split_once('-') {
            Some((a, b)) => (int(a)?, int(b)?),
            None => (int(body)?, int(body)?),
        };
        if range.0 > range.1 {
            return Err(format!("is {spec:?}: {rule:?} is an empty range"));
        }
        if reject {
            exclude.push(range)
        } else {
            include.push(range)
        }
    }
    Ok(difference(&include, &exclude))
}

/// `a − b` as sorted disjoint inclusive intervals.
fn difference(a: &[(u64, u64)], b: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut out = normalize(a);
    for &(lo, hi) in b {
        out = out
            .into_iter()
            .flat_map(|(s, e)| {
                let mut parts = Vec::new();
                if e < lo || s > hi {
                    parts.push((s, e));
                } else {
                    if s < lo {
                        parts.push((s, lo - 1));
                    }
                    if e > hi {
                        parts.push((hi + 1, e));
                    }
                }
                parts
            })
            .collect();
    }
    out
}

fn normalize(a: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut v = a.to_vec();
    v.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::new();
    for (s, e) in v {
        match out.last_mut() {
            Some(last) if s <= last.1.saturating_add(1) => last.1 = last.1.max(e),
            _ => out.push((s, e)),
        }
    }
    out
}

fn count(set: &[(u64, u64)]) -> u64 {
    set.iter().map(|(s, e)| e - s + 1).sum()
}

fn subset(a: &[(u64, u64)], b: &[(u64, u64)]) -> bool {
    difference(a, b).is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_specs_are_read_as_nova_s_parse_cpu_spec_reads_them() {
        let cases = [
            ("0-3", 8, 4),
            ("^0", 4, 3),
            ("^0-1", 4, 2),
            ("1-4,^3,6", 8, 4),
            (" 2 , 3 ,,", 8, 2),
            ("0,^0", 8, 0),
            ("^0", 1_099_511_627_776, 1_099_511_627_775),
        ];
        for (spec, vcpus, want) in cases {
            let got = count(&parse_cpu_spec(spec, vcpus).unwrap());
            assert_eq!(got, want, "{spec}");
        }
        for bad in ["0-x", "3-1", "a", "^b"] {
            assert!(parse_cpu_spec(bad, 8).is_err(), "{bad}");
        }
    }
}
