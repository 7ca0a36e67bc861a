# Sourced by the scripts: installs what a fresh Debian machine lacks, once.
RAIN_APT_PACKAGES=(libprotobuf-c-dev protobuf-c-compiler libssl-dev libsqlite3-dev pkg-config libcbor-dev libpsl-dev publicsuffix openssl libpq-dev postgresql
  libtss2-dev swtpm swtpm-tools tpm2-tools libsecret-1-dev gnome-keyring dbus libglib2.0-bin libsecret-tools faketime
  pinentry-tty
  libsecp256k1-dev  # the wallet's Ethereum signatures (RFC 6979, low-s, recoverable)
  libfido2-dev  # FIDO2 security keys (RainSecurityKey)
  iproute2  # scripts/netfault: network namespaces (ip netns) and veth pairs (ip link)
  debootstrap  # scripts/check-package: the fresh Debian root the package is installed into
  # The SMTP and SMS code senders (libcurl) and the SMTP server their tests start.
  libcurl4-openssl-dev python3-aiosmtpd
  # Shell completion and man page checks (bash is there already).
  zsh fish man-db groff-base
  # The example client in another language (Python, from proto/PROTOCOL.md and protoc --python_out).
  python3 python3-protobuf protobuf-compiler)

# The flags of every release build of the binaries (scripts/run, scripts/package, the benches):
# - --static-swift-stdlib: the Swift runtime and Foundation inside, so they run without the
#   toolchain, and only the pages they use are loaded (docs/performance.md);
# - lld with packed relative relocations (DT_RELR, glibc 2.36): a static Swift binary has tens of
#   thousands of relative relocations; as RELA entries they are all read at start and kept
#   resident in the daemon's VmRSS, as RELR they take a small fraction of that
#   (docs/performance.md). lld comes with the Swift toolchain.
RAIN_RELEASE_FLAGS=(--static-swift-stdlib -Xswiftc -use-ld=lld -Xlinker -z -Xlinker pack-relative-relocs)

ensure_deps() {
  local missing=()
  for p in "${RAIN_APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  command -v taskset >/dev/null 2>&1 || missing+=(util-linux)
  command -v gcc >/dev/null 2>&1 || missing+=(gcc)
  # systemd-analyze and systemd-socket-activate: the unit and socket-activation tests.
  command -v systemd-socket-activate >/dev/null 2>&1 || missing+=(systemd)
  if [ ${#missing[@]} -gt 0 ]; then
    echo "installing: ${missing[*]}" >&2
    local sudo=""
    [ "$(id -u)" = 0 ] || sudo="sudo"
    $sudo apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >&2
  fi
  if ! command -v swift >/dev/null 2>&1; then
    [ -x /opt/swift/usr/bin/swift ] && export PATH=/opt/swift/usr/bin:$PATH
  fi
  command -v swift >/dev/null 2>&1 || { echo "error: swift is not on PATH (expected Swift 6.3 at /opt/swift)" >&2; return 1; }
}
