//! Air-gapped installs: the OCI distribution client, the bundle writer (an OCI image layout plus
//! packages, binaries and a manifest), the verifier/reader and import into a registry or node runtimes.
