//! Dotted version strings ("2.11", "13.0") with trailing zeros normalized away, as HF compares them.

use std::fmt;
use std::str::FromStr;

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Version(Vec<u32>);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid version `{input}`: expected dot-separated non-negative integers such as \"2.11\" or \"13.0\""
)]
pub struct VersionError {
    pub input: String,
}

impl Version {
    pub fn new(parts: &[u32]) -> Self {
        let mut v = parts.to_vec();
        while v.len() > 1 && v.last() == Some(&0) {
            v.pop();
        }
        Version(v)
    }
    pub fn major(&self) -> u32 {
        self.0.first().copied().unwrap_or(0)
    }
    pub fn minor(&self) -> u32 {
        self.0.get(1).copied().unwrap_or(0)
    }
}

impl FromStr for Version {
    type Err = VersionError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || VersionError {
            input: s.to_string(),
        };
        if s.is_empty() {
            return Err(err());
        }
        let parts = s
            .split('.')
            .map(|p| {
                if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
                    Err(err())
                } else {
                    p.parse::<u32>().map_err(|_| err())
                }
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Version::new(&parts))
    }
}

/// Prints at least `major.minor` ("13.0"), more components when present.
impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major(), self.minor())?;
        for p in self.0.iter().skip(2) {
            write!(f, ".{p}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn normalizes_trailing_zeros() {
        assert_eq!(
            "2.10.0".parse::<Version>().unwrap(),
            "2.10".parse().unwrap()
        );
        assert_eq!("13.0".parse::<Version>().unwrap().to_string(), "13.0");
        assert!("".parse::<Version>().is_err());
        assert!("2.x".parse::<Version>().is_err());
    }
}
