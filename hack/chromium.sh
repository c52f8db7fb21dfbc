#!/usr/bin/env bash
# hack/chromium.sh — print the path of a headless-capable Chromium for the
# console's browser test (internal/server TestConsoleInBrowser), installing
# Debian's `chromium` package when there is none.
#
# Like DATABASE_URL and KUBEBUILDER_ASSETS, a browser the user already has is
# used as it is: CHROME_PATH (Chrome, Chromium, chrome-headless-shell) wins.
# Otherwise `chromium` on PATH; otherwise apt-get installs Debian's package
# (the only browser build this environment can fetch: the test never
# downloads a browser of its own). Logs go to stderr, the path to stdout.
set -euo pipefail

if [ -n "${CHROME_PATH:-}" ]; then
  if [ -x "$CHROME_PATH" ]; then
    echo "$CHROME_PATH"
    exit 0
  fi
  echo "chromium: CHROME_PATH=$CHROME_PATH is not an executable; unset it to use Debian's chromium" >&2
  exit 1
fi

if path="$(command -v chromium)"; then
  echo "$path"
  exit 0
fi

if ! command -v apt-get >/dev/null; then
  echo "chromium: not on PATH and no apt-get to install it; install Chromium or set CHROME_PATH" >&2
  exit 1
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then
  if ! command -v sudo >/dev/null; then
    echo "chromium: not on PATH; installing it needs root (apt-get install chromium) or set CHROME_PATH" >&2
    exit 1
  fi
  SUDO="sudo"
fi
echo ">> installing Debian's chromium package (once)" >&2
$SUDO apt-get update -qq >&2
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends chromium >&2
command -v chromium
