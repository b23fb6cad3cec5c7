//! Docker node containers for tests: the locally built Debian node image (debootstrap, tagged by a hash of its recipe) and containers started from it, removed by a drop guard.
