//! A real OCI registry (Debian's docker-registry) on a loopback port with a temporary storage directory, stopped and removed by a drop guard.
