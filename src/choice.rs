//! Closed sets of named values (`backend`, `algorithm`, `auth`, `format`): parsed from their
//! name with an error that lists the valid ones, and "did you mean" for a near miss.

/// An enum chosen by name in the configuration.
pub trait Choice: Sized + Copy + 'static {
    /// Every value, in the order the error lists them.
    const ALL: &'static [Self];
    /// The configuration name of the value.
    fn as_str(self) -> &'static str;
}

/// A name that is none of a choice's values.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown value {given:?}; valid values: {}{}", valid.join(", "), hint(suggestion.as_deref()))]
pub struct UnknownChoice {
    pub given: String,
    pub valid: Vec<&'static str>,
    pub suggestion: Option<&'static str>,
}

fn hint(suggestion: Option<&str>) -> String {
    suggestion
        .map(|s| format!(" (did you mean {s:?}?)"))
        .unwrap_or_default()
}

/// The value of `T` named `name`.
pub fn parse_choice<T: Choice>(name: &str) -> Result<T, UnknownChoice> {
    if let Some(v) = T::ALL.iter().find(|v| v.as_str() == name) {
        return Ok(*v);
    }
    let valid: Vec<&'static str> = T::ALL.iter().map(|v| v.as_str()).collect();
    Err(UnknownChoice {
        given: name.to_string(),
        suggestion: nearest(name, valid.iter().copied()),
        valid,
    })
}

/// The candidate closest to `given`, when it is close enough to be a typo: Jaro–Winkler
/// similarity of at least 0.8 (case-insensitive), or `given` contained in it.
pub fn nearest<'a>(given: &str, candidates: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    let given = given.to_ascii_lowercase();
    candidates
        .map(|c| {
            let lower = c.to_ascii_lowercase();
            let mut score = strsim::jaro_winkler(&given, &lower);
            if given.len() >= 3 && (lower.contains(&given) || given.contains(&lower)) {
                score = score.max(0.85);
            }
            (score, c)
        })
        .filter(|(score, _)| *score >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c)
}

/// Implements `TryFrom<String>` through [`parse_choice`], for `#[serde(try_from = "String")]`.
#[macro_export]
macro_rules! choice_from_string {
    ($ty:ty) => {
        impl TryFrom<String> for $ty {
            type Error = $crate::choice::UnknownChoice;
            fn try_from(name: String) -> Result<Self, Self::Error> {
                $crate::choice::parse_choice(&name)
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shape of `[scheduler] backend`.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum BackendKind {
        Filter,
        Caching,
        Asc,
        Apsr,
    }

    impl Choice for BackendKind {
        const ALL: &'static [Self] = &[
            BackendKind::Filter,
            BackendKind::Caching,
            BackendKind::Asc,
            BackendKind::Apsr,
        ];
        fn as_str(self) -> &'static str {
            match self {
                BackendKind::Filter => "filter",
                BackendKind::Caching => "caching",
                BackendKind::Asc => "asc",
                BackendKind::Apsr => "apsr",
            }
        }
    }

    #[test]
    fn an_unknown_value_lists_the_valid_ones_and_suggests_a_near_miss() {
        let cases = [
            (
                "fastest",
                "unknown value \"fastest\"; valid values: filter, caching, asc, apsr",
            ),
            (
                "cachin",
                "unknown value \"cachin\"; valid values: filter, caching, asc, apsr \
                 (did you mean \"caching\"?)",
            ),
        ];
        for (given, want) in cases {
            let err = parse_choice::<BackendKind>(given).unwrap_err();
            assert_eq!(err.to_string(), want);
        }
        assert_eq!(parse_choice::<BackendKind>("apsr"), Ok(BackendKind::Apsr));
    }

    #[test]
    fn nearest_ignores_names_that_are_far_off() {
        let keys = ["backend", "workers", "max_attempts"];
        assert_eq!(nearest("bakend", keys.iter().copied()), Some("backend"));
        assert_eq!(
            nearest("attempts", keys.iter().copied()),
            Some("max_attempts")
        );
        assert_eq!(nearest("zzz", keys.iter().copied()), None);
    }
}
