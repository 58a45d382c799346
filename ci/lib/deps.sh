# Sourced by the ci/ scripts: installs the Debian packages plait needs when
# they are missing (as root, with apt-get), or says which are missing.
PLAIT_DEBIAN_PACKAGES=(build-essential cmake ninja-build pkg-config libssl-dev
  libgloo-dev libfabric-dev libcriterion-dev binutils
  iproute2 openssh-server openssh-client) # the last three: tests/tools/hosts (namespaces, ssh)

plait_ensure_packages() {
  local missing=() p
  for p in "${PLAIT_DEBIAN_PACKAGES[@]}" "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" != 0 ]; then
    echo "ci: missing Debian packages: ${missing[*]} (run as root, or: sudo apt-get install ${missing[*]})" >&2
    return 1
  fi
  echo "ci: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}
