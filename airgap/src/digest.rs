//! Content digests as the OCI image spec defines them (image-spec v1.1, "Digests"): `sha256:` and 64
//! lower-case hex digits. Only sha256 is produced or accepted, as every registry and runtime uses it.

use crate::error::{AirgapError, Result};
use sha2::{Digest as _, Sha256};
use std::fmt;
use std::io::{self, Read, Write};

/// A sha256 content digest, kept as its 64 lower-case hex digits.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Digest {
    hex: String,
}

impl Digest {
    /// Parses `sha256:<64 hex>`. Errors: `AirgapError::Digest` for any other algorithm or form.
    pub fn parse(s: &str) -> Result<Self> {
        let hex = s
            .strip_prefix("sha256:")
            .ok_or_else(|| AirgapError::Digest(s.to_string()))?;
        Self::from_hex(hex).ok_or_else(|| AirgapError::Digest(s.to_string()))
    }

    /// Builds a digest from 64 lower-case hex digits; `None` for anything else.
    pub fn from_hex(hex: &str) -> Option<Self> {
        let ok = hex.len() == 64
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        ok.then(|| Digest {
            hex: hex.to_string(),
        })
    }

    /// The sha256 of `bytes`.
    pub fn of(bytes: &[u8]) -> Self {
        Digest {
            hex: hex::encode(Sha256::digest(bytes)),
        }
    }

    /// The 64 hex digits without the algorithm prefix (the file name under `blobs/sha256/`).
    pub fn hex(&self) -> &str {
        &self.hex
    }

    /// Checks that `bytes` hash to this digest. Errors: `DigestMismatch` naming `what`.
    pub fn verify(&self, bytes: &[u8], what: &str) -> Result<()> {
        let actual = Digest::of(bytes);
        if &actual == self {
            Ok(())
        } else {
            Err(AirgapError::DigestMismatch {
                what: what.to_string(),
                expected: self.to_string(),
                actual: actual.to_string(),
            })
        }
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{}", self.hex)
    }
}

impl serde::Serialize for Digest {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Digest {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Digest::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// A writer (or reader wrapper) that hashes every byte passing through it and counts them.
pub struct Hashing<T> {
    inner: T,
    hasher: Sha256,
    count: u64,
}

impl<T> Hashing<T> {
    /// Wraps `inner`.
    pub fn new(inner: T) -> Self {
        Hashing {
            inner,
            hasher: Sha256::new(),
            count: 0,
        }
    }

    /// Bytes passed through so far.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The digest and byte count of everything seen so far, and the inner value.
    pub fn finish(self) -> (Digest, u64, T) {
        (
            Digest {
                hex: hex::encode(self.hasher.finalize()),
            },
            self.count,
            self.inner,
        )
    }
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.count += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

impl<R: Read> Read for Hashing<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        self.count += n as u64;
        Ok(n)
    }
}

/// Hashes everything `reader` yields; returns the digest and the byte count.
pub fn digest_reader(reader: impl Read) -> io::Result<(Digest, u64)> {
    let mut h = Hashing::new(reader);
    io::copy(&mut h, &mut io::sink())?;
    let (d, n, _) = h.finish();
    Ok((d, n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints() {
        let d = Digest::of(b"abc");
        assert_eq!(
            d.to_string(),
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(Digest::parse(&d.to_string()).ok(), Some(d.clone()));
        assert!(Digest::parse("sha512:ab").is_err());
        assert!(Digest::parse("sha256:ABC").is_err());
        assert!(d.verify(b"abd", "x").is_err());
        let (r, n) = digest_reader(&b"abc"[..])
            .map_err(|e| e.to_string())
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((r, n), (d, 3));
    }
}
