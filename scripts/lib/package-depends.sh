# Sourced by scripts/package and scripts/check-package: the package's libc6 dependency, and the
# packages of the root it is installed into.

# What the package depends on (the Depends of scripts/package's .deb: first choice of each
# alternative, without versions, sorted). scripts/test has scripts/check-package make a Debian root
# with them while the build runs (--prepare-root: most of it waiting on the mirror);
# scripts/check-package then finds that root cached when the .deb's Depends are these, and when
# they are not, says so and makes the right one.
RAIN_ROOT_PACKAGES="libc6,libcbor0.8,libcurl4,libfido2-1,libgcc-s1,libpq5,libprotobuf-c1,libpsl5,libsecp256k1-1,libsecret-1-0,libsqlite3-0,libssl3,libstdc++6,libtss2-esys-3.0.2-0,libtss2-mu0,libtss2-rc0,libtss2-tcti-device0,libtss2-tctildr0,publicsuffix"

# raise_libc_for_relr SHLIBS BINARY...: prints SHLIBS (a Depends list from dpkg-shlibdeps) with
# libc6 raised to (>= 2.36) when one of the binaries needs packed relative relocations (symbol
# version GLIBC_ABI_DT_RELR, glibc 2.36; RAIN_RELEASE_FLAGS links with them). dpkg-shlibdeps does not
# count that version: a package that said less would install on glibc 2.35 and then not start.
# A higher libc6 bound is kept; a list without libc6 gets one.
raise_libc_for_relr() {
  local shlibs=$1 current
  shift
  # grep reads all of readelf's output: with -q, readelf's SIGPIPE would fail a pipefail pipeline.
  if readelf -V "$@" | grep GLIBC_ABI_DT_RELR >/dev/null; then
    current=$(printf '%s\n' "$shlibs" | sed -n 's/.*libc6 (>= \([^)]*\)).*/\1/p')
    if [ -z "$current" ]; then
      shlibs="libc6 (>= 2.36), $shlibs"
    elif dpkg --compare-versions "$current" lt 2.36; then
      shlibs=$(printf '%s\n' "$shlibs" | sed "s/libc6 (>= $current)/libc6 (>= 2.36)/")
    fi
  fi
  printf '%s\n' "$shlibs"
}
