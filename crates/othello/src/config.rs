//! Validated configuration of an Othello.

use crate::error::ConfigError;

/// How the two arrays are sized for a capacity of `n` keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Sizing {
    /// The paper's option 2: `ma` is the smallest power of two `>= 1.33 n`,
    /// `mb` the smallest power of two `>= n`.
    #[default]
    PowerOfTwo,
    /// `ma = ceil(1.333 n)`, `mb = n`: about `2.333 l` bits per key, with
    /// multiply-shift range reduction instead of masking.
    Tight,
}

impl Sizing {
    /// `(ma, mb)` for a capacity of `n` keys (at least 1 each).
    pub fn arrays_for(self, n: usize) -> (u32, u32) {
        let n = n.max(1) as u64;
        let (ma, mb) = match self {
            Sizing::PowerOfTwo => (
                (n * 133).div_ceil(100).next_power_of_two(),
                n.next_power_of_two(),
            ),
            Sizing::Tight => ((n * 4).div_ceil(3), n),
        };
        (
            ma.min(u32::MAX as u64) as u32,
            mb.min(u32::MAX as u64) as u32,
        )
    }

    /// The number of keys the arrays `(ma, mb)` are meant to hold.
    pub fn capacity_of(self, ma: u32, mb: u32) -> usize {
        match self {
            Sizing::PowerOfTwo => ((ma as u64 * 100 / 133).min(mb as u64)) as usize,
            Sizing::Tight => ((ma as u64 * 3 / 4).min(mb as u64)) as usize,
        }
    }

    /// The stable one-byte code used in snapshots.
    pub fn code(self) -> u8 {
        match self {
            Sizing::PowerOfTwo => 0,
            Sizing::Tight => 1,
        }
    }

    /// The sizing for a snapshot code.
    pub fn from_code(c: u8) -> Option<Sizing> {
        match c {
            0 => Some(Sizing::PowerOfTwo),
            1 => Some(Sizing::Tight),
            _ => None,
        }
    }
}

impl std::fmt::Display for Sizing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Sizing::PowerOfTwo => "pow2",
            Sizing::Tight => "tight",
        })
    }
}

impl std::str::FromStr for Sizing {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "pow2" | "power-of-two" => Ok(Sizing::PowerOfTwo),
            "tight" => Ok(Sizing::Tight),
            other => Err(ConfigError::UnknownSizing(other.to_string())),
        }
    }
}

/// Largest stash the data plane carries before the control plane reseeds.
pub const MAX_STASH: usize = 64;

/// Configuration of an Othello (control and query side).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Config {
    /// `l`: bits of each stored value, 1..=64.
    pub value_bits: u8,
    /// `r`: bits of the alien-key check field beside the value; 0 turns it off.
    /// `value_bits + check_bits <= 64`.
    pub check_bits: u8,
    /// Array sizing rule.
    pub sizing: Sizing,
    /// Number of value columns sharing one graph (one per switch), >= 1.
    pub columns: usize,
    /// Starting point of the seed sequence; rebuilds take the next seed.
    pub seed: u64,
    /// Keys whose edge would close a cycle are kept in a stash of at most
    /// this many entries (<= [`MAX_STASH`]); past it the graph is reseeded.
    pub stash_capacity: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            value_bits: 8,
            check_bits: 0,
            sizing: Sizing::PowerOfTwo,
            columns: 1,
            seed: 0x6e65_7874_686f_7021,
            stash_capacity: 16,
        }
    }
}

impl Config {
    /// A default configuration with `l` value bits.
    pub fn with_value_bits(value_bits: u8) -> Self {
        Config {
            value_bits,
            ..Config::default()
        }
    }

    /// Check every field; the constructors call this.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(1..=64).contains(&self.value_bits) {
            return Err(ConfigError::ValueBits(self.value_bits));
        }
        if self.value_bits as u32 + self.check_bits as u32 > 64 {
            return Err(ConfigError::CheckBits {
                value_bits: self.value_bits,
                check_bits: self.check_bits,
            });
        }
        if self.columns == 0 || self.columns > 4096 {
            return Err(ConfigError::Columns(self.columns));
        }
        if self.stash_capacity > MAX_STASH {
            return Err(ConfigError::StashCapacity(self.stash_capacity));
        }
        Ok(())
    }

    /// Total bits of one slot word: `l + r`.
    pub fn word_bits(&self) -> u32 {
        self.value_bits as u32 + self.check_bits as u32
    }

    /// Mask of the value field.
    pub fn value_mask(&self) -> u64 {
        mask(self.value_bits as u32)
    }
}

/// A mask of the low `bits` bits (`bits` in 0..=64).
#[inline(always)]
pub(crate) fn mask(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

/// Bytes per stored slot for `word_bits` bits: 1, 2, 4 or 8.
pub(crate) fn slot_bytes_for(word_bits: u32) -> u8 {
    match word_bits {
        0..=8 => 1,
        9..=16 => 2,
        17..=32 => 4,
        _ => 8,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pow2_sizing_follows_the_paper() {
        let (ma, mb) = Sizing::PowerOfTwo.arrays_for(1000);
        assert_eq!((ma, mb), (2048, 1024));
        let (ma, mb) = Sizing::PowerOfTwo.arrays_for(700);
        assert_eq!((ma, mb), (1024, 1024));
        assert!(Sizing::PowerOfTwo.capacity_of(ma, mb) >= 700);
    }

    #[test]
    fn tight_sizing_is_one_and_a_third_plus_one() {
        let (ma, mb) = Sizing::Tight.arrays_for(3000);
        assert_eq!((ma, mb), (4000, 3000));
        assert_eq!(Sizing::Tight.capacity_of(ma, mb), 3000);
    }

    #[test]
    fn invalid_configs_are_rejected() {
        assert!(Config::with_value_bits(0).validate().is_err());
        assert!(Config::with_value_bits(65).validate().is_err());
        let c = Config {
            value_bits: 60,
            check_bits: 5,
            ..Config::default()
        };
        assert!(matches!(c.validate(), Err(ConfigError::CheckBits { .. })));
        let c = Config {
            columns: 0,
            ..Config::default()
        };
        assert!(c.validate().is_err());
        assert!(Config::with_value_bits(64).validate().is_ok());
    }
}
