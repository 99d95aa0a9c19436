#!/usr/bin/env bash
# Install the Debian packages whose real name lists the NDN tests and
# benchmarks read (see ../shared/DATA.md): EasyList/EasyPrivacy domains
# (webext-ublock-origin-firefox, without its recommended browser), the
# Public Suffix List and an English word list. Idempotent.
set -euo pipefail
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
APT="$SUDO apt-get -o DPkg::Lock::Timeout=600"
need=()
for p in webext-ublock-origin-firefox publicsuffix wamerican-huge; do
    dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
if [ "${#need[@]}" -gt 0 ]; then
    echo "setup-data: installing ${need[*]}"
    $APT update -qq
    DEBIAN_FRONTEND=noninteractive $APT install -y -qq --no-install-recommends "${need[@]}"
fi
